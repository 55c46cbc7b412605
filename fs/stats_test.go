package fs

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

// TestDecodeCount: the stats' decode count is the samples the mount decoded, counted where they
// are decoded: a load the disk tier serves is none, even when it completes while the stats are
// being taken (between the cache's counts and the tier's).
func TestDecodeCount(t *testing.T) {
	src, tierDir := t.TempDir(), t.TempDir()
	t.Chdir(src) // the fake videos' paths are relative: the tier looks at their files here
	for i, v := range fakeVideos {
		os.MkdirAll(filepath.Dir(v.Path), 0o755)
		if err := os.WriteFile(v.Path, []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	withTier := func(cfg *Config) {
		cfg.Source, cfg.Disk = src, load.Disk{Dir: tierDir, Bytes: 1 << 20, Keep: load.KeepSamples}
		for i, v := range cfg.Layout.Videos {
			st, err := os.Stat(v.Path)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Layout.Videos[i].Size, cfg.Layout.Videos[i].ModTime = st.Size(), st.ModTime().UnixNano()
		}
	}

	a, _ := fakeFSWith(t, 40, 1, nil, OnErrorEIO, withTier)
	hdr, S := int64(len(a.lay.NpyHeader())), int(a.lay.Spec.SampleBytes())
	if _, errno := readAt(t, a, hdr, S); errno != 0 {
		t.Fatalf("sample 0: %v", errno)
	}
	a.load.Flush()
	if st := a.Stats(); st.Decode.Clips != 1 || st.Tier.Written != 1 {
		t.Fatalf("first mount: %d decoded, %d written to the tier; want sample 0's 1 and 1", st.Decode.Clips, st.Tier.Written)
	}
	a.Close()

	b, dec := fakeFSWith(t, 40, 1, nil, OnErrorEIO, withTier)
	dec.onStats = func() { // sample 0 is loaded, from the tier, while the stats are taken
		dec.onStats = nil
		if _, errno := readAt(t, b, hdr, S); errno != 0 {
			t.Errorf("sample 0 from the tier: %v", errno)
		}
	}
	during := b.Stats()
	after := b.Stats()
	if dec.decodes(b, 0) != 0 || after.Tier.Hits != 1 {
		t.Fatalf("second mount: sample 0 decoded %d times, %d tier hits; want it served by the tier", dec.decodes(b, 0), after.Tier.Hits)
	}
	if during.Decode.Clips != 0 || after.Decode.Clips != 0 {
		t.Errorf("second mount: %d samples decoded by the stats taken as the tier served one, %d after; want 0, 0",
			during.Decode.Clips, after.Decode.Clips)
	}
}

// TestSnapshotsCostNoMoreWithTheDataset: taking .vidfs/stats and .vidfs/failed allocates as much
// on a layout of 4 million samples, 8,000 videos and a plan of 4 million entries as on one of 40
// samples, 3 videos and a plan of 40, the cache the same: neither does anything per sample, per
// video or per plan entry. Counted in allocations and bytes allocated, once the cache is
// settled (the plan's first samples decoded).
func TestSnapshotsCostNoMoreWithTheDataset(t *testing.T) {
	videos := make([]layout.Video, 8000)
	for v := range videos {
		videos[v] = layout.Video{Path: "c" + strconv.Itoa(v%400) + "/v" + strconv.Itoa(v) + ".mp4", Frames: 2000}
	}
	big := func(cfg *Config) {
		lay, err := layout.New(cfg.Layout.Spec, videos)
		if err != nil {
			t.Fatal(err)
		}
		infos := make(load.InfoList, len(lay.Videos))
		for i, v := range lay.Videos {
			infos[i] = &decode.Info{Path: v.Path, Frames: v.Frames}
		}
		cfg.Layout, cfg.Infos = lay, infos
	}
	type cost struct{ allocs, bytes float64 }
	measure := func(f *FS) (stats, failed cost) {
		plan := make([]int32, f.lay.Len())
		for i := range plan {
			plan[i] = int32(i)
		}
		f.setPlan("p", plan, false, 0)
		for { // until the plan's first samples are decoded, and the cache does no more
			if cs := f.cache.Stats(); cs.Ready >= f.cache.Depth() && cs.Loading == 0 && cs.Queued == 0 {
				break
			}
			runtime.Gosched()
		}
		take := func(snap func() []byte) cost {
			snap() // warm
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			allocs := testing.AllocsPerRun(20, func() { snap() })
			runtime.ReadMemStats(&after)
			return cost{allocs, float64(after.TotalAlloc-before.TotalAlloc) / 21}
		}
		return take(func() []byte { return jsonBytes(f.Stats()) }), take(f.failedCSV)
	}
	small, _ := fakeFS(t, 8, 1, nil)
	large, _ := fakeFSWith(t, 8, 1, nil, OnErrorEIO, big)
	if large.lay.Len() != 4_000_000 {
		t.Fatalf("%d samples", large.lay.Len())
	}
	ss, sf := measure(small)
	ls, lf := measure(large)
	t.Logf("stats: %.0f allocations, %.0f bytes (40 samples); %.0f, %.0f (4 million). failed: %.0f, %.0f; %.0f, %.0f",
		ss.allocs, ss.bytes, ls.allocs, ls.bytes, sf.allocs, sf.bytes, lf.allocs, lf.bytes)
	for _, c := range []struct {
		name         string
		small, large cost
	}{{".vidfs/stats", ss, ls}, {".vidfs/failed", sf, lf}} {
		if c.large.allocs > c.small.allocs+8 || c.large.bytes > 1.25*c.small.bytes+4096 {
			t.Errorf("%s: %.0f allocations of %.0f bytes with 4 million samples, %.0f of %.0f with 40", c.name,
				c.large.allocs, c.large.bytes, c.small.allocs, c.small.bytes)
		}
	}
}
