package load

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/copystore"
	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/tier"
)

// TestTierCodecChoice: without a codec asked for, the tier stores samples as they are when all of
// them fit within its bound so, and with zstd, the smallest, when they do not.
func TestTierCodecChoice(t *testing.T) {
	const S = 16 * 224 * 224 * 3
	for _, tc := range []struct {
		asked   diskstore.Codec
		samples int
		bound   int64
		want    diskstore.Codec
	}{
		{0, 1000, 1000 * (S + tier.HeaderSize), diskstore.None},
		{0, 1001, 1000 * (S + tier.HeaderSize), diskstore.Zstd},
		{diskstore.LZ4, 10, 1 << 40, diskstore.LZ4},
		{diskstore.None, 1 << 20, 1 << 30, diskstore.None},
	} {
		if got, why := tierCodec(tc.asked, tc.samples, S, tc.bound); got != tc.want || why == "" {
			t.Errorf("asked %v, %d samples, bound %d: %v (%s), want %v", tc.asked, tc.samples, tc.bound, got, why, tc.want)
		}
	}
}

// TestFrameCodecCounts: the frames the auto codec weighs are those of every video, counted once
// a length: the same as counting each video's.
func TestFrameCodecCounts(t *testing.T) {
	spec := layout.Spec{Frames: 4, Stride: 2, Step: 3, Height: 32, Width: 48, PadShort: true}
	var videos []layout.Video
	for k, n := range []int{100, 100, 57, 8, 3, 57} {
		videos = append(videos, layout.Video{Path: fmt.Sprintf("a/%d.mp4", k), Frames: n})
	}
	lay, err := layout.New(spec, videos)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{Layout: lay, Infos: InfoList{}, Output: SampleOutput(lay, decode.Crop, false), Decoder: noDecoder{}, Plans: noPlans{}})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for v := range lay.Videos {
		_, n := l.needBits(v, nil)
		want += n
	}
	if want == 0 {
		t.Fatal("no frame used")
	}
	bytes := int64(want) * int64(l.out.FrameBytes())
	if c, why := l.frameCodec(0, bytes); c != diskstore.None || !strings.Contains(why, fmt.Sprintf("(%d frames,", want)) {
		t.Errorf("a bound of exactly the frames: %v, %q; want none, %d frames", c, why, want)
	}
	if c, _ := l.frameCodec(0, bytes-1); c != diskstore.Huff {
		t.Errorf("a bound a byte short of the frames: %v, want huff", c)
	}
}

// noDecoder decodes nothing; noPlans plans nothing.
type (
	noDecoder struct{}
	noPlans   struct{}
)

func (noDecoder) DecodeClip(context.Context, *decode.Info, decode.Clip, decode.Output, []byte) (decode.Result, error) {
	return decode.Result{}, errors.New("no decoder")
}
func (noDecoder) Stats() decode.PoolStats       { return decode.PoolStats{} }
func (noPlans) Due(int) int                     { return -1 }
func (noPlans) Upcoming(dst []int, n int) []int { return dst }

