package fs

import (
	"bytes"
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
	"github.com/vidfs/vidfs/order"
	"github.com/vidfs/vidfs/tier"
)

// tierFiles are the videos of the disk tier's tests: three codecs, three containers.
var tierFiles = map[string]string{"a/gop16.mp4": "h264_gop16.mp4", "a/hevc.mkv": "hevc.mkv", "b/vp9.webm": "vp9.webm"}

// readAll reads every sample of a mount with pread and returns their digests.
func readAll(t *testing.T, m *testMount) [][32]byte {
	t.Helper()
	f, err := os.Open(filepath.Join(m.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	S := m.lay.Spec.SampleBytes()
	buf := make([]byte, S)
	out := make([][32]byte, m.lay.Len())
	for i := range out {
		if _, err := f.ReadAt(buf, int64(i)*S); err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		out[i] = sha256.Sum256(buf)
	}
	return out
}

// entryFiles lists the tier's entry files under dir.
func entryFiles(t *testing.T, dir string) (files []string, bytes int64) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && len(d.Name()) == 64 {
			info, _ := d.Info()
			files = append(files, p)
			bytes += info.Size()
		}
		return nil
	})
	return files, bytes
}

// TestTier: for every codec, samples decoded through a mount with a disk tier come back from it
// after a remount, identical, without decoding; other layout parameters miss; damaged entries
// are decoded again and never served; a video changed under the mount is not served from the
// tier; the tier keeps to its bound.
func TestTier(t *testing.T) {
	for _, c := range tier.Codecs {
		t.Run(c.String(), func(t *testing.T) { testTier(t, c) })
	}
}

