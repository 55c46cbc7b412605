package decode_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// isKind reports whether err is a *decode.Error of the given kind that names a file.
func isKind(err, kind error) bool {
	var de *decode.Error
	return errors.Is(err, kind) && errors.As(err, &de) && de.Path != "" && strings.Contains(err.Error(), de.Path)
}

func TestProbeErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path string
		kind error
		says string
	}{
		{testvideo.Path("empty.mp4"), decode.ErrNotVideo, "empty file"},
		{testvideo.Path("random.mp4"), decode.ErrNotVideo, "not a readable video container"},
		{testvideo.Path("corrupt.mp4.damage"), decode.ErrNotVideo, "not a readable video container"},
		{testvideo.Path("unknown_codec.avi"), decode.ErrUnsupportedCodec, `FourCC "XVQZ"`},
		{dir, decode.ErrUnreadable, "is a directory"},
		{dir + "/missing.mp4", decode.ErrUnreadable, "cannot read file"},
	} {
		info, err := decode.Probe(tc.path)
		if info != nil || !isKind(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Probe(%s): got %v, want %v saying %q", tc.path, err, tc.kind, tc.says)
		}
	}
	if _, err := decode.Probe(dir + "/missing.mp4"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v does not wrap fs.ErrNotExist", err)
	}
}

func TestTruncated(t *testing.T) {
	info := probe(t, "truncated.mp4")
	if !info.Truncated || info.DeclaredFrames != 100 || info.Frames < 40 || info.Frames >= 100 {
		t.Fatalf("truncated: %v, declared %d, frames %d; want truncated, 100 declared, fewer read",
			info.Truncated, info.DeclaredFrames, info.Frames)
	}
	o := stretchOutput(info)
	buf := make([]byte, 4*o.FrameBytes())
	// Everything before the group of pictures that holds the cut decodes exactly.
	last := info.Keyframes[info.KeyframeAtOrBefore(info.Frames-1)].Frame
	for s := 0; s+4 <= last; s += 3 {
		c := decode.Clip{Start: s, Frames: 4, Stride: 1}
		if _, err := decode.DecodeClip(context.Background(), info, c, o, buf, 1); err != nil {
			t.Fatalf("clip %+v before the cut: %v", c, err)
		}
		if got, w := readClip(t, info, o, buf, 4), want(c, info.Frames); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("clip %+v: got %v, want %v", c, got, w)
		}
	}
	// The last frame's packet is cut short.
	c := decode.Clip{Start: info.Frames - 4, Frames: 4, Stride: 1}
	if _, err := decode.DecodeClip(context.Background(), info, c, o, buf, 1); !isKind(err, decode.ErrCorrupt) {
		t.Errorf("clip %+v over the cut: got %v, want ErrCorrupt", c, err)
	}
	c = decode.Clip{Start: info.Frames - 2, Frames: 4, Stride: 1}
	if _, err := decode.DecodeClip(context.Background(), info, c, o, buf, 1); !isKind(err, decode.ErrTooFewFrames) {
		t.Errorf("clip %+v past the cut: got %v, want ErrTooFewFrames", c, err)
	}
}

// damagedFrames lists the frames of corrupt.mp4 whose packets hold damaged bytes, from the
// byte range gen.sh recorded and the packet positions the ffmpeg CLI's ffprobe reports.
func damagedFrames(t *testing.T, info *decode.Info) map[int]bool {
	b, err := os.ReadFile(testvideo.Path("corrupt.mp4.damage"))
	if err != nil {
		t.Fatal(err)
	}
	var off, n int64
	if _, err := fmt.Sscan(string(b), &off, &n); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ffprobe", "-v", "quiet", "-select_streams", "v", "-show_entries",
		"packet=pts,pos,size", "-of", "compact=p=0:nk=0", testvideo.Path("corrupt.mp4")).Output()
	if err != nil {
		t.Fatalf("ffprobe (Debian's ffmpeg package): %v", err)
	}
	damaged := map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := map[string]int64{}
		for _, kv := range strings.Split(line, "|") {
			k, v, _ := strings.Cut(kv, "=")
			f[k], _ = strconv.ParseInt(v, 10, 64)
		}
		if f["pos"] < off+n && f["pos"]+f["size"] > off {
			damaged[slicesIndex(info.PTS, f["pts"])] = true
		}
	}
	if len(damaged) == 0 {
		t.Fatal("no packet of corrupt.mp4 lies in the damaged range; regenerate testdata")
	}
	return damaged
}

