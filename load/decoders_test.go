package load

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/layout"
)

// TestDecodersBoundedByCPUs: the clips a mount decodes at once follow its workers up to what its
// CPUs decode, and no further: its loads' at most twice the CPUs (at least 4), its fills' at most
// one a CPU; below that, as many as its cache loads and its workers fill.
func TestDecodersBoundedByCPUs(t *testing.T) {
	for _, cpus := range []int{1, 2, 16, 64} {
		for _, workers := range []int{1, 2, cpus, 4 * cpus, 1000} {
			loads, fills := loadDecodes(workers, cpus), fillSlots(workers, cpus)
			if want := min(cache.MaxLoads(workers), max(4, 2*cpus)); loads != want {
				t.Errorf("%d CPUs, %d workers: %d loads decode at once, want %d", cpus, workers, loads, want)
			}
			if want := min(workers, cpus); fills != want {
				t.Errorf("%d CPUs, %d workers: %d fills at once, want %d", cpus, workers, fills, want)
			}
		}
	}
}

// countingDecoder writes nothing, takes a while, and counts the clips it decodes at once.
type countingDecoder struct {
	now, most atomic.Int32
}

func (d *countingDecoder) DecodeClip(ctx context.Context, _ *decode.Info, _ decode.Clip, _ decode.Output, _ []byte) (decode.Result, error) {
	n := d.now.Add(1)
	defer d.now.Add(-1)
	for m := d.most.Load(); n > m && !d.most.CompareAndSwap(m, n); m = d.most.Load() {
	}
	select {
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
		return decode.Result{}, ctx.Err()
	}
	return decode.Result{}, nil
}

func (d *countingDecoder) Stats() decode.PoolStats { return decode.PoolStats{} }

// TestLoadDecodesBounded: however many loads a cache of many workers runs at once, the loader
// decodes at most loadDecodes of them at a time; the others wait, and every one is decoded.
func TestLoadDecodesBounded(t *testing.T) {
	spec := layout.Spec{Frames: 2, Stride: 1, Height: 4, Width: 4}
	var videos []layout.Video
	var infos InfoList
	for k := range 8 {
		videos = append(videos, layout.Video{Path: fmt.Sprintf("a/%d.mp4", k), Frames: 64})
		infos = append(infos, &decode.Info{Path: fmt.Sprintf("/fake/a/%d.mp4", k), Frames: 64})
	}
	lay, err := layout.New(spec, videos)
	if err != nil {
		t.Fatal(err)
	}
	const workers, cores = 64, 2
	dec := &countingDecoder{}
	l, err := New(Config{Layout: lay, Infos: infos, Output: SampleOutput(lay, decode.Crop, false), Decoder: dec, Plans: noPlans{}, Workers: workers, Cores: cores})
	if err != nil {
		t.Fatal(err)
	}
	var o cache.Options
	l.Wire(&o)
	loads := cache.MaxLoads(workers)
	var wg sync.WaitGroup
	for i := range loads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := o.Load(context.Background(), i%lay.Len(), make([]byte, spec.SampleBytes())); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	bound := loadDecodes(workers, cores) // 4
	if most := int(dec.most.Load()); most > bound || most < 2 {
		t.Errorf("%d loads at once on %d cores: %d decoded at once, want at most %d (and more than one)", loads, cores, most, bound)
	}
	if got, _ := l.Decoded(time.Now()); got != int64(loads) {
		t.Errorf("%d samples decoded, want %d", got, loads)
	}
}