func testTier(t *testing.T, codec diskstore.Codec) {
	src := t.TempDir()
	for dst, name := range tierFiles {
		os.MkdirAll(filepath.Join(src, filepath.Dir(dst)), 0o755)
		if err := copyFile(testvideo.Path(name), filepath.Join(src, dst)); err != nil {
			t.Fatal(err)
		}
	}
	tierDir := t.TempDir()
	spec := layout.Spec{Frames: 4, Stride: 2, Step: 6, Height: 32, Width: 48}
	setup := mountSetup{src: src, spec: spec, tierDir: tierDir, tierBytes: 1 << 30, tierCodec: codec, keep: load.KeepSamples}

	// First mount: everything is decoded, and written to the tier.
	a := mountVideos(t, setup)
	want := readAll(t, a)
	a.fs.load.Flush()
	st := a.fs.Stats()
	n := int64(a.lay.Len())
	if st.Tier == nil || st.Tier.Written != n || st.Tier.Hits != 0 || st.Decode.Clips != n || st.Tier.Codec != codec.String() {
		t.Fatalf("first mount: %d samples, tier %+v, %d decoded: want every sample decoded and written with %v", n, st.Tier, st.Decode.Clips, codec)
	}
	if files, _ := entryFiles(t, tierDir); int64(len(files)) != n {
		t.Fatalf("%d entry files for %d samples", len(files), n)
	}
	a.close()

	// Same parameters, with this codec and with each other one: every sample from the tier, the
	// same bytes, nothing decoded, nothing written again.
	for _, other := range tier.Codecs {
		same := setup
		same.tierCodec = other
		b := mountVideos(t, same)
		if got := readAll(t, b); !equalDigests(got, want) {
			t.Errorf("remount with %v: samples from the tier differ from the decoded ones", other)
		}
		b.fs.load.Flush()
		st = b.fs.Stats()
		if st.Tier.Hits != n || st.Decode.Clips != 0 || st.Tier.Written != 0 {
			t.Errorf("remount with %v: %d tier hits, %d decoded, %d written; want %d, 0, 0", other, st.Tier.Hits, st.Decode.Clips, st.Tier.Written, n)
		}
		// Entries stored as they are are served mapped, not copied (tier.Map, cache.Fetched.Lent).
		if lent := st.Memory.TierMappedBytes > 0; lent != (codec == diskstore.None) {
			t.Errorf("remount with %v over entries written with %v: %d bytes of tier files mapped", other, codec, st.Memory.TierMappedBytes)
		}
		b.close()
	}

	// Other parameters that change the bytes: nothing from the tier.
	for _, change := range []struct {
		what string
		set  func(*mountSetup)
	}{
		{"another output size", func(s *mountSetup) { s.spec.Width = 40 }},
		{"another stride", func(s *mountSetup) { s.spec.Stride = 3 }},
		{"another resize mode", func(s *mountSetup) { s.resize = decode.Pad }},
		{"fast decoding", func(s *mountSetup) { s.fast = true }},
	} {
		other := setup
		change.set(&other)
		c := mountVideos(t, other)
		readAll(t, c)
		if st := c.fs.Stats(); st.Tier.Hits != 0 || st.Decode.Clips == 0 {
			t.Errorf("%s: %d tier hits and %d decodes, want none from the tier", change.what, st.Tier.Hits, st.Decode.Clips)
		}
		c.fs.load.Flush()
		c.close()
	}

	// Damaged entries: one with a flipped byte, one cut short, one emptied.
	files, _ := entryFiles(t, tierDir)
	damaged := 0
	for i, p := range files {
		b, _ := os.ReadFile(p)
		switch i % 7 {
		case 0:
			b[len(b)-len(b)/3] ^= 0x10
		case 1:
			b = b[:len(b)/2]
		case 2:
			b = nil
		default:
			continue
		}
		os.WriteFile(p, b, 0o644)
		damaged++
	}
	d := mountVideos(t, setup)
	if got := readAll(t, d); !equalDigests(got, want) {
		t.Error("a mount over damaged tier entries served other bytes than the decoder's")
	}
	st = d.fs.Stats()
	t.Logf("%d samples; %d of %d entries damaged; a mount over them found %d, decoded %d, took %d from the tier",
		n, damaged, len(files), st.Tier.Corrupt, st.Decode.Clips, st.Tier.Hits)
	if st.Tier.Corrupt == 0 || st.Decode.Clips == 0 || st.Tier.Corrupt > int64(damaged) {
		t.Errorf("%d entries damaged; the tier found %d, and %d samples were decoded again", damaged, st.Tier.Corrupt, st.Decode.Clips)
	}
	d.close()

	// A video touched under the mount (a new modification time) is decoded, not served from the
	// tier: the tier cannot tell whether its bytes changed.
	f := mountVideos(t, setup)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(src, "a/gop16.mp4"), later, later); err != nil {
		t.Fatal(err)
	}
	touched := samplesOf(f.lay, "a/gop16.mp4")
	if got := readAll(t, f); !equalDigests(got, want) {
		t.Error("samples differ after a video was touched")
	}
	if st := f.fs.Stats(); st.Tier.Hits != n-touched || st.Decode.Clips != touched {
		t.Errorf("after touching a video of %d samples: %d tier hits, %d decoded; want %d and %d",
			touched, st.Tier.Hits, st.Decode.Clips, n-touched, touched)
	}
	f.close()

	// A small bound: the tier never holds more.
	small := setup
	small.tierDir = t.TempDir()
	small.tierBytes = 20 << 10
	e := mountVideos(t, small)
	readAll(t, e)
	e.fs.load.Flush()
	if _, bytes := entryFiles(t, small.tierDir); bytes > small.tierBytes || e.fs.Stats().Tier.UsedBytes > small.tierBytes {
		t.Errorf("a tier bound to %d bytes holds %d on disk (%d counted)", small.tierBytes, bytes, e.fs.Stats().Tier.UsedBytes)
	}
}

// samplesOf counts the samples of the video at path (relative to SRC) in lay.
func samplesOf(lay *layout.Layout, path string) int64 {
	for v, vid := range lay.Videos {
		if vid.Path == path {
			first, end := lay.VideoSamples(v)
			return int64(end - first)
		}
	}
	return 0
}

