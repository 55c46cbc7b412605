package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
	"github.com/vidfs/vidfs/order"
)

// fakeDecoder stands in for decode.Pool: frame k of a clip is filled with the byte
// frameByte(video, frame index). It counts its clips, fails the videos named in fail and the
// clips in failClip, and holds the clips in stall until their context ends.
type fakeDecoder struct {
	mu       sync.Mutex
	clips    map[[2]int]int // (video number, start) -> decodes
	fail     map[string]error
	failClip map[[2]int]error // (video number, start) -> its error
	stall    map[[2]int]bool  // (video number, start) -> its decode lasts until its context ends
	video    map[string]int   // path -> video number, for frameByte
	onStats  func()           // called as Stats begins, if set: what happens while a snapshot is taken
}

func frameByte(video, frame int) byte { return byte(video*37 + frame) }

func (d *fakeDecoder) DecodeClip(ctx context.Context, info *decode.Info, c decode.Clip, o decode.Output, dst []byte) (decode.Result, error) {
	if err := d.decode(ctx, info, c, o, dst); err != nil {
		return decode.Result{}, err
	}
	return decode.Result{Path: decode.PathCPU}, nil
}

// decode writes clip c's known bytes into dst, or fails as the test asked.
func (d *fakeDecoder) decode(ctx context.Context, info *decode.Info, c decode.Clip, o decode.Output, dst []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.fail[info.Path]; err != nil {
		return err
	}
	idx, err := c.Indices(info.Frames)
	if err != nil {
		return err
	}
	v := d.video[info.Path]
	if err := d.failClip[[2]int{v, c.Start}]; err != nil {
		return err
	}
	if d.stall[[2]int{v, c.Start}] {
		d.mu.Unlock()
		<-ctx.Done()
		d.mu.Lock() // for the deferred Unlock
		return ctx.Err()
	}
	d.clips[[2]int{v, c.Start}]++
	fs := o.FrameBytes()
	for k, i := range idx {
		clear(dst[k*fs : (k+1)*fs])
		for j := range fs {
			dst[k*fs+j] = frameByte(v, i)
		}
	}
	return nil
}