func slicesIndex(s []int64, v int64) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// TestCorrupt: in a video with damaged bytes in the middle, every clip that holds a damaged
// frame fails with ErrCorrupt, every clip of undamaged groups of pictures decodes exactly, and
// a clip in a damaged group either fails or is exact (never wrong frames).
func TestCorrupt(t *testing.T) {
	info := probe(t, "corrupt.mp4")
	damaged := damagedFrames(t, info)
	badGOP := map[int]bool{}
	for f := range damaged {
		badGOP[info.KeyframeAtOrBefore(f)] = true
	}
	pool := newPool(t, decode.PoolOptions{Concurrency: 1})
	defer pool.Close()
	o := stretchOutput(info)
	buf := make([]byte, 4*o.FrameBytes())
	failed, clean := 0, 0
	for _, order := range []string{"forward", "backward"} {
		for k := range info.Frames - 3 {
			s := k
			if order == "backward" {
				s = info.Frames - 4 - k
			}
			c := decode.Clip{Start: s, Frames: 4, Stride: 1}
			holdsDamage, inBadGOP := false, false
			for _, i := range want(c, info.Frames) {
				holdsDamage = holdsDamage || damaged[i]
				inBadGOP = inBadGOP || badGOP[info.KeyframeAtOrBefore(i)]
			}
			_, err := pool.DecodeClip(context.Background(), info, c, o, buf)
			switch {
			case err != nil && !isKind(err, decode.ErrCorrupt):
				t.Errorf("clip %+v: got %v, want nil or ErrCorrupt", c, err)
			case err != nil && !inBadGOP:
				t.Errorf("clip %+v of undamaged frames failed: %v", c, err)
			case err == nil && holdsDamage:
				t.Errorf("clip %+v holds damaged frames but decoded", c)
			case err == nil:
				clean++
				if got, w := readClip(t, info, o, buf, 4), want(c, info.Frames); fmt.Sprint(got) != fmt.Sprint(w) {
					t.Errorf("clip %+v: got frames %v, want %v", c, got, w)
				}
			default:
				failed++
			}
		}
	}
	t.Logf("damaged frames %v; %d clips failed, %d decoded exactly", damaged, failed, clean)
	if failed == 0 || clean == 0 {
		t.Errorf("%d failed, %d clean: want both", failed, clean)
	}
}

// TestUncleanKeyframes: the keyframes of an intra-refresh stream (recovery points, decodable only
// once the refresh has swept the picture) give frames only after a while when decoding starts
// there. Clips right after them decode exactly from an earlier start, the pool reports those
// keyframes unusable, and a probe table that says so is started from them no more.
func TestUncleanKeyframes(t *testing.T) {
	info := probe(t, "h264_refresh444.mp4")
	o := stretchOutput(info)
	decodeAfterKeyframes := func(pool *decode.Pool) {
		for _, k := range info.Keyframes[1:] {
			c := decode.Clip{Start: k.Frame + 1, Frames: 4, Stride: 2}
			if _, err := pool.DecodeClip(context.Background(), info, c, o, make([]byte, c.Frames*o.FrameBytes())); err != nil {
				t.Errorf("clip %+v after keyframe %d: %v", c, k.Frame, err)
			}
		}
	}
	pool := newPool(t, decode.PoolOptions{Concurrency: 1})
	decodeAfterKeyframes(pool)
	marked := pool.UnusableKeyframes()[info.Path]
	var all []int
	for _, k := range info.Keyframes[1:] {
		all = append(all, k.Frame)
	}
	if fmt.Sprint(marked) != fmt.Sprint(all) || pool.Stats().KeyframeFallbacks != int64(len(all)) {
		t.Errorf("keyframes marked unusable %v, %d fallbacks; want %v, one each", marked, pool.Stats().KeyframeFallbacks, all)
	}
	pool.Close()

	// The probe cache keeps the marks in the table: a new pool starts earlier at once.
	for i := range info.Keyframes[1:] {
		info.Keyframes[i+1].Unusable = true
	}
	pool = newPool(t, decode.PoolOptions{Concurrency: 1})
	defer pool.Close()
	decodeAfterKeyframes(pool)
	if st := pool.Stats(); st.KeyframeFallbacks != 0 || len(pool.UnusableKeyframes()) != 0 {
		t.Errorf("with the marks in the table: %d fallbacks, %v newly marked; want none", st.KeyframeFallbacks, pool.UnusableKeyframes())
	}
}
