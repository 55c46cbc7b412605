package decode

import (
	"testing"

	"github.com/asticode/go-astiav"
)

// TestLanding: after a seek, the packet a demuxer lands on is the keyframe whose size, place in
// the file (where both are known) and bytes (where the table has their checksum) it has, at or
// before the keyframe asked for; and a landing two keyframes of the whole table could be (one of
// them past the keyframe asked for, where a demuxer may land too) is never taken for either.
// A program stream's keyframes of one size whose places the demuxer did not give were taken for
// the first of them, and every frame after the landing numbered from another group of pictures.
func TestLanding(t *testing.T) {
	body := func(b byte) []byte {
		d := make([]byte, 100-10*int(b/4)) // 4: 90 bytes

		for i := range d {
			d[i] = b + byte(i)
		}
		return d
	}
	packet := func(t *testing.T, data []byte, pos int64) *astiav.Packet {
		t.Helper()
		p := astiav.AllocPacket()
		t.Cleanup(p.Free)
		if err := p.FromData(data); err != nil {
			t.Fatal(err)
		}
		p.SetPos(pos)
		return p
	}
	sumOf := func(t *testing.T, data []byte) uint32 { return packetSum(packet(t, data, -1)) }
	// Keyframes 1, 2 and 3 are of the same size: 1 and 3 with unknown places, 2 at a known one.
	withSums := func(t *testing.T) *Info {
		return &Info{Keyframes: []Keyframe{
			{Frame: 0, Packet: 0, Pos: 0, Size: 50, Sum: 1},
			{Frame: 12, Packet: 10, Pos: -1, Size: 100, Sum: sumOf(t, body(1))},
			{Frame: 24, Packet: 22, Pos: 5000, Size: 100, Sum: sumOf(t, body(2))},
			{Frame: 36, Packet: 34, Pos: -1, Size: 100, Sum: sumOf(t, body(3))},
			{Frame: 48, Packet: 46, Pos: -1, Size: 90, Sum: sumOf(t, body(4))},
		}}
	}
	// Keyframe 3's bytes are keyframe 1's (a still scene, black between shots).
	withTwins := func(t *testing.T) *Info {
		in := withSums(t)
		in.Keyframes[3].Sum = in.Keyframes[1].Sum
		return in
	}
	withoutSums := func(t *testing.T) *Info {
		in := withSums(t)
		for i := range in.Keyframes {
			in.Keyframes[i].Sum = 0 // probed before checksums were kept
		}
		return in
	}
	for _, c := range []struct {
		name      string
		info      func(*testing.T) *Info
		kf        int // the keyframe asked for
		data      []byte
		pos       int64
		want      int // the keyframe's frame; -1: none it may be taken for
		wantSure  bool
		whyNoSure string
	}{
		{"the one asked for, by its bytes", withSums, 3, body(3), -1, 36, true, ""},
		{"an earlier one of the same size, by its bytes", withSums, 3, body(1), -1, 12, true, ""},
		{"by its place", withSums, 3, body(2), 5000, 24, true, ""},
		{"a place and bytes that are no keyframe's", withSums, 2, body(2), 7000, -1, false, ""},
		{"a place that could be a keyframe's whose place is unknown", withoutSums, 2, body(2), 7000, 12, false, "12 and 36 are of its size with unknown places"},
		{"bytes of an earlier keyframe and a later one", withTwins, 2, body(1), -1, 12, false, "36's bytes are 12's: the demuxer may have landed past 24"},
		{"a place of its own among twins", withTwins, 3, body(2), 5000, 24, true, "one packet a place"},
		{"bytes of no keyframe's", withSums, 3, body(9), -1, -1, false, ""},
		{"not after the one asked for", withSums, 2, body(3), -1, -1, false, ""},
		{"unsure without checksums", withoutSums, 3, body(3), -1, 12, false, "keyframes 12 and 36 are of its size, places unknown"},
		{"sure without checksums where one alone fits", withoutSums, 4, body(4), -1, 48, true, ""},
		{"sure by place without checksums", withoutSums, 3, body(2), 5000, 24, true, "one packet a place"},
	} {
		t.Run(c.name, func(t *testing.T) {
			kk, ok, sure := c.info(t).landing(c.kf, packet(t, c.data, c.pos))
			switch {
			case c.want < 0 && ok && sure:
				t.Fatalf("landed surely on keyframe %d, want none", kk.Frame)
			case c.want >= 0 && !ok:
				t.Fatalf("no keyframe, want %d", c.want)
			case c.want >= 0 && sure && kk.Frame != c.want:
				t.Fatalf("keyframe %d, want %d", kk.Frame, c.want)
			case ok && sure != c.wantSure:
				t.Fatalf("sure %v, want %v (%s)", sure, c.wantSure, c.whyNoSure)
			}
		})
	}
}