func (d *fakeDecoder) Stats() decode.PoolStats {
	if d.onStats != nil {
		d.onStats()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var n int64
	for _, c := range d.clips {
		n += int64(c)
	}
	return decode.PoolStats{ClipsCPU: n}
}

// decodes is how often sample s of f was decoded.
func (d *fakeDecoder) decodes(f *FS, s int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	smp := f.lay.Sample(s)
	return d.clips[[2]int{smp.Video, smp.Start}]
}

// fakeVideos are the made-up videos of fakeFS: 40 samples of 4 frames (4x4 pixels, 192 bytes).
var fakeVideos = []layout.Video{{Path: "a/one.mp4", Frames: 64}, {Path: "a/two.mp4", Frames: 40}, {Path: "b/three.mp4", Frames: 60}}

// fakeFS is an FS over fakeVideos with a fake decoder and a cache of cacheSamples samples.
func fakeFS(t *testing.T, cacheSamples, workers int, fail map[string]error) (*FS, *fakeDecoder) {
	t.Helper()
	return fakeFSWith(t, cacheSamples, workers, fail, OnErrorEIO)
}

// fakeFSWith is fakeFS with an on-error policy, and the Config as each of more changes it.
func fakeFSWith(t *testing.T, cacheSamples, workers int, fail map[string]error, onError OnError, more ...func(*Config)) (*FS, *fakeDecoder) {
	t.Helper()
	spec := layout.Spec{Frames: 4, Stride: 1, Height: 4, Width: 4}
	lay, err := layout.New(spec, fakeVideos)
	if err != nil {
		t.Fatal(err)
	}
	dec := &fakeDecoder{clips: map[[2]int]int{}, fail: fail, failClip: map[[2]int]error{}, stall: map[[2]int]bool{},
		video: map[string]int{}}
	infos := make([]*decode.Info, len(lay.Videos))
	for i, v := range lay.Videos {
		infos[i] = &decode.Info{Path: v.Path, Frames: v.Frames}
		dec.video[v.Path] = i
	}
	cfg := Config{Source: "/fake", Layout: lay, Infos: load.InfoList(infos), Decoder: dec, Workers: workers, OnError: onError,
		CacheBytes: int64(cacheSamples) * spec.SampleBytes(), Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	for _, m := range more {
		m(&cfg)
	}
	for i, in := range cfg.Infos.(load.InfoList) { // a change may have moved the videos
		dec.video[in.Path] = i
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, dec
}

// want is what sample s of f holds.
func want(f *FS, s int) []byte {
	smp, sp := f.lay.Sample(s), f.lay.Spec
	fb := int(sp.SampleBytes()) / sp.Frames
	b := make([]byte, 0, sp.SampleBytes())
	for k := range sp.Frames {
		b = append(b, bytes.Repeat([]byte{frameByte(smp.Video, smp.Start+k*sp.Stride)}, fb)...)
	}
	return b
}

// readAt reads n bytes at off of clips.npy as the kernel would ask.
func readAt(t *testing.T, f *FS, off int64, n int) ([]byte, syscall.Errno) {
	t.Helper()
	res, errno := f.read(context.Background(), f.lay.NpyHeader(), 0, f.lay.Len(), make([]byte, n), off)
	if errno != 0 {
		return nil, errno
	}
	defer res.Done() // as go-fuse does once it has written the answer
	b, st := res.Bytes(make([]byte, n))
	if !st.Ok() {
		t.Fatalf("read result: %v", st)
	}
	return b, 0
}

// TestReadPathFake: reads of clips.npy at any offset give the header and the samples' bytes,
// short where a read starts in the header, and counts accesses once however a sample is cut.
func TestReadPathFake(t *testing.T) {
	f, dec := fakeFS(t, 40, 1, nil)
	hdr := f.lay.NpyHeader()
	S := int(f.lay.Spec.SampleBytes())
	if b, _ := readAt(t, f, 0, 1<<20); !bytes.Equal(b, hdr) {
		t.Fatalf("a read from 0 gave %d bytes, want the %d-byte header alone", len(b), len(hdr))
	}
	// Samples 3 and 4 in one read, from the middle of 3 into the middle of 4.
	off := int64(len(hdr) + 3*S + S/2)
	b, errno := readAt(t, f, off, S)
	if w := append(want(f, 3)[S/2:], want(f, 4)[:S/2]...); errno != 0 || !bytes.Equal(b, w) {
		t.Fatalf("read across samples 3 and 4: %v, wrong bytes", errno)
	}
	// Sample 10 in three pieces, out of order: one access, one decode.
	var got [3][]byte
	for _, k := range []int{2, 0, 1} {
		got[k], _ = readAt(t, f, int64(len(hdr)+10*S+k*S/3), S/3)
	}
	if w := want(f, 10); !bytes.Equal(bytes.Join(got[:], nil), w[:3*(S/3)]) {
		t.Error("sample 10 read in pieces: wrong bytes")
	}
	st := f.Stats()
	if st.Reads.Requests != 5 || st.Reads.Accesses != 3 || st.Cache.Misses != 3 || st.Cache.Hits != 0 || dec.decodes(f, 10) != 1 {
		t.Errorf("%d requests, %d accesses, %d misses, %d hits, sample 10 decoded %d times; want 5, 3, 3, 0, 1",
			st.Reads.Requests, st.Reads.Accesses, st.Cache.Misses, st.Cache.Hits, dec.decodes(f, 10))
	}
	if end, errno := readAt(t, f, int64(len(hdr)+f.lay.Len()*S), 100); errno != 0 || len(end) != 0 {
		t.Errorf("read at the end: %d bytes, %v", len(end), errno)
	}
}

// TestFailedVideoFake: a video whose decode fails gets EIO on its samples alone: a read that
// reaches one returns the bytes before it, a read that starts in it fails, the failure is
// decoded and logged once.
func TestFailedVideoFake(t *testing.T) {
	bad := fmt.Errorf("%w: made up", decode.ErrCorrupt)
	f, dec := fakeFS(t, 40, 1, map[string]error{"a/two.mp4": bad})
	first, end := f.lay.VideoSamples(1)
	hdr, S := len(f.lay.NpyHeader()), int(f.lay.Spec.SampleBytes())
	b, errno := readAt(t, f, int64(hdr+(first-1)*S), 2*S)
	if errno != 0 || !bytes.Equal(b, want(f, first-1)) {
		t.Errorf("read into the failed video: %d bytes, %v; want the sample before it alone", len(b), errno)
	}
	for range 2 {
		if _, errno := readAt(t, f, int64(hdr+first*S), S); errno != syscall.EIO {
			t.Errorf("read of a failed sample: %v, want EIO", errno)
		}
	}
	if b, errno := readAt(t, f, int64(hdr+end*S), S); errno != 0 || !bytes.Equal(b, want(f, end)) {
		t.Errorf("sample %d after the failed video: %v", end, errno)
	}
	st := f.Stats()
	if len(st.Errors) != 1 || st.Errors[0].File != "a/two.mp4" || st.Errors[0].Sample != first || st.Decode.Failed != 1 {
		t.Errorf("errors %+v, %d failed; want one for sample %d of a/two.mp4", st.Errors, st.Decode.Failed, first)
	}
	if n := dec.Stats().ClipsCPU; n != 2 {
		t.Errorf("%d clips decoded, want 2 (the samples either side)", n)
	}
	if !errors.Is(f.cache.Failed(first), decode.ErrCorrupt) {
		t.Errorf("cache keeps %v for the failed sample", f.cache.Failed(first))
	}
}

// TestPlanFake: with a plan and a cache a quarter of the dataset, a reader that keeps to the plan
// finds every sample decoded ahead of it, each decoded once, and evicted samples are those
// already read.
func TestPlanFake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, dec := fakeFS(t, 14, 1, nil) // depth 14 - reserve(1) = 10
		n := f.lay.Len()
		plan := make([]int32, n)
		for i := range plan {
			plan[i] = int32((i * 7) % n) // every sample once, shuffled (7 and n are coprime)
		}
		f.setPlan(order.DefaultPlan, plan, false, 0)
		S := int(f.lay.Spec.SampleBytes())
		hdr := len(f.lay.NpyHeader())
		for _, s := range plan {
			synctest.Wait() // the reader is slower than the decoder
			if b, errno := readAt(t, f, int64(hdr+int(s)*S), S); errno != 0 || !bytes.Equal(b, want(f, int(s))) {
				t.Fatalf("sample %d: %v", s, errno)
			}
		}
		st := f.Stats()
		if st.Cache.Hits != int64(n) || st.Cache.Misses != 0 || st.Plan.Position != n || st.Plan.OffPlanReads != 0 {
			t.Errorf("hits %d, misses %d, position %d, off plan %d; want %d hits, at the end", st.Cache.Hits, st.Cache.Misses,
				st.Plan.Position, st.Plan.OffPlanReads, n)
		}
		for s := range n {
			if c := dec.decodes(f, s); c != 1 {
				t.Errorf("sample %d decoded %d times", s, c)
			}
		}
		if st.Cache.EvictedUnread != 0 || st.Cache.Evicted < int64(n-14) {
			t.Errorf("%d evicted, %d of them unread; want the read ones to make room", st.Cache.Evicted, st.Cache.EvictedUnread)
		}
	})
}

