package s3src_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/leakcheck"
	"github.com/vidfs/vidfs/internal/s3src"
	"github.com/vidfs/vidfs/internal/s3test"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// bucketOf starts a server holding the test videos under videos/ of bucket "data", and a proxy
// in front of it.
func bucketOf(t *testing.T) (*s3test.Server, *s3test.Proxy) {
	s := s3test.Start(t)
	s.PutDir("data", "videos/", testvideo.Dir())
	s3test.Env(t)
	return s, s3test.NewProxy(t, s.Addr)
}

func open(t *testing.T, endpoint, url string, o s3src.Options) *s3src.Bucket {
	t.Helper()
	o.Endpoint, o.PathStyle = endpoint, true
	b, err := s3src.Open(context.Background(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readAll reads an object through its Source in chunks of FFmpeg's size, in a random order.
func readAll(t *testing.T, src decode.Source) ([]byte, error) {
	out := make([]byte, src.Size())
	const chunk = 64 << 10
	offs := []int64{}
	for off := int64(0); off < src.Size(); off += chunk {
		offs = append(offs, off)
	}
	rand.Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
	for _, off := range offs {
		end := min(off+chunk, src.Size())
		n, err := src.ReadAt(out[off:end], off)
		if err != nil && !(errors.Is(err, io.EOF) && off+int64(n) == src.Size()) {
			return nil, err
		}
	}
	return out, nil
}

func TestOpenErrors(t *testing.T) {
	s, _ := bucketOf(t)
	for _, c := range []struct {
		name, endpoint, url, want string
		env                       func(testing.TB)
	}{
		{"no credentials", s.Endpoint(), "s3://data/videos", "no AWS credentials", s3test.NoCredentials},
		{"wrong bucket", s.Endpoint(), "s3://nope/videos", `bucket "nope" not found at ` + s.Endpoint(), s3test.Env},
		{"wrong endpoint", "http://127.0.0.1:1", "s3://data/videos", "cannot reach the S3 endpoint http://127.0.0.1:1", s3test.Env},
		{"not a URL", s.Endpoint(), "s3:///videos", "want s3://BUCKET", s3test.Env},
		// The bucket in the host name (data.localhost), which a server on localhost is not.
		{"no path style", "http://localhost:" + s.Addr[strings.LastIndex(s.Addr, ":")+1:], "s3://data/videos", "--s3-path-style", s3test.Env},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.env(t)
			_, err := s3src.Open(context.Background(), c.url, s3src.Options{Endpoint: c.endpoint, PathStyle: c.name != "no path style", Timeout: 5 * time.Second})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestReadThroughFaults: with every 20th request answered 503 SlowDown or reset (5 %), every
// byte of every object still reads right, and the retries are counted.
func TestReadThroughFaults(t *testing.T) {
	_, p := bucketOf(t)
	p.FailEvery(20)
	b := open(t, p.Endpoint(), "s3://data/videos/", s3src.Options{BlockSize: 64 << 10, Timeout: 20 * time.Second})
	objs, err := b.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) < 20 {
		t.Fatalf("listed %d objects", len(objs))
	}
	for _, o := range objs {
		src, err := b.Open(b.Path(o.Rel))
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(t, src)
		if err != nil {
			t.Fatalf("%s: %v", o.Rel, err)
		}
		want, err := os.ReadFile(testvideo.Path(o.Rel))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: bytes read differ from the file's", o.Rel)
		}
	}
	st := b.Stats()
	if _, _, _, faults := p.Counts(); faults == 0 || st.Retries == 0 || st.Throttled == 0 {
		t.Fatalf("faults %d, retries %d, throttled %d: the faults were not injected or not counted", faults, st.Retries, st.Throttled)
	}
}

// TestPrefetchCoalesces: a prefetched range is one GET, and reads of it then fetch nothing.
func TestPrefetchCoalesces(t *testing.T) {
	_, p := bucketOf(t)
	b := open(t, p.Endpoint(), "s3://data/videos/", s3src.Options{BlockSize: 16 << 10, MaxRun: 1 << 20})
	if _, err := b.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	path := b.Path("h264_gop250.mp4")
	src, err := b.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if src.Size() < 100<<10 {
		t.Fatalf("h264_gop250.mp4 is %d bytes: too small for the test", src.Size())
	}
	_, before, _, _ := p.Counts()
	if n, err := b.Prefetch(context.Background(), path, 0, 1<<62); err != nil || n != src.Size() {
		t.Fatalf("Prefetch of the whole object: %d bytes of %d, %v", n, src.Size(), err)
	}
	if _, err := readAll(t, src); err != nil {
		t.Fatal(err)
	}
	_, after, _, _ := p.Counts()
	if got := after - before; got != 1 {
		t.Fatalf("prefetching %d bytes and reading them took %d GETs, want 1", src.Size(), got)
	}
}

// TestChangedObject: an object replaced after the listing fails its reads with ErrChanged and the
// reason; the others read.
func TestChangedObject(t *testing.T) {
	s, p := bucketOf(t)
	b := open(t, p.Endpoint(), "s3://data/videos/", s3src.Options{})
	if _, err := b.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Put("data", map[string]string{"videos/h264_gop16.mp4": testvideo.Path("vp8.webm")})
	src, err := b.Open(b.Path("h264_gop16.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.ReadAt(make([]byte, 100), 0)
	if !errors.Is(err, decode.ErrChanged) || !strings.Contains(err.Error(), "ETag") {
		t.Fatalf("reading a replaced object: %v, want ErrChanged saying its ETag changed", err)
	}
	other, err := b.Open(b.Path("vp8.webm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, other); err != nil {
		t.Fatalf("another object: %v", err)
	}
}

// TestNetworkDown: while every connection is reset, reads fail after the bound, saying so; once
// the network is back, the same reads succeed.
func TestNetworkDown(t *testing.T) {
	_, p := bucketOf(t)
	b := open(t, p.Endpoint(), "s3://data/videos/", s3src.Options{Timeout: 2 * time.Second})
	if _, err := b.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	src, err := b.Open(b.Path("vp9.webm"))
	if err != nil {
		t.Fatal(err)
	}
	p.SetDown(true)
	if _, err := src.ReadAt(make([]byte, 100), 0); err == nil || !strings.Contains(err.Error(), "--s3-timeout") {
		t.Fatalf("read with the network down: %v, want an error naming --s3-timeout", err)
	}
	p.SetDown(false)
	got, err := readAll(t, src)
	if err != nil {
		t.Fatalf("read once the network is back: %v", err)
	}
	want, _ := os.ReadFile(testvideo.Path("vp9.webm"))
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ once the network is back")
	}
}

// TestCloseEndsReadsAndGoroutines: Close ends the reads waiting on a network that is down at
// once, not after the bound, and leaves no goroutine behind (GETs, their retries, connections).
func TestCloseEndsReadsAndGoroutines(t *testing.T) {
	_, p := bucketOf(t)
	before := goleak.IgnoreCurrent()
	b := open(t, p.Endpoint(), "s3://data/videos/", s3src.Options{Timeout: 10 * time.Minute})
	objs, err := b.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Prefetch(context.Background(), b.Path(objs[0].Rel), 0, 1<<62); err != nil {
		t.Fatal(err)
	}
	p.SetDown(true)
	errs := make(chan error, 3)
	for _, o := range objs[1:4] {
		src, err := b.Open(b.Path(o.Rel))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := src.ReadAt(make([]byte, 100), 0)
			errs <- err
		}()
	}
	for _, _, _, faults := p.Counts(); faults < 3; _, _, _, faults = p.Counts() {
		runtime.Gosched() // until the reads' GETs have failed at least once
	}
	b.Close()
	for range 3 {
		if err := <-errs; !errors.Is(err, s3src.ErrUnavailable) {
			t.Errorf("read ended by Close: %v, want ErrUnavailable", err)
		}
	}
	src, _ := b.Open(b.Path(objs[4].Rel))
	if _, err := src.ReadAt(make([]byte, 100), 0); !errors.Is(err, s3src.ErrUnavailable) {
		t.Errorf("read after Close: %v, want ErrUnavailable", err)
	}
	p.SetDown(false)
	leakcheck.None(t, before)
}

// TestCacheBound: reading every object through, as a demuxer does (a block at a time, in file
// order, so that reads fetch ahead), and in random order, the fetched bytes held never exceed
// the bucket's memory, small as it is against the runs a GET may fetch (8 MiB by default).
func TestCacheBound(t *testing.T) {
	_, p := bucketOf(t)
	b := open(t, p.Endpoint(), "s3://data/videos/", s3src.Options{CacheBytes: 16 << 10, BlockSize: 4 << 10})
	objs, err := b.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		if st := b.Stats(); st.CacheBytes > st.CacheCapacity {
			t.Fatalf("%s: %d bytes held, more than the bound of %d", what, st.CacheBytes, st.CacheCapacity)
		}
	}
	for _, o := range objs {
		src, err := b.Open(b.Path(o.Rel))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4<<10)
		for off := int64(0); off < o.Size; off += int64(len(buf)) {
			if _, err := src.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("%s at %d: %v", o.Rel, off, err)
			}
			check(o.Rel)
		}
		if _, err := readAll(t, src); err != nil {
			t.Fatal(err)
		}
		check(o.Rel)
	}
	if st := b.Stats(); st.Evicted == 0 {
		t.Fatalf("nothing evicted: %+v", st)
	}
}
