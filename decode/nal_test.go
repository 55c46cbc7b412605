package decode

import (
	"errors"
	"testing"

	"github.com/asticode/go-astiav"

	"github.com/vidfs/vidfs/internal/testvideo"
)

// TestStartsIDR reads every packet of H.264 test videos in both packagings (length-prefixed NAL
// units in MP4 and Matroska, start codes in AVI and MPEG-TS) and checks which startsIDR finds
// IDR pictures in: the keyframes of x264's closed GOPs are all IDR, while of an intra-refresh
// stream's keyframes only the first is.
func TestStartsIDR(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nalLength int
		onlyFirst bool // only the first keyframe is IDR
	}{
		{"h264_gop16.mp4", 4, false}, {"vfr.mkv", 4, false}, {"h264_bframes.avi", 0, false},
		{"start10.ts", 0, false}, {"h264_refresh444.mp4", 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := astiav.AllocFormatContext()
			defer fc.Free()
			if err := fc.OpenInput(testvideo.Path(tc.name), nil, nil); err != nil {
				t.Fatal(err)
			}
			defer fc.CloseInput()
			if err := fc.FindStreamInfo(nil); err != nil {
				t.Fatal(err)
			}
			st := fc.Streams()[0]
			if got := avcNALLength(st.CodecParameters().ExtraData()); got != tc.nalLength {
				t.Errorf("NAL length size %d, want %d", got, tc.nalLength)
			}
			pkt := astiav.AllocPacket()
			defer pkt.Free()
			var keys, idrs, idrKeys int
			for n := 0; ; n++ {
				if err := fc.ReadFrame(pkt); errors.Is(err, astiav.ErrEof) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				key, idr := pkt.Flags().Has(astiav.PacketFlagKey), startsIDR(pkt.Data(), tc.nalLength)
				if n == 0 && !idr {
					t.Errorf("packet 0 holds no IDR picture")
				}
				if idr && !key {
					t.Errorf("packet %d: an IDR picture in a packet not marked key", n)
				}
				if key {
					keys++
				}
				if idr {
					idrs++
				}
				if key && idr {
					idrKeys++
				}
				pkt.Unref()
			}
			if want := keys; tc.onlyFirst {
				if idrs != 1 || keys < 2 {
					t.Errorf("%d IDR packets among %d keyframes, want 1 among several", idrs, keys)
				}
			} else if idrKeys != want || keys < 2 {
				t.Errorf("%d of %d keyframes found IDR, want all", idrKeys, keys)
			}
		})
	}
	// Packets that do not parse are not IDR: lengths past the end, a zero length, nothing.
	for _, pkt := range [][]byte{{0, 0, 0, 9, 0x65}, {0, 0, 0, 0, 0x65}, {}, {0, 0, 1}} {
		if startsIDR(pkt, 4) {
			t.Errorf("%x found IDR with 4-byte lengths", pkt)
		}
	}
	if !startsIDR([]byte{0, 0, 0, 2, 0x09, 0xf0, 0, 0, 0, 1, 0x65}, 4) || !startsIDR([]byte{0, 0, 0, 1, 0x09, 0xf0, 0, 0, 1, 0x65, 0x88}, 0) {
		t.Error("an IDR slice after an access unit delimiter not found")
	}
}
