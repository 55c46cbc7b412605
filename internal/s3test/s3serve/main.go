// Command s3serve is the S3 server of the object storage benchmark (bench/s3.py): versitygw
// with the given directories uploaded into a bucket, behind s3test's proxy. It prints one JSON
// line, {"server": URL, "proxy": URL, "bucket": B}, once the objects are in, then reads commands
// on stdin, one a line, answering each with one JSON line:
//
//	latency 100ms        added before each request the proxy forwards
//	bandwidth 12500000   bytes a second of all answers together (0: no cap)
//	counts               {"requests", "gets", "lists", "object_gets", "bytes"} so far
//
// It stops the server and removes its directory at the end of stdin or on SIGTERM/SIGINT.
//
// Usage: s3serve -dir DIR -bucket B LOCALDIR=PREFIX...
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vidfs/vidfs/internal/s3test"
)

// run is s3test.T for a command: a failure ends the process after the clean-ups.
type run struct {
	dir      string // where temporary directories go
	mu       sync.Mutex
	cleanups []func() // GUARDED_BY(mu)
}

func (r *run) Helper() {}

func (r *run) Fatal(args ...any) { r.exit(fmt.Sprint(args...)) }

func (r *run) Fatalf(format string, args ...any) { r.exit(fmt.Sprintf(format, args...)) }

func (r *run) Skipf(format string, args ...any) { r.exit(fmt.Sprintf(format, args...)) }

func (r *run) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *run) TempDir() string {
	d, err := os.MkdirTemp(r.dir, "s3serve-")
	if err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// close runs the clean-ups, last first.
func (r *run) close() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

func (r *run) exit(msg string) {
	fmt.Fprintln(os.Stderr, "s3serve:", msg)
	r.close()
	os.Exit(1)
}

func main() {
	dir := flag.String("dir", os.TempDir(), "directory for the server's files (needs xattrs: ext4, not tmpfs)")
	bucket := flag.String("bucket", "bench", "the bucket to upload into")
	flag.Parse()
	r := &run{dir: *dir}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		r.close()
		os.Exit(1)
	}()
	srv := s3test.Start(r)
	for _, arg := range flag.Args() {
		local, prefix, ok := strings.Cut(arg, "=")
		if !ok {
			r.Fatalf("argument %q is not LOCALDIR=PREFIX", arg)
		}
		srv.PutDir(*bucket, prefix, local)
	}
	p := s3test.NewProxy(r, srv.Addr)
	out := json.NewEncoder(os.Stdout)
	out.Encode(map[string]string{"server": srv.Endpoint(), "proxy": p.Endpoint(), "bucket": *bucket})
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(in.Text()), " ")
		switch cmd {
		case "latency":
			d, err := time.ParseDuration(arg)
			if err != nil {
				out.Encode(map[string]string{"error": err.Error()})
				continue
			}
			p.SetLatency(d)
			out.Encode(map[string]string{"latency": d.String()})
		case "bandwidth":
			n, err := strconv.ParseInt(arg, 10, 64)
			if err != nil {
				out.Encode(map[string]string{"error": err.Error()})
				continue
			}
			p.SetBandwidth(n)
			out.Encode(map[string]int64{"bandwidth": n})
		case "counts":
			req, gets, lists, _ := p.Counts()
			objGets, bytes := p.Traffic()
			out.Encode(map[string]int64{"requests": req, "gets": gets, "lists": lists, "object_gets": objGets, "bytes": bytes})
		default:
			out.Encode(map[string]string{"error": "unknown command " + strconv.Quote(cmd)})
		}
	}
	r.close()
}
