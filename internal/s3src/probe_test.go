package s3src_test

import (
	"context"
	"os"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/s3src"
	"github.com/vidfs/vidfs/internal/s3test"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// TestProbeGETs: probing an MP4 of several MiB through the bucket, with its moov at the end
// (ffmpeg's default) and at the start (+faststart), takes few GETs: the demuxer reads the whole
// object in file order, and a read that follows the last fetches more ahead each time, up to
// MaxRun, rather than one block per GET.
func TestProbeGETs(t *testing.T) {
	s := s3test.Start(t)
	const enc = "-g 48 -b:v 6M -maxrate 6M -bufsize 12M -vf scale=1280:720"
	end := testvideo.Transcode(t, testvideo.Megamind, enc)
	start := testvideo.Transcode(t, testvideo.Megamind, enc+" -movflags +faststart")
	s.Put("data", map[string]string{"v/end.mp4": end, "v/start.mp4": start})
	s3test.Env(t)
	p := s3test.NewProxy(t, s.Addr)
	for _, c := range []struct{ name, file string }{{"moov at the end", end}, {"moov at the start", start}} {
		t.Run(c.name, func(t *testing.T) {
			st, err := os.Stat(c.file)
			if err != nil {
				t.Fatal(err)
			}
			b := open(t, p.Endpoint(), "s3://data/v/", s3src.Options{})
			if _, err := b.List(context.Background()); err != nil {
				t.Fatal(err)
			}
			rel := "end.mp4"
			if c.file == start {
				rel = "start.mp4"
			}
			_, before, _, _ := p.Counts()
			info, err := decode.ProbeFrom(b.Path(rel), b.Open)
			if err != nil {
				t.Fatal(err)
			}
			_, after, _, _ := p.Counts()
			gets := after - before
			const mib = 1 << 20
			// The object in runs of 8 MiB, the runs growing to it from 1 MiB (1+2+4), the moov
			// read apart, and a GET again for the start after it.
			want := st.Size()/(8*mib) + 6
			t.Logf("%s: %.1f MiB, %d frames: %d GETs, %.1f MiB fetched", rel, float64(st.Size())/mib, info.Frames, gets, float64(b.Stats().BytesFetched)/mib)
			if st.Size() < 6*mib {
				t.Fatalf("%s is %d bytes: too small to tell", c.file, st.Size())
			}
			if gets > want {
				t.Errorf("probing %s (%d bytes) took %d GETs, want at most %d", rel, st.Size(), gets, want)
			}
		})
	}
}
