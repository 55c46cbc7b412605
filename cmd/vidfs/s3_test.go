package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/catalog"
	"github.com/vidfs/vidfs/internal/s3src"
	"github.com/vidfs/vidfs/internal/s3test"
	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/layout"
)

// bucketSource starts an S3 server holding the test source (sources) under ds/ of bucket
// "train", and a proxy in front of it, with the AWS chain set to the server's keys.
func bucketSource(t *testing.T) (*s3test.Server, *s3test.Proxy) {
	s := s3test.Start(t)
	files := map[string]string{}
	for dst, name := range sources {
		files["ds/"+dst] = testvideo.Path(name)
	}
	s.Put("train", files)
	s3test.Env(t)
	return s, s3test.NewProxy(t, s.Addr)
}

// smallMount is the shape and resources of every mount in these tests.
var smallMount = []string{"--cache-mem", "16MiB", "--workers", "2", "--size", "32x32"}

func bucketArgs(p *s3test.Proxy, more ...string) []string {
	return slices.Concat(smallMount, []string{"--s3-endpoint", p.Endpoint(), "--s3-path-style"}, more)
}

// samplesOf reads every sample of a mount through clips.raw, in order (writing it as the plan
// first when plan is set), and returns their bytes and the errors of those that failed.
func samplesOf(t *testing.T, dir string, order []int, plan bool) ([][]byte, map[int]error) {
	t.Helper()
	var lay struct {
		Samples     int   `json:"samples"`
		SampleBytes int64 `json:"sample_bytes"`
	}
	b, err := os.ReadFile(filepath.Join(dir, ".vidfs/layout.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &lay); err != nil {
		t.Fatal(err)
	}
	if order == nil {
		for i := range lay.Samples {
			order = append(order, i)
		}
	}
	if plan {
		var s []string
		for _, i := range order {
			s = append(s, fmt.Sprint(i))
		}
		if err := os.WriteFile(filepath.Join(dir, ".vidfs/order"), []byte(strings.Join(s, " ")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := make([][]byte, lay.Samples)
	failed := map[int]error{}
	for _, i := range order {
		buf := make([]byte, lay.SampleBytes)
		if _, err := f.ReadAt(buf, int64(i)*lay.SampleBytes); err != nil {
			failed[i] = err
			continue
		}
		out[i] = buf
	}
	return out, failed
}

// localMount is what a mount of the test source (makeSource's) on local disk with smallMount's
// flags serves: every sample, in order, and its listing files. The bucket's mounts are checked
// against it; it is made once, by the first test that asks, as the local disk's mount gives
// the same bytes to each.
type localMount struct {
	samples [][]byte
	files   map[string][]byte // index.csv and classes.txt
}

var local struct {
	sync.Mutex
	m *localMount
}

// localReference returns the local mount's samples and listing files, mounting it the first time.
func localReference(t *testing.T) *localMount {
	t.Helper()
	local.Lock()
	defer local.Unlock()
	if local.m == nil {
		mp := startMount(t, makeSource(t), smallMount...)
		samples, failed := samplesOf(t, mp.dir, nil, false)
		if len(failed) > 0 {
			t.Fatalf("local mount: %v", failed)
		}
		m := &localMount{samples: samples, files: map[string][]byte{}}
		for _, name := range []string{"index.csv", "classes.txt"} {
			m.files[name] = readFile(t, mp.dir, name)
		}
		mp.stop(t)
		local.m = m
	}
	return local.m
}

// sameFiles fails unless the listing files of the mount at dir are the local mount's.
func sameFiles(t *testing.T, local *localMount, dir string) {
	t.Helper()
	for name, x := range local.files {
		y, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Fatalf("%s differs between the local mount and the bucket's:\n%s\n---\n%s", name, x, y)
		}
	}
}

// TestS3MountMatchesLocal: every sample of a mount of the bucket is byte-identical to a mount of
// the same files on local disk, read without a plan, with a shuffled plan, and with a disk tier
// (whose second mount reads samples back from it).
func TestS3MountMatchesLocal(t *testing.T) {
	_, p := bucketSource(t)
	local := localReference(t)
	want := local.samples
	order := rand.New(rand.NewPCG(1, 2)).Perm(len(want))
	tierDir := t.TempDir()
	for _, c := range []struct {
		name string
		plan bool
		args []string
	}{
		{"no plan", false, nil},
		{"plan", true, nil},
		{"disk tier", true, []string{"--cache-dir", tierDir, "--cache-keep", "samples"}},
		{"disk tier again", false, []string{"--cache-dir", tierDir, "--cache-keep", "samples"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := startMount(t, "s3://train/ds", bucketArgs(p, c.args...)...)
			sameFiles(t, local, m.dir)
			got, failed := samplesOf(t, m.dir, order, c.plan)
			if len(failed) > 0 {
				t.Fatalf("failed samples: %v\n%s", failed, m.log())
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("sample %d differs from the local mount's", i)
				}
			}
			var st wire.Stats
			b, err := os.ReadFile(filepath.Join(m.dir, ".vidfs/stats"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &st); err != nil {
				t.Fatal(err)
			}
			if f := st.Fetch; f == nil || f.Lists == 0 || (c.name != "disk tier again" && (f.GETs == 0 || f.BytesPerSample <= 0 || f.BlockHits == 0)) {
				t.Fatalf(".vidfs/stats has no fetching counted: %+v", f)
			}
			m.cmd.Process.Signal(syscall.SIGTERM)
			<-m.done
		})
	}
}

// TestS3ProbeCacheReused: a second mount of the bucket lists it and fetches nothing else.
func TestS3ProbeCacheReused(t *testing.T) {
	_, p := bucketSource(t)
	cache := t.TempDir()
	first := startMount(t, "s3://train/ds", bucketArgs(p, "--probe-cache", cache)...)
	_, gets, _, _ := p.Counts()
	if gets == 0 {
		t.Fatal("the first mount probed without a ranged GET")
	}
	first.cmd.Process.Signal(syscall.SIGTERM)
	<-first.done
	_, before, listsBefore, _ := p.Counts()
	second := startMount(t, "s3://train/ds", bucketArgs(p, "--probe-cache", cache)...)
	n := len(sources)
	if want := fmt.Sprintf(": 0 probed, %d from the probe cache", n); !strings.Contains(second.log(), want) {
		t.Errorf("second mount: no %q in\n%s", want, second.log())
	}
	_, after, lists, _ := p.Counts()
	if after != before || lists == listsBefore {
		t.Fatalf("the second mount made %d GETs and %d listings, want none and at least one", after-before, lists-listsBefore)
	}
}

// probedMount mounts the bucket with a probe cache made by a mount before it, so that nothing of
// the videos is in memory when it comes up.
func probedMount(t *testing.T, p *s3test.Proxy, more ...string) *mountProc {
	cache := t.TempDir()
	args := bucketArgs(p, append([]string{"--probe-cache", cache}, more...)...)
	first := startMount(t, "s3://train/ds", args...)
	first.cmd.Process.Signal(syscall.SIGTERM)
	<-first.done
	return startMount(t, "s3://train/ds", args...)
}

// samplesOfVideo lists the samples of a video (its path in the source) from index.csv.
func samplesOfVideo(t *testing.T, dir, video string) []int {
	t.Helper()
	index, err := os.ReadFile(filepath.Join(dir, "index.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, line := range strings.Split(string(index), "\n") {
		var i int
		if strings.Contains(line, ","+video+",") {
			if _, err := fmt.Sscanf(line, "%d,", &i); err == nil {
				out = append(out, i)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no samples of %s in index.csv:\n%s", video, index)
	}
	return out
}

// TestS3ChangedObject: an object replaced after the mount fails its samples with EIO, the reason
// logged and in .vidfs/failed, while the other samples read as on local disk.
func TestS3ChangedObject(t *testing.T) {
	s, p := bucketSource(t)
	want := localReference(t).samples
	m := probedMount(t, p)
	s.Put("train", map[string]string{"ds/walk/gop16.mp4": testvideo.Path("vp9.webm")})
	got, failed := samplesOf(t, m.dir, nil, false)
	changed := map[int]bool{}
	for _, i := range samplesOfVideo(t, m.dir, "walk/gop16.mp4") {
		changed[i] = true
	}
	for i := range want {
		switch {
		case changed[i] && !errors.Is(failed[i], syscall.EIO):
			t.Errorf("sample %d of the replaced object: %v, want EIO", i, failed[i])
		case !changed[i] && (failed[i] != nil || !bytes.Equal(got[i], want[i])):
			t.Errorf("sample %d of another object: %v, or bytes that differ", i, failed[i])
		}
	}
	if !strings.Contains(m.log(), "object changed under the mount") || !strings.Contains(m.log(), "ETag") {
		t.Errorf("no reason logged:\n%s", m.log())
	}
	rows, err := os.ReadFile(filepath.Join(m.dir, ".vidfs/failed"))
	if err != nil || !strings.Contains(string(rows), "file changed since it was probed") {
		t.Errorf(".vidfs/failed: %v\n%s", err, rows)
	}
}

// TestS3Faults: with 5 % of requests answered 503 SlowDown or reset, every sample is served as on
// local disk; with the server killed mid-epoch, reads fail with EIO within --s3-timeout and the
// mount stays up; once it is back, the same samples read right.
func TestS3Faults(t *testing.T) {
	s, p := bucketSource(t)
	want := localReference(t).samples
	m := probedMount(t, p, "--s3-timeout", "4s")
	p.FailEvery(20)
	held := samplesOfVideo(t, m.dir, "walk/gop250.mp4") // read once the server is killed
	var first []int
	for _, i := range rand.New(rand.NewPCG(3, 4)).Perm(len(want)) {
		if !slices.Contains(held, i) {
			first = append(first, i)
		}
	}
	got, failed := samplesOf(t, m.dir, first, true)
	if len(failed) > 0 {
		t.Fatalf("with 5%% faults: %v\n%s", failed, m.log())
	}
	if _, _, _, faults := p.Counts(); faults == 0 {
		t.Fatal("no faults were injected")
	}
	for _, i := range first {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("sample %d differs from the local mount's", i)
		}
	}

	s.Stop()
	_, failed = samplesOf(t, m.dir, held[:1], false)
	if !errors.Is(failed[held[0]], syscall.EIO) {
		t.Fatalf("a sample read with the server down: %v, want EIO", failed[held[0]])
	}
	s.Restart()
	got, failed = samplesOf(t, m.dir, held, true)
	if len(failed) > 0 {
		t.Fatalf("after the server came back: %v\n%s", failed, m.log())
	}
	for _, i := range held {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("sample %d differs from the local mount's after the restart", i)
		}
	}
}

// TestS3StartErrors: a mount without credentials, of a missing bucket, or at a wrong endpoint
// fails at start, saying which.
func TestS3StartErrors(t *testing.T) {
	s, _ := bucketSource(t)
	for _, c := range []struct {
		name, url, endpoint, want string
		env                       func(testing.TB)
	}{
		{"no credentials", "s3://train/ds", s.Endpoint(), "no AWS credentials", s3test.NoCredentials},
		{"wrong bucket", "s3://nope/ds", s.Endpoint(), `bucket "nope" not found`, s3test.Env},
		{"wrong endpoint", "s3://train/ds", "http://127.0.0.1:1", "cannot reach the S3 endpoint http://127.0.0.1:1", s3test.Env},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.env(t)
			code, _, errs := vidfs(t, "mount", c.url, t.TempDir(), "--s3-endpoint", c.endpoint, "--s3-path-style", "--s3-timeout", "5s")
			if code != 1 || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, stderr %q: want 1 and %q", code, errs, c.want)
			}
		})
	}
}

// TestS3VerifyAndProbe: vidfs verify of the bucket finds what it finds in the same files on local
// disk, and vidfs probe of an object prints the probe table of the file.
func TestS3VerifyAndProbe(t *testing.T) {
	s, _ := bucketSource(t)
	flags := []string{"--frames", "4", "--stride", "2", "--size", "32x32", "--probe-cache", "", "--json"}
	s3flags := []string{"--s3-endpoint", s.Endpoint(), "--s3-path-style"}
	var reps [2]verifyReport
	for k, src := range []string{makeSource(t), "s3://train/ds"} {
		code, out, errs := vidfs(t, slices.Concat([]string{"verify", src}, flags, s3flags)...)
		// Exit 1: the empty video is left out.
		if err := json.Unmarshal([]byte(out), &reps[k]); err != nil || code != 1 {
			t.Fatalf("verify %s: exit %d, %v\n%s", src, code, err, errs)
		}
	}
	local, remote := reps[0].Summary, reps[1].Summary
	if local.Checked == 0 || remote.Checked != local.Checked || remote.OK != local.OK || remote.LeftOut != local.LeftOut || remote.Failed != 0 {
		t.Fatalf("verify of the bucket %+v, of the same files on disk %+v", remote, local)
	}
	var infos [2]map[string]any
	for k, path := range []string{testvideo.Path("h264_gop16.mp4"), "s3://train/ds/walk/gop16.mp4"} {
		code, out, errs := vidfs(t, slices.Concat([]string{"probe", path}, s3flags)...)
		if err := json.Unmarshal([]byte(out), &infos[k]); err != nil || code != 0 {
			t.Fatalf("probe %s: exit %d, %v\n%s", path, code, err, errs)
		}
		delete(infos[k], "path")
	}
	if a, b := fmt.Sprint(infos[0]), fmt.Sprint(infos[1]); a != b {
		t.Fatalf("probe of the object:\n%s\nof the file:\n%s", b, a)
	}
}

// TestFetchAheadInPlanOrder: a pass of fetching ahead GETs the samples' bytes in the order they
// are due, and reading each sample's range afterwards needs no GET.
func TestFetchAheadInPlanOrder(t *testing.T) {
	p, lay, infos, fresh := scanBucket(t)
	ctx := context.Background()
	// The last sample of each of three videos, the last video's first.
	var due []int
	var want []string
	for _, name := range []string{"walk/hevc.mkv", "run/vp9.webm", "jump/av1.mp4"} {
		for s := lay.Len() - 1; s >= 0; s-- {
			if lay.Videos[lay.Sample(s).Video].Path == name {
				due = append(due, s)
				want = append(want, "/train/ds/"+name)
				break
			}
		}
	}
	before := len(p.GetLog())
	a := newFetchAhead(fresh, lay, infos, nil, nil, newAheadKick(), 1<<30, slog.New(slog.DiscardHandler))
	a.pass(ctx, due)
	for _, s := range due {
		readRange(t, fresh, lay, infos, s)
	}
	if st := fresh.Stats(); st.Ahead == 0 || st.Misses != 0 {
		t.Fatalf("%d blocks fetched ahead, %d fetched for the reads after: want some, and none", st.Ahead, st.Misses)
	}
	gets := p.GetLog()[before:]
	var order []string
	for _, g := range gets {
		key, _, _ := strings.Cut(g, " ")
		if len(order) == 0 || order[len(order)-1] != key {
			order = append(order, key)
		}
	}
	if !slices.Equal(order, want) {
		t.Fatalf("GETs of fetching ahead and reading the ranges: %q, want the objects in the order due, %q, and no GET after", gets, want)
	}
}

// TestFetchAheadSkipsSamplesHeld: a pass of fetching ahead GETs nothing for the samples due that
// the mount holds already (decoded in memory or in the disk tier): only the others' objects.
func TestFetchAheadSkipsSamplesHeld(t *testing.T) {
	p, lay, infos, fresh := scanBucket(t)
	ctx := context.Background()
	// The first sample of each of three videos; the second is held.
	var due []int
	for _, name := range []string{"walk/hevc.mkv", "run/vp9.webm", "jump/av1.mp4"} {
		for s := range lay.Len() {
			if lay.Videos[lay.Sample(s).Video].Path == name {
				due = append(due, s)
				break
			}
		}
	}
	before := len(p.GetLog())
	held := func(s int) bool { return s == due[1] }
	a := newFetchAhead(fresh, lay, infos, nil, held, newAheadKick(), 1<<30, slog.New(slog.DiscardHandler))
	a.pass(ctx, due)
	readRange(t, fresh, lay, infos, due[2])
	var keys []string
	for _, g := range p.GetLog()[before:] {
		key, _, _ := strings.Cut(g, " ")
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	if want := []string{"/train/ds/walk/hevc.mkv", "/train/ds/jump/av1.mp4"}; !slices.Equal(keys, want) {
		t.Fatalf("objects fetched ahead: %q, want %q (not run/vp9.webm, whose sample is held)", keys, want)
	}
}

// scanBucket starts the test bucket (bucketSource's), scans it as a mount does and lays it out
// in samples of 4 frames, and opens it again with nothing in memory (fresh), listed, for a test
// of fetching ahead. Its buckets fetch one GET at a time, in the order asked: once the last
// range asked for reads, every GET asked before it is done.
func scanBucket(t *testing.T) (p *s3test.Proxy, lay *layout.Layout, infos *videoTables, fresh *s3src.Bucket) {
	t.Helper()
	_, p = bucketSource(t)
	ctx := context.Background()
	opts := s3src.Options{Endpoint: p.Endpoint(), PathStyle: true, InFlight: 1, BlockSize: 16 << 10}
	b, err := s3src.Open(ctx, "s3://train/ds", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	tables, videos, err := catalog.Scan(ctx, catalog.Options{Files: bucketFiles{b}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tables.Close() })
	lay, refs, _, _, err := arrange(layout.Spec{Frames: 4, Stride: 1, Height: 32, Width: 32, PadShort: true}, videos, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fresh, err = s3src.Open(ctx, "s3://train/ds", opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fresh.Close)
	if _, err := fresh.List(ctx); err != nil {
		t.Fatal(err)
	}
	return p, lay, &videoTables{tables: tables, refs: refs, src: bucketFiles{b}, lay: lay}, fresh
}

// readRange reads sample s's byte range (sampleBytes) through b.
func readRange(t *testing.T, b *s3src.Bucket, lay *layout.Layout, infos *videoTables, s int) {
	t.Helper()
	path, off, end, ok := sampleBytes(lay, infos, s)
	if !ok {
		t.Fatalf("sample %d: no byte range", s)
	}
	src, err := b.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	end = min(end, src.Size())
	if _, err := src.ReadAt(make([]byte, end-off), off); err != nil {
		t.Fatal(err)
	}
}

// TestS3OutageNotRemembered: the S3 server going down after the listing, for longer than
// --s3-timeout, fails the probes of a first scan with errors of the path to the videos, which
// the probe cache does not remember: once the server is back, the next scan probes those videos
// and finds all that a scan of the same videos on a local disk finds.
func TestS3OutageNotRemembered(t *testing.T) {
	s, p := bucketSource(t)
	ctx := context.Background()
	cache := t.TempDir()
	open := func() *s3src.Bucket {
		b, err := s3src.Open(ctx, "s3://train/ds", s3src.Options{Endpoint: p.Endpoint(), PathStyle: true, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return b
	}
	scan := func(o catalog.Options) []catalog.Video {
		t.Helper()
		tables, vs, err := catalog.Scan(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		tables.Close()
		if len(vs) != len(sources) {
			t.Fatalf("scan of %s found %d videos, want %d", o.Files.Root(), len(vs), len(sources))
		}
		return vs
	}

	vs := scan(catalog.Options{Files: stopAfterList{bucketFiles{open()}, s.Stop}, CacheDir: cache})
	for _, v := range vs {
		if v.Err == nil || (decode.Permanent(v.Err) && v.Rel != "bad/empty.mp4") {
			t.Errorf("with the server down: %s: %v (permanent %v), want an error of the path", v.Rel, v.Err, decode.Permanent(v.Err))
		}
	}

	s.Restart()
	vs = scan(catalog.Options{Files: bucketFiles{open()}, CacheDir: cache})
	local := scan(catalog.Options{Files: catalog.Dir(makeSource(t))})
	for i, v := range vs {
		if l := local[i]; (v.Err == nil) != (l.Err == nil) || (v.Err == nil && v.Brief.Frames != l.Brief.Frames) {
			t.Errorf("once the server is back: %s: %v, where a local scan finds %v", v.Rel, v.Err, l.Err)
		}
	}
}

// stopAfterList is a bucket whose server is stopped once it is listed: its videos are found, and
// then none of their bytes can be had.
type stopAfterList struct {
	bucketFiles
	stop func()
}

func (f stopAfterList) List(ctx context.Context) ([]catalog.File, error) {
	files, err := f.bucketFiles.List(ctx)
	f.stop()
	return files, err
}