// openFrames opens a training copy of frames of 48x48 pixels in dir.
func openFrames(t *testing.T, dir string) *copystore.Store {
	t.Helper()
	c, err := copystore.Open(copystore.Options{Dir: dir, MaxBytes: 1 << 30, Codec: diskstore.None, FrameBytes: 48 * 48 * 3, Width: 48, Videos: 4})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStoresShareLock: a directory is taken by one store at a time, whichever kind: a sample tier
// is refused where a training copy is open, and the other way round.
func TestStoresShareLock(t *testing.T) {
	dir := t.TempDir()
	c := openFrames(t, dir)
	if tr, err := tier.Open(tier.Options{Dir: dir, MaxBytes: 1 << 30, Codec: diskstore.None}); err == nil {
		tr.Close()
		t.Error("a sample tier on the copy's directory was opened")
	}
	c.Close()
	tr, err := tier.Open(tier.Options{Dir: dir, MaxBytes: 1 << 30, Codec: diskstore.None})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := copystore.Open(copystore.Options{Dir: dir, MaxBytes: 1 << 30, Codec: diskstore.None, FrameBytes: 3, Videos: 1}); err == nil {
		t.Error("a training copy on the tier's directory was opened")
	}
}

// TestStoresKeepEachOther: a directory may hold both kinds of store's files: opening one kind
// where the other kept its files removes nothing (what took hours to make is never thrown away
// by a changed flag; fs refuses the mismatch instead, TestKeepFollowsDisk).
func TestStoresKeepEachOther(t *testing.T) {
	dir := t.TempDir()
	frame := bytes.Repeat([]byte{7}, 48*48*3)
	c := openFrames(t, dir)
	if !c.Put(context.Background(), 1, sha256.Sum256([]byte("video 1")), 1, 4, []int{0}, frame, 0) {
		t.Fatal("a frame not queued")
	}
	c.Flush()
	c.Close()
	tr, err := tier.Open(tier.Options{Dir: dir, MaxBytes: 1 << 30, Codec: diskstore.None})
	if err != nil {
		t.Fatal(err)
	}
	if h := diskHolds(dir); !h.frames || h.samples {
		t.Errorf("the sample tier opened over a copy: the directory holds %+v, want the frames still", h)
	}
	tr.Put(sha256.Sum256([]byte("sample 1")), 1, frame)
	tr.Flush()
	tr.Close()
	c = openFrames(t, dir)
	defer c.Close()
	if h := diskHolds(dir); !h.frames || !h.samples {
		t.Errorf("the copy opened over a sample tier: the directory holds %+v, want both", h)
	}
}

// TestCopyKeepChoice: what auto keeps, and what an explicit kind does where the directory holds
// the other: frames where the samples share frames or do not fit as they are, samples where
// each has frames of its own and all fit, and whatever the directory holds from earlier mounts;
// asking for the kind it does not hold fails, naming the flag.
func TestCopyKeepChoice(t *testing.T) {
	const S = 1000
	for _, tc := range []struct {
		name    string
		asked   Keep
		h       held
		frames  int64 // the frames the samples use, in bytes
		bound   int64
		want    Keep
		wantErr bool
	}{
		{"shared frames", KeepAuto, held{}, 400 * S, 1 << 40, KeepCopy, false},
		{"own frames, all fit", KeepAuto, held{}, 1000 * S, 1 << 40, KeepSamples, false},
		{"own frames, too many", KeepAuto, held{}, 1000 * S, 100 * S, KeepCopy, false},
		{"a copy there", KeepAuto, held{frames: true}, 1000 * S, 1 << 40, KeepCopy, false},
		{"samples there", KeepAuto, held{samples: true}, 400 * S, 1 << 40, KeepSamples, false},
		{"samples asked, a copy there", KeepSamples, held{frames: true}, 400 * S, 1 << 40, 0, true},
		{"frames asked, samples there", KeepCopy, held{samples: true}, 1000 * S, 1 << 40, 0, true},
		{"samples asked, both there", KeepSamples, held{frames: true, samples: true}, 400 * S, 1 << 40, KeepSamples, false},
		{"frames asked, a copy there", KeepCopy, held{frames: true}, 400 * S, 1 << 40, KeepCopy, false},
	} {
		got, why, err := copyKeep(tc.asked, "/data/cache", tc.h, 1000, S, tc.frames, tc.bound)
		switch {
		case tc.wantErr && (err == nil || !strings.Contains(err.Error(), "--cache-keep") || !strings.Contains(err.Error(), "/data/cache")):
			t.Errorf("%s: %v, %v; want an error naming --cache-keep and the directory", tc.name, got, err)
		case !tc.wantErr && (err != nil || got != tc.want || why == ""):
			t.Errorf("%s: %v (%q), %v; want %v", tc.name, got, why, err, tc.want)
		}
	}
}

// TestParseKeep: --cache-keep takes each kind by its name, the training copy by its name before
// too ("frames"), and refuses anything else naming what it wants.
func TestParseKeep(t *testing.T) {
	for s, want := range map[string]Keep{"auto": KeepAuto, "samples": KeepSamples, "copy": KeepCopy, "frames": KeepCopy} {
		if got, err := ParseKeep(s); got != want || err != nil {
			t.Errorf("ParseKeep(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if KeepCopy.String() != "copy" {
		t.Errorf("KeepCopy is %q, want copy", KeepCopy)
	}
	if _, err := ParseKeep("tier"); err == nil || !strings.Contains(err.Error(), "auto, samples or copy") {
		t.Errorf("ParseKeep(tier): %v; want an error naming auto, samples or copy", err)
	}
}