// TestOnErrorFake: under substitute, a failed sample is served by a good sample of its video,
// nearest first, or when the whole video fails, by one of its class, or with no class, zeros;
// under zeros, zeros; every read of it gets the same bytes, and .vidfs/failed lists each failed
// sample and what it is served with.
func TestOnErrorFake(t *testing.T) {
	bad := &decode.Error{Kind: decode.ErrCorrupt, Detail: "made up"} // as the decoder fails: a *decode.Error
	hdr := func(f *FS) int64 { return int64(len(f.lay.NpyHeader())) }
	S := func(f *FS) int { return int(f.lay.Spec.SampleBytes()) }
	sampleAt := func(t *testing.T, f *FS, i int) []byte {
		b, errno := readAt(t, f, hdr(f)+int64(i*S(f)), S(f))
		if errno != 0 {
			t.Fatalf("sample %d: %v", i, errno)
		}
		return b
	}
	whole := map[string]error{"a/two.mp4": bad, "b/three.mp4": bad}

	f, dec := fakeFSWith(t, 40, 1, whole, OnErrorSubstitute)
	dec.failClip[[2]int{0, 20}] = bad // a/one.mp4's sample 5 (starts 0, 4, ..., 60)
	// Sample 5 of a/one.mp4: its neighbour 4 (nearest, tried first) serves.
	for range 2 {
		if !bytes.Equal(sampleAt(t, f, 5), want(f, 4)) {
			t.Error("a/one.mp4's failed sample 5 not served by sample 4")
		}
	}
	// a/two.mp4 fails whole: a/one.mp4, the same class, serves.
	first, _ := f.lay.VideoSamples(1)
	got := sampleAt(t, f, first)
	if v := f.lay.Sample(15).Video; v != 0 || !bytes.Equal(got, want(f, 15)) {
		t.Errorf("a/two.mp4's sample 0 not served by a/one.mp4's last sample (15)")
	}
	// b/three.mp4 fails whole and is alone in its class: zeros.
	bfirst, _ := f.lay.VideoSamples(2)
	if !bytes.Equal(sampleAt(t, f, bfirst), make([]byte, S(f))) {
		t.Error("b/three.mp4's sample not served as zeros")
	}
	// Listed: the three samples read, with what they are served, and the samples tried in their
	// place that failed too (EIO: nothing read them).
	csv := string(f.failedCSV())
	const reason = "corrupt or truncated data: made up"
	for _, row := range []string{"sample,file,frame,reason,served", "5,a/one.mp4,," + reason + ",4", itoa(first) + ",a/two.mp4,," + reason + ",15",
		itoa(bfirst) + ",b/three.mp4,," + reason + ",zeros", itoa(first+1) + ",a/two.mp4,," + reason + ",EIO"} {
		if !strings.Contains(csv, row+"\n") {
			t.Errorf(".vidfs/failed lacks %q:\n%s", row, csv)
		}
	}
	for _, row := range strings.Split(strings.TrimSpace(csv), "\n")[1:] {
		if !strings.Contains(row, "a/two.mp4") && !strings.Contains(row, "b/three.mp4") && !strings.HasPrefix(row, "5,") {
			t.Errorf(".vidfs/failed lists a sample that decodes: %q", row)
		}
	}
	if st := f.Stats(); st.Reads.Substituted != 3 || st.Reads.Zeroed != 1 {
		t.Errorf("%d accesses substituted, %d zeroed; want 3 and 1", st.Reads.Substituted, st.Reads.Zeroed)
	}

	z, _ := fakeFSWith(t, 40, 1, whole, OnErrorZeros)
	if !bytes.Equal(sampleAt(t, z, first), make([]byte, S(z))) {
		t.Error("under zeros, a failed sample is not zeros")
	}
	if !strings.Contains(string(z.failedCSV()), itoa(first)+",a/two.mp4,,"+reason+",zeros\n") {
		t.Errorf(".vidfs/failed under zeros:\n%s", z.failedCSV())
	}
}
