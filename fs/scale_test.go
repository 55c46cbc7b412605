package fs

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/npy"
	"github.com/vidfs/vidfs/internal/readers"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
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
func scaleFS(t testing.TB, videos, cacheSamples int) (*FS, *fakeDecoder) {
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
	f, err := New(Config{Source: "/fake", Layout: lay, Infos: load.InfoList(infos), Decoder: dec, Workers: 1, OnError: OnErrorEIO,
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
				if errno != 0 || len(b) != S || !bytes.Equal(b[:1], []byte{frameByte(f.lay.Sample(int(s)).Video, f.lay.Sample(int(s)).Start)}) {
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

// npyPlan is entries as a .npy file of int32, as PlanSampler writes a plan.
func npyPlan(entries []int32) []byte {
	var b bytes.Buffer
	b.Write(npy.Header{Descr: "<i4", Shape: []int{len(entries)}}.Encode(64))
	buf := make([]byte, 4*len(entries))
	for i, e := range entries {
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(e))
	}
	b.Write(buf)
	return b.Bytes()
}

// TestPlanReplacedWhileReading: over a mount of 4,000,000 samples (a fake decoder), two readers
// each follow a plan of its own of 2,000,000 entries (even samples, odd samples) while another
// process replaces a third plan of 4,000,000 entries, twice, and the first reader's plan gets
// its next epoch appended: no read fails, and each reader's plan is followed (every read counted
// toward it, its position at its reads, nothing skipped, and the epoch appended behind what r0
// had not read).
func TestPlanReplacedWhileReading(t *testing.T) {
	f, _ := scaleFS(t, 250_000, 64)
	t.Cleanup(func() { f.Close() })
	mnt := mountFake(t, f)
	plans := filepath.Join(mnt, ".vidfs", "plans")
	n := f.lay.Len()
	r := rand.New(rand.NewPCG(7, 7))
	half := func(odd int) []int32 { // the samples of one parity, shuffled
		p := make([]int32, n/2)
		for i, v := range r.Perm(n / 2) {
			p[i] = int32(2*v + odd)
		}
		return p
	}
	mine := [2][]int32{half(0), half(1)}
	next := half(0)          // r0's next epoch
	for k, p := range mine { // written by this process: its reads count toward them
		if err := os.WriteFile(filepath.Join(plans, fmt.Sprint("r", k)), npyPlan(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := filepath.Join(t.TempDir(), "big.npy")
	all := make([]int32, n)
	for i, v := range r.Perm(n) {
		all[i] = int32(v)
	}
	if err := os.WriteFile(big, npyPlan(all), 0o644); err != nil {
		t.Fatal(err)
	}
	clips, err := os.Open(filepath.Join(mnt, "clips.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer clips.Close()
	hdr, S := int64(len(f.lay.NpyHeader())), f.lay.Spec.SampleBytes()
	const reads = 1500
	var wg sync.WaitGroup
	var done sync.WaitGroup
	errs := make(chan error, 2)
	done.Add(2)
	for k := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done.Done()
			buf := make([]byte, S)
			for i, s := range mine[k][:reads] {
				if _, err := clips.ReadAt(buf, hdr+int64(s)*S); err != nil {
					errs <- fmt.Errorf("reader %d, read %d (sample %d): %w", k, i, s, err)
					return
				}
				if i == reads/3 && k == 0 { // the next epoch, appended as this reader reads
					if err := appendFile(filepath.Join(plans, "r0"), npyPlan(next)); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	// Another process replaces the big plan while the readers read.
	for i := range 2 {
		sh := exec.Command("sh", "-c", fmt.Sprintf("cat %s > %s/big", big, plans))
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("replacing the big plan (%d): %v: %s", i, err, out)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := f.plans.Stats()
	if st.OffPlan != 0 {
		t.Errorf("%d reads off plan", st.OffPlan)
	}
	for _, p := range st.Plans {
		switch p.Name {
		case "r0", "r1":
			// r0's next epoch was appended after its first reads/3+1 reads, which were dropped.
			pos, length := reads, n/2
			if p.Name == "r0" {
				pos, length = reads-(reads/3+1), 2*(n/2)-(reads/3+1)
			}
			if p.OnPlan != reads || p.Skipped != 0 || p.Position != pos || p.Length != length {
				t.Errorf("plan %s: %d reads on it, %d skipped, at %d of %d; want %d, 0, at %d of %d", p.Name, p.OnPlan, p.Skipped,
					p.Position, p.Length, reads, pos, length)
			}
		case "big":
			if p.Writes != 3 || p.OnPlan != 0 || p.Length != n { // made empty, then written twice
				t.Errorf("plan big: %d writes, %d reads on it, %d long; want 3, 0, %d", p.Writes, p.OnPlan, p.Length, n)
			}
		}
	}
}

// appendFile appends data to the file at path.
func appendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// BenchmarkPlanApply writes a plan of 4,000,000 entries (.npy) to .vidfs/order of a mount of as
// many samples, as a trainer does, and closes it, while two readers read (about 10,000 reads a
// second each, a fake decoder): ns/op is the close (the plan parsed, built and swapped in: when
// it returns, the plan is applied), max-wait-ms the longest any read took meanwhile. With
// append, the plan is appended behind one as long instead.
func BenchmarkPlanApply(b *testing.B) {
	f, _ := scaleFS(b, 250_000, 64)
	defer f.Close()
	n := f.lay.Len()
	r := rand.New(rand.NewPCG(3, 3))
	epochs := [2][]byte{}
	for k := range epochs {
		p := make([]int32, n)
		for i, v := range r.Perm(n) {
			p[i] = int32(v)
		}
		epochs[k] = npyPlan(p)
	}
	ctx := context.Background()
	write := func(data []byte, appendPlan bool) {
		w := f.newPlanWriter(order.DefaultPlan, appendPlan, !appendPlan)
		if _, errno := w.Write(ctx, data, 0); errno != 0 {
			b.Fatal(errno)
		}
		if errno := w.Flush(ctx); errno != 0 {
			b.Fatal(errno)
		}
		w.Release(ctx)
	}
	for _, appendPlan := range []bool{false, true} {
		name := "replace"
		if appendPlan {
			name = "append"
		}
		b.Run(name, func(b *testing.B) {
			write(epochs[0], false)
			hdr, S := f.lay.NpyHeader(), f.lay.Spec.SampleBytes()
			rs := readers.Start(2, 100*time.Microsecond, func(i int) error {
				res, errno := f.read(ctx, hdr, 0, n, make([]byte, S), int64(len(hdr))+int64(i%n)*S)
				if errno != 0 {
					return errno
				}
				res.Done()
				return nil
			})
			time.Sleep(50 * time.Millisecond)
			rs.Reset()
			b.ResetTimer()
			for i := range b.N {
				if appendPlan {
					b.StopTimer()
					write(epochs[0], false)
					b.StartTimer()
				}
				write(epochs[(i+1)%2], appendPlan)
			}
			b.StopTimer()
			longest, err := rs.Stop()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(longest)/1e6, "max-wait-ms")
		})
	}
}
