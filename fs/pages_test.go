package fs

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/layout"
)

// TestMappedReads: a memory-mapped reader of clips.npy gets the bytes pread gets, with the
// samples it faults on stored in the page cache whole (on kernels that map direct I/O files),
// through several windows' worth of samples and a reopened mapping, and without vidfs decoding
// any sample it did not read. Samples of whole pages, and of pages shared with a neighbour.
func TestMappedReads(t *testing.T) {
	for _, c := range []struct {
		name string
		spec layout.Spec
	}{
		{"page-aligned samples", layout.Spec{Frames: 4, Stride: 2, Step: 3, Height: 64, Width: 64}},  // 12 pages
		{"samples sharing pages", layout.Spec{Frames: 4, Stride: 2, Step: 3, Height: 32, Width: 48}}, // 4.5 pages
	} {
		t.Run(c.name, func(t *testing.T) {
			m := mountVideos(t, mountSetup{files: tierFiles, spec: c.spec, cacheBytes: 64 << 20})
			want := readAll(t, m)
			n := m.lay.Len()
			aligned := c.spec.SampleBytes()%int64(os.Getpagesize()) == 0
			// The samples to read: every other one where samples share no page with their
			// neighbours (the rest stay undecoded), else all of them.
			var picks []int
			for i := 0; i < n; i++ {
				if !aligned || i%2 == 0 {
					picks = append(picks, i)
				}
			}
			m.close()
			m = mountVideos(t, mountSetup{files: tierFiles, spec: c.spec, cacheBytes: 64 << 20, src: m.src})
			m.fs.pages.mu.Lock()
			m.fs.pages.keep = 4 // several windows' worth of samples below
			m.fs.pages.mu.Unlock()
			f, err := os.Open(filepath.Join(m.dir, "clips.raw"))
			if err != nil {
				t.Fatal(err)
			}
			S := c.spec.SampleBytes()
			buf := make([]byte, S)
			for _, i := range picks { // into the memory cache
				if _, err := f.ReadAt(buf, int64(i)*S); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			// The reader is another process: a fault in the process serving the mount could wait
			// for a server thread that the fault itself holds.
			order := make([]string, len(picks))
			for k, i := range picks {
				order[k] = strconv.Itoa(i)
			}
			out := m.python(t, mappedReader, strings.Join(order, ","))
			for pass, line := range strings.Split(strings.TrimSpace(out), "\n") {
				for k, sum := range strings.Split(line, ",") {
					i := picks[(k+pass)%len(picks)]
					if sum != hex.EncodeToString(want[i][:]) {
						t.Fatalf("pass %d: sample %d read through a memory map differs from pread's", pass, i)
					}
				}
			}
			st := m.fs.Stats()
			t.Logf("%d of %d samples read 3 times through a memory map: %d stored whole in the page cache, %d read requests, %d decoded",
				len(picks), n, st.Reads.PageFills, st.Reads.Requests, st.Decode.Clips)
			if m.fs.directIO.Load() && st.Reads.PageFills < int64(len(picks)) {
				t.Errorf("%d samples stored in the page cache, want at least one per sample read (%d)", st.Reads.PageFills, len(picks))
			}
			if aligned && st.Decode.Clips != int64(len(picks)) {
				t.Errorf("%d samples decoded for %d read: a neighbour was read", st.Decode.Clips, len(picks))
			}
		})
	}
}

// mappedReader reads the samples listed in argv[2] from MNT/clips.npy with np.load(mmap_mode="r")
// in 3 passes, each with the file opened anew and the list rotated by the pass number, and
// prints each pass's SHA-256 digests, comma-separated, one line per pass.
const mappedReader = `
import hashlib, sys, numpy as np
picks = [int(x) for x in sys.argv[2].split(",")]
for p in range(3):
    a = np.load(sys.argv[1] + "/clips.npy", mmap_mode="r")
    order = picks[p:] + picks[:p]
    print(",".join(hashlib.sha256(np.array(a[i]).tobytes()).hexdigest() for i in order))
    del a
`

// TestMemoryStats: the stats' memory parts are the process's: the cache's buffers as mapped, and
// parts that add up to no more than what is resident.
func TestMemoryStats(t *testing.T) {
	spec := layout.Spec{Frames: 4, Stride: 2, Step: 3, Height: 64, Width: 64}
	m := mountVideos(t, mountSetup{files: tierFiles, spec: spec, cacheBytes: 64 << 20})
	readAll(t, m)
	st := m.fs.Stats()
	mem := st.Memory
	t.Logf("%+v", mem)
	if got, want := mem.CacheBytes, int64(m.lay.Len())*spec.SampleBytes(); got != want {
		t.Errorf("cache buffers %d bytes after reading %d samples of %d bytes, want %d", got, m.lay.Len(), spec.SampleBytes(), want)
	}
	if mem.ResidentBytes <= 0 || mem.GoHeapBytes <= 0 || mem.GoRuntimeBytes <= 0 {
		t.Errorf("memory parts missing: %+v", mem)
	}
	if sum := mem.CacheBytes + mem.GoHeapBytes + mem.GoRuntimeBytes + mem.NativeBytes; sum > mem.ResidentBytes && mem.NativeBytes > 0 {
		t.Errorf("parts add up to %d bytes, more than the %d resident", sum, mem.ResidentBytes)
	}
}
