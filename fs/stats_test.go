package fs

import (
	"os"
	"path/filepath"
	"testing"
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
		cfg.Source, cfg.TierDir, cfg.TierBytes = src, tierDir, 1<<20
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
	a.tier.t.Flush()
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
