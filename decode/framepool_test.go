package decode_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/vidfs/vidfs/decode"
)

// TestSharedFrameBuffers: a pool whose decoders are opened and closed clip after clip (one idle
// decoder, videos in random order), and so decode into frame buffers earlier decoders gave back,
// gives every clip the bytes a decoder opened for it alone gives with FFmpeg's own buffers, on
// every test video, the damaged one included (its clips fail alike).
func TestSharedFrameBuffers(t *testing.T) {
	var names []string
	for _, v := range goodVideos {
		names = append(names, v.name)
	}
	for _, v := range classVideos {
		names = append(names, v.name)
	}
	names = append(names, "corrupt.mp4")
	type job struct {
		info *decode.Info
		c    decode.Clip
	}
	var jobs []job
	for _, name := range names {
		info := probe(t, name)
		for k := range 3 {
			n := min(8, info.Frames)
			start := (info.Frames - n) * k / 2
			jobs = append(jobs, job{info, decode.Clip{Start: start, Frames: n, Stride: 1}})
		}
	}
	rand.New(rand.NewPCG(4, 8)).Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	pool := newPool(t, decode.PoolOptions{Concurrency: 1, Idle: 1})
	defer pool.Close()
	o := decode.Output{Width: 96, Height: 64, Resize: decode.Crop}
	for _, j := range jobs {
		got := make([]byte, j.c.Frames*o.FrameBytes())
		fresh := make([]byte, len(got))
		_, err := pool.DecodeClip(context.Background(), j.info, j.c, o, got)
		_, freshErr := decode.DecodeClip(context.Background(), j.info, j.c, o, fresh, 1)
		switch {
		case (err == nil) != (freshErr == nil):
			t.Errorf("%s clip %+v: pool: %v; alone: %v", j.info.Path, j.c, err, freshErr)
		case err != nil && err.Error() != freshErr.Error():
			t.Errorf("%s clip %+v: pool failed with %v, alone with %v", j.info.Path, j.c, err, freshErr)
		case err == nil && !bytes.Equal(got, fresh):
			t.Errorf("%s clip %+v: the pool's bytes differ from a decoder's alone", j.info.Path, j.c)
		}
	}
	reused, made, idle := decode.FrameBuffers(pool)
	t.Logf("%d clips: %d frame buffers handed out again, %d allocated, %d bytes idle", len(jobs), reused, made, idle)
	if reused < made {
		t.Errorf("%d frame buffers handed out again, %d allocated: decoders did not take over earlier ones", reused, made)
	}
}

// TestSharedFrameBuffersClose closes a pool while its decoders decode (the race detector
// watches): those decoders keep their frame buffers until their clips end.
func TestSharedFrameBuffersClose(t *testing.T) {
	info := probe(t, "h264_gop16.mp4")
	o := decode.Output{Width: 64, Height: 64, Resize: decode.Crop}
	for round := range 4 {
		pool := newPool(t, decode.PoolOptions{Concurrency: 3, Idle: 1})
		var wg sync.WaitGroup
		started := make(chan struct{}, 3*6)
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 8*o.FrameBytes())
				for k := range 6 {
					c := decode.Clip{Start: (g*29 + k*13 + round) % (info.Frames - 8), Frames: 8, Stride: 1}
					if _, err := pool.DecodeClip(context.Background(), info, c, o, buf); err != nil && !errors.Is(err, decode.ErrPoolClosed) {
						t.Error(err)
					}
					started <- struct{}{}
				}
			}()
		}
		for range round + 1 { // some clips decoded, others under way
			<-started
		}
		pool.Close()
		wg.Wait()
	}
}
