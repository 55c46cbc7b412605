package fs

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"testing/synctest"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/order"
)

// manyVideos is a source of n made-up videos of 64 frames in 400 class folders: 16 samples
// each under scaleSpec.
func manyVideos(n int) []layout.Video {
	vs := make([]layout.Video, n)
	for i := range vs {
		vs[i] = layout.Video{Path: fmt.Sprintf("c%03d/v%07d.mp4", i%400, i), Frames: 64}
	}
	return vs
}

var scaleSpec = layout.Spec{Frames: 4, Stride: 1, Height: 4, Width: 4}

// scaleFS is an FS over n made-up videos with a fake decoder and a cache of cacheSamples.
func scaleFS(t *testing.T, videos, cacheSamples int) (*FS, *fakeDecoder) {
	t.Helper()
	lay, err := layout.New(scaleSpec, manyVideos(videos))
	if err != nil {
		t.Fatal(err)
	}
	dec := &fakeDecoder{clips: map[[2]int]int{}, failClip: map[[2]int]error{}, stall: map[[2]int]bool{}, video: map[string]int{}}
	infos := make([]*decode.Info, len(lay.Videos))
	for i, v := range lay.Videos {
		infos[i] = &decode.Info{Path: v.Path, Frames: v.Frames}
		dec.video[v.Path] = i
	}
	f, err := New(Config{Source: "/fake", Layout: lay, Infos: infos, Decoder: dec, Workers: 1, OnError: OnErrorEIO,
		CacheBytes: int64(cacheSamples) * scaleSpec.SampleBytes(), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return f, dec
}

// readWork is the work of reads counted: the plans' steps, and the cache's eviction work.
type readWork struct{ steps, evict, evicted, reads int64 }

// TestReadWorkFlat: a read's work does not grow with the dataset, the plan or the cache. A
// reader follows a plan of every sample through a mount of 400 videos (6,400 samples) and one of
// 250,000 (4,000,000 samples, a plan of as many entries), with caches of 14 and 200 samples;
// after the first reads, the work of each read (plans looked at and entries stepped over by the
// plans, dues asked and entries looked at by the cache's eviction) is counted over the same
// number of reads, and is the same at both sizes. Time is not measured: the decoder is a fake,
// and the reads run in a bubble (synctest) so that prefetches finish between them.
func TestReadWorkFlat(t *testing.T) {
	const warm, counted = 300, 300
	measure := func(videos, cacheSamples int) readWork {
		var w readWork
		synctest.Test(t, func(t *testing.T) {
			f, _ := scaleFS(t, videos, cacheSamples)
			defer f.Close()
			n := f.lay.Len()
			plan := make([]int32, n)
			for i, v := range rand.New(rand.NewPCG(1, uint64(n))).Perm(n) {
				plan[i] = int32(v)
			}
			f.setPlan(order.DefaultPlan, plan, false, 0)
			S := int(f.lay.Spec.SampleBytes())
			hdr := len(f.lay.NpyHeader())
			read := func(s int32) {
				synctest.Wait() // the reader is slower than the decoder
				b, errno := readAt(t, f, int64(hdr+int(s)*S), S)
				if errno != 0 || len(b) != S || !bytes.Equal(b[:1], []byte{frameByte(f.lay.Samples[s].Video, f.lay.Samples[s].Start)}) {
					t.Fatalf("sample %d: %v, %d bytes", s, errno, len(b))
				}
			}
			for _, s := range plan[:warm] {
				read(s)
			}
			synctest.Wait()
			p0, c0, h0 := f.plans.Stats(), f.cache.Stats(), f.Stats().Cache.Hits
			for _, s := range plan[warm : warm+counted] {
				read(s)
			}
			synctest.Wait()
			p1, c1, h1 := f.plans.Stats(), f.cache.Stats(), f.Stats().Cache.Hits
			w = readWork{p1.Steps - p0.Steps, c1.EvictWork - c0.EvictWork, c1.Evicted - c0.Evicted, p1.Accesses - p0.Accesses}
			if h := h1 - h0; h != counted {
				t.Errorf("%d videos: %d of %d reads hit; want all (prefetched)", videos, h, counted)
			}
		})
		return w
	}
	small := measure(400, 14)
	large := measure(250_000, 200)
	t.Logf("over %d reads: 6,400 samples, cache 14: %+v; 4,000,000 samples, cache 200: %+v", counted, small, large)
	if small.reads != counted || small.evicted != counted || small.steps == 0 || small.evict == 0 {
		t.Fatalf("small mount: %+v; want %d accesses, as many evictions, and work counted", small, counted)
	}
	if large != small {
		t.Errorf("the work of %d reads grows with the dataset: %+v at 6,400 samples, %+v at 4,000,000", counted, small, large)
	}
}
