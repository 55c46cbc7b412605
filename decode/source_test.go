package decode_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// memSource is a video's bytes in memory, counting reads, failing those past failAt when set.
type memSource struct {
	*bytes.Reader
	reads  *atomic.Int64
	failAt int64 // reads at or past this offset fail (0: none)
}

func (m memSource) ReadAt(p []byte, off int64) (int, error) {
	m.reads.Add(1)
	if m.failAt > 0 && off+int64(len(p)) > m.failAt {
		return 0, errors.New("the network is down")
	}
	return m.Reader.ReadAt(p, off)
}

// memOpener opens the test videos by name from memory, as a bucket's objects would be.
func memOpener(t *testing.T, reads *atomic.Int64, failAt int64) decode.Opener {
	return func(path string) (decode.Source, error) {
		b, err := os.ReadFile(testvideo.Path(filepath.Base(path)))
		if err != nil {
			return nil, err
		}
		return memSource{bytes.NewReader(b), reads, failAt}, nil
	}
}

// TestProbeFromSource: every test video probed through a Source (FFmpeg reading through read and
// seek callbacks) has the same probe table as probed from its file, and its clips decode to the
// same bytes; an MP4 with its moov at the end (ffmpeg's default) among them.
func TestProbeFromSource(t *testing.T) {
	var reads atomic.Int64
	open := memOpener(t, &reads, 0)
	names := []string{}
	for _, v := range goodVideos {
		names = append(names, v.name)
	}
	names = append(names, "mpeg2_cut.mpg", "h264_bframes.avi")
	pool, err := decode.NewPool(decode.PoolOptions{Concurrency: 2, HWAccel: decode.HWNone, Open: open})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	o := decode.Output{Width: 64, Height: 48, Resize: decode.Crop}
	for _, name := range names {
		local, err := decode.Probe(testvideo.Path(name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		path := "mem://" + name
		before := reads.Load()
		remote, err := decode.ProbeFrom(path, open)
		if err != nil {
			t.Fatalf("%s through a Source: %v", name, err)
		}
		if reads.Load() == before {
			t.Fatalf("%s: probed without reading its Source", name)
		}
		remote.Path = local.Path
		if !reflect.DeepEqual(local, remote) {
			t.Fatalf("%s: probe tables differ:\nfile   %+v\nsource %+v", name, local, remote)
		}
		remote.Path = path
		c := decode.Clip{Start: min(local.Frames/3, local.Frames-7), Frames: 4, Stride: 2}
		want := make([]byte, 4*o.FrameBytes())
		got := make([]byte, len(want))
		if _, err := decode.DecodeClip(context.Background(), local, c, o, want, 1); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := pool.DecodeClip(context.Background(), remote, c, o, got); err != nil {
			t.Fatalf("%s through a Source: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: clip at %d decoded through a Source differs from the file's", name, c.Start)
		}
	}
}

// TestSourceFailure: a Source that fails part way is an error of kind ErrUnreadable that says
// why, not a truncated probe or damaged frames.
func TestSourceFailure(t *testing.T) {
	var reads atomic.Int64
	st, err := os.Stat(testvideo.Path("h264_gop16.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = decode.ProbeFrom("mem://h264_gop16.mp4", memOpener(t, &reads, st.Size()/2))
	if !errors.Is(err, decode.ErrUnreadable) || !bytes.Contains([]byte(err.Error()), []byte("the network is down")) {
		t.Fatalf("probe through a failing Source: %v, want ErrUnreadable saying why", err)
	}
}