func equalDigests(a, b [][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// onDisk makes the fake videos files under src (unless they are there), so that a fake mount's
// disk tier serves them (it serves only samples of videos whose files are as the layout says),
// and gives the mount a disk tier in tierDir.
func onDisk(t *testing.T, src, tierDir string, codec diskstore.Codec) func(*Config) {
	return func(cfg *Config) {
		for i, v := range cfg.Layout.Videos {
			p := filepath.Join(src, v.Path)
			if _, err := os.Stat(p); err != nil {
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, []byte(v.Path), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Layout.Videos[i].Size, cfg.Layout.Videos[i].ModTime = st.Size(), st.ModTime().UnixNano()
			cfg.Infos.(load.InfoList)[i].Path = p
		}
		cfg.Source, cfg.Disk = src, load.Disk{Dir: tierDir, Bytes: 1 << 20, Codec: codec, Keep: load.KeepSamples}
	}
}

// TestTierAheadOfDecodes: with every decode held and the disk tier holding some of the plan's
// samples behind those it does not, the tier's samples are loaded into memory ahead of the reader
// anyway, and the reader meets them there: tier loads never queue behind decodes.
func TestTierAheadOfDecodes(t *testing.T) {
	for _, codec := range tier.Codecs {
		t.Run(codec.String(), func(t *testing.T) {
			src, tierDir := t.TempDir(), t.TempDir()
			// A first mount decodes every sample, and the tier keeps them all.
			f, _ := fakeFSWith(t, 40, 1, nil, OnErrorEIO, onDisk(t, src, tierDir, codec))
			hdr, S := int64(len(f.lay.NpyHeader())), int(f.lay.Spec.SampleBytes())
			for i := range f.lay.Len() {
				if _, errno := readAt(t, f, hdr+int64(i*S), S); errno != 0 {
					t.Fatalf("sample %d: %v", i, errno)
				}
			}
			f.load.Flush()
			f.Close()
			synctest.Test(t, func(t *testing.T) {
				// Capacity 16 and one worker: 12 samples ahead. The tier loses samples 0-3 (its
				// entries are removed), so those decode, and every decode is held.
				f, dec := fakeFSWith(t, 16, 1, nil, OnErrorEIO, onDisk(t, src, tierDir, codec))
				for i := range 4 {
					s := f.load.TierKey(i).String()
					if err := os.Remove(filepath.Join(tierDir, "v1", s[:2], s)); err != nil {
						t.Fatal(err)
					}
				}
				for i := range f.lay.Len() {
					smp := f.lay.Sample(i)
					dec.stall[[2]int{smp.Video, smp.Start}] = true
				}
				plan := make([]int32, f.lay.Len())
				for i := range plan {
					plan[i] = int32(i)
				}
				f.setPlan(order.DefaultPlan, plan, false, 0)
				synctest.Wait()
				cs := f.cache.Stats()
				if cs.Fetched != 8 || cs.FetchMissed != 4 || cs.Loading != 1 {
					t.Fatalf("with decodes held: %d samples loaded from the tier, %d passed to the decoder, %d loading; want the 8 the tier holds of the 12 ahead, 4, and one decode (of one worker)",
						cs.Fetched, cs.FetchMissed, cs.Loading)
				}
				for i := 4; i < 12; i++ {
					h := f.cache.Peek(i)
					if h == nil {
						t.Fatalf("sample %d, in the tier, is not in memory ahead of the reader", i)
					}
					if !bytes.Equal(h.Bytes(), want(f, i)) {
						t.Errorf("sample %d from the tier: wrong bytes", i)
					}
					h.Release()
				}
				if st := f.Stats(); st.Decode.Clips != 0 || st.Tier.Hits != 8 {
					t.Errorf("%d decoded, %d tier hits; want none decoded and 8 hits", st.Decode.Clips, st.Tier.Hits)
				}
			})
		})
	}
}
