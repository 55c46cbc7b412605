// Package s3test runs a real S3 server for tests: versitygw over a directory, built once by
// scripts/setup.sh test into ~/.cache/vidfs/versitygw, and a proxy in front of it that counts
// requests and injects latency, 503 SlowDown answers and reset connections.
package s3test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The root user's keys the server is started with.
const (
	AccessKey = "vidfs-test"
	SecretKey = "vidfs-test-secret"
)

// Binary finds versitygw: $VIDFS_VERSITYGW, ~/.cache/vidfs/versitygw/versitygw (where
// scripts/setup.sh test builds it), or on PATH.
func Binary() (string, error) {
	if p := os.Getenv("VIDFS_VERSITYGW"); p != "" {
		return p, nil
	}
	if dir, err := os.UserCacheDir(); err == nil {
		p := filepath.Join(dir, "vidfs", "versitygw", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return exec.LookPath("versitygw")
}

// T is what Start and NewProxy need of a test: a testing.TB, or a command's own (the
// benchmark's server, internal/s3test/s3serve).
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Server is a running versitygw serving Dir/BUCKET/ as bucket BUCKET.
type Server struct {
	tb       T
	bin, Dir string
	Addr     string // host:port
	cmd      *exec.Cmd
}

// Start starts versitygw on a free port over a new directory, or skips the test, saying how to
// build it, when it is not there. It is stopped at the end of the test.
func Start(tb T) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		tb.Skipf("no S3 server to test against: versitygw not found (run scripts/setup.sh test, which builds it into ~/.cache/vidfs/versitygw): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &Server{tb: tb, bin: bin, Dir: tb.TempDir(), Addr: addr}
	s.Restart()
	tb.Cleanup(s.Stop)
	return s
}

// Endpoint is the server's URL.
func (s *Server) Endpoint() string { return "http://" + s.Addr }

// Restart starts the server (again, after Stop) on the same address and directory, and waits
// until it answers.
func (s *Server) Restart() {
	s.tb.Helper()
	s.cmd = exec.Command(s.bin, "--port", s.Addr, "--keep-alive", "--quiet", "posix", s.Dir)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+AccessKey, "ROOT_SECRET_KEY="+SecretKey)
	s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("starting versitygw: %v", err)
	}
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", s.Addr)
		if err == nil {
			c.Close()
			return
		}
		if i == 200 {
			s.tb.Fatalf("versitygw does not answer on %s after 20 s: %v", s.Addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop stops the server (SIGTERM) and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
	s.cmd = nil
}

// Client is an S3 client of the server with the root user's keys, for the test's own uploads.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint()), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")})
}

// Put uploads files (key: local path) into bucket, creating it first if need be.
func (s *Server) Put(bucket string, files map[string]string) {
	s.tb.Helper()
	c := s.Client()
	ctx := context.Background()
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			s.tb.Fatalf("creating bucket %s: %v", bucket, err)
		}
	}
	for key, path := range files {
		f, err := os.Open(path)
		if err != nil {
			s.tb.Fatal(err)
		}
		_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: f})
		f.Close()
		if err != nil {
			s.tb.Fatalf("uploading %s: %v", key, err)
		}
	}
}

// PutDir uploads every file under dir into bucket under prefix, keyed by its path under dir.
func (s *Server) PutDir(bucket, prefix, dir string) {
	s.tb.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[prefix+filepath.ToSlash(rel)] = p
		return nil
	})
	if err != nil {
		s.tb.Fatal(err)
	}
	s.Put(bucket, files)
}

// Proxy forwards HTTP requests to a server, counting them, and injects faults when told.
type Proxy struct {
	srv *http.Server
	// Addr is the proxy's host:port.
	Addr string

	// Every Nth request is answered 503 SlowDown, and every Nth (offset by N/2) has its
	// connection reset before an answer (0: none). Latency is added before each request.
	failEvery atomic.Int64
	latency   atomic.Int64 // nanoseconds
	count     atomic.Int64 // requests seen
	gets      atomic.Int64 // GETs of objects (with a Range)
	lists     atomic.Int64 // ListObjectsV2 requests
	faults    atomic.Int64 // requests failed on purpose
	objGets   atomic.Int64 // GETs of objects, ranged or whole (not listings)
	bytesOut  atomic.Int64 // bytes of the answers' bodies forwarded to the client

	link link // the bandwidth cap shared by every answer

	getsMu sync.Mutex // guards getLog
	getLog []string   // the ranged GETs forwarded, in order: "KEY bytes=A-B"

	mu   sync.Mutex // guards down
	down bool       // answer every request by resetting its connection
}

// NewProxy starts a proxy to target (host:port), stopped at the end of the test.
func NewProxy(tb T, target string) *Proxy {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{Addr: l.Addr().String()}
	u := &url.URL{Scheme: "http", Host: target}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host // the client signed the proxy's host
	}}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := p.count.Add(1)
		if r.Method == http.MethodGet && r.Header.Get("Range") != "" {
			p.gets.Add(1)
		}
		if r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2" {
			p.lists.Add(1)
		}
		if d := p.latency.Load(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		every := p.failEvery.Load()
		switch {
		case down || (every > 0 && n%every == every/2):
			p.faults.Add(1)
			reset(w)
		case every > 0 && n%every == 0:
			p.faults.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
		default:
			if r.Method == http.MethodGet && r.Header.Get("Range") != "" {
				p.getsMu.Lock()
				p.getLog = append(p.getLog, r.URL.Path+" "+r.Header.Get("Range"))
				p.getsMu.Unlock()
			}
			if r.Method == http.MethodGet && r.URL.RawQuery == "" && strings.Count(strings.Trim(r.URL.Path, "/"), "/") >= 1 {
				p.objGets.Add(1)
			}
			rp.ServeHTTP(&capped{ResponseWriter: w, p: p}, r)
		}
	})}
	go p.srv.Serve(l)
	tb.Cleanup(func() { p.srv.Close() })
	return p
}

// reset closes the request's connection without an answer, with RST (SO_LINGER 0).
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// link paces the bytes of every answer through one link of a given bandwidth: each write
// reserves its share of the link's time, after the writes before it, and waits for its end.
type link struct {
	bps  atomic.Int64 // bytes a second; 0: no cap
	mu   sync.Mutex   // guards free
	free time.Time    // when the link has sent everything reserved so far
}

// wait blocks until n more bytes have had their time on the link.
func (l *link) wait(n int) {
	bps := l.bps.Load()
	if bps <= 0 || n == 0 {
		return
	}
	l.mu.Lock()
	now := time.Now()
	if l.free.Before(now) {
		l.free = now
	}
	l.free = l.free.Add(time.Duration(float64(n) / float64(bps) * float64(time.Second)))
	until := l.free
	l.mu.Unlock()
	time.Sleep(time.Until(until))
}

// capped is an answer's writer through the proxy's link, counting its body's bytes.
type capped struct {
	http.ResponseWriter
	p *Proxy
}

// Write sends b in pieces of at most 64 KiB, each after its time on the link.
func (c *capped) Write(b []byte) (int, error) {
	done := 0
	for len(b) > 0 {
		n := min(len(b), 64<<10)
		c.p.link.wait(n)
		m, err := c.ResponseWriter.Write(b[:n])
		done += m
		c.p.bytesOut.Add(int64(m))
		if err != nil {
			return done, err
		}
		b = b[n:]
	}
	return done, nil
}

// Flush passes a flush on to the connection (httputil.ReverseProxy flushes as it copies).
func (c *capped) Flush() { http.NewResponseController(c.ResponseWriter).Flush() }

// Unwrap gives http.ResponseController the connection's writer.
func (c *capped) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// SetBandwidth caps the bytes a second of all answers together (0: no cap).
func (p *Proxy) SetBandwidth(bytesPerSecond int64) { p.link.bps.Store(bytesPerSecond) }

// Traffic is the GETs of objects (ranged or whole, not listings) the proxy has forwarded, and
// the bytes of all the answers' bodies.
func (p *Proxy) Traffic() (objectGETs, bodyBytes int64) { return p.objGets.Load(), p.bytesOut.Load() }

// GetLog returns the ranged GETs forwarded so far, in order, as "/BUCKET/KEY bytes=A-B".
func (p *Proxy) GetLog() []string {
	p.getsMu.Lock()
	defer p.getsMu.Unlock()
	return append([]string(nil), p.getLog...)
}

// Endpoint is the proxy's URL.
func (p *Proxy) Endpoint() string { return "http://" + p.Addr }

// FailEvery makes every nth request fail, half with 503 SlowDown, half with a reset (0: none).
func (p *Proxy) FailEvery(n int) { p.failEvery.Store(int64(n)) }

// SetLatency adds d before each request is forwarded.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// SetDown makes the proxy reset every connection (the network is down) or forward again.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// Counts are the requests the proxy has seen: all, ranged GETs, listings, and those failed on
// purpose.
func (p *Proxy) Counts() (requests, gets, lists, faults int64) {
	return p.count.Load(), p.gets.Load(), p.lists.Load(), p.faults.Load()
}

// Env sets the environment of the standard AWS chain to the server's root keys for the test,
// and keeps the chain from looking at this machine's files and instance metadata.
func Env(tb testing.TB) {
	NoCredentials(tb)
	tb.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	tb.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
}

// NoCredentials empties the standard AWS chain for the test: no keys in the environment, no
// shared files, no instance metadata.
func NoCredentials(tb testing.TB) {
	dir := tb.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"} {
		tb.Setenv(k, "")
		os.Unsetenv(k)
	}
	tb.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	tb.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	tb.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	tb.Setenv("AWS_REGION", "us-east-1")
}
