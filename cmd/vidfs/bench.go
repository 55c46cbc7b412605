package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/vidfs/vidfs/internal/metrics"
)

func benchCommand() *command {
	var (
		pattern  string
		jobs     int
		duration time.Duration
		seed     uint64
	)
	return &command{
		summary: "read a mount's samples as a trainer would, and report like fio",
		usage:   "MNT [--pattern seq|random|plan] [--jobs N] [--duration D]",
		help: `Reads whole samples from MNT/clips.raw, one pread each, from --jobs readers at once, and
prints what they got: clips/s, MB/s, read latency (p50, p90, p99, max), errors, and what vidfs
reported meanwhile (hit rate, seconds waited, decode amplification).

Patterns: seq reads samples 0, 1, 2, ... (shared among the jobs); random picks samples at
random; plan writes a shuffled order of all samples to MNT/.vidfs/order, as a training loop
would each epoch, and reads it in that order (a new order each pass). --duration 0 reads one
pass over the samples (seq, plan) or as many samples as there are (random).`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&pattern, "pattern", "plan", "seq, random or plan")
			fs.IntVar(&jobs, "jobs", 4, "readers at once")
			fs.DurationVar(&duration, "duration", 10*time.Second, "how long to read (0: one pass)")
			fs.Uint64Var(&seed, "seed", 1, "seed of the random and plan orders")
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if len(args) != 1 {
				return usageError{"want the mount point"}
			}
			if pattern != "seq" && pattern != "random" && pattern != "plan" {
				return usageError{fmt.Sprintf("--pattern %q: want seq, random or plan", pattern)}
			}
			if jobs < 1 {
				return usageError{"--jobs must be at least 1"}
			}
			r, err := runBench(ctx, args[0], pattern, jobs, duration, seed)
			if err != nil {
				return err
			}
			r.print(e.stdout)
			return nil
		},
	}
}

// benchResult is what a bench run measured.
type benchResult struct {
	mnt, pattern   string
	jobs           int
	clips, errs    int64
	bytes          int64
	elapsed        time.Duration
	lat            *metrics.Histogram
	firstErr       error
	hits, misses   int64
	waited, amplif float64
	decoded        int64
}

// feed hands out sample indices to the jobs in the pattern's order.
type feed struct {
	mu      sync.Mutex
	pattern string
	n, next int
	order   []int
	rnd     *rand.Rand
	mnt     string
	passes  int
	once    bool // stop after one pass
}

// take returns the next sample to read, or -1 when done.
func (f *feed) take() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.pattern {
	case "random":
		if f.once && f.next >= f.n {
			return -1, nil
		}
		f.next++
		return f.rnd.IntN(f.n), nil
	case "seq":
		if f.next >= f.n {
			if f.once {
				return -1, nil
			}
			f.next = 0
		}
		f.next++
		return f.next - 1, nil
	}
	if f.order == nil || f.next >= len(f.order) {
		if f.order != nil && f.once {
			return -1, nil
		}
		f.order = f.rnd.Perm(f.n)
		f.next = 0
		f.passes++
		if err := writePlan(f.mnt, f.order); err != nil {
			return -1, err
		}
	}
	f.next++
	return f.order[f.next-1], nil
}

// writePlan writes an order to MNT/.vidfs/order (replacing the plan at close).
func writePlan(mnt string, order []int) error {
	var b strings.Builder
	for i, s := range order {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, s)
	}
	b.WriteByte('\n')
	if err := os.WriteFile(filepath.Join(mnt, ".vidfs", "order"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing the plan: %w", err)
	}
	return nil
}

func runBench(ctx context.Context, mnt, pattern string, jobs int, duration time.Duration, seed uint64) (*benchResult, error) {
	lay, err := readDataset(mnt)
	if err != nil {
		return nil, err
	}
	before, err := readStats(mnt)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(mnt, "clips.raw"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	S := lay.SampleBytes
	fd := &feed{pattern: pattern, n: lay.Samples, rnd: rand.New(rand.NewPCG(seed, 7)), mnt: mnt, once: duration == 0}
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	r := &benchResult{mnt: mnt, pattern: pattern, jobs: jobs, lat: &metrics.Histogram{}}
	var clips, errs, bytes atomic.Int64
	var errOnce sync.Once
	var feedErr error
	start := time.Now()
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			buf := make([]byte, S)
			for ctx.Err() == nil {
				i, err := fd.take()
				if err != nil {
					errOnce.Do(func() { feedErr = err })
					return
				}
				if i < 0 {
					return
				}
				t0 := time.Now()
				n, err := f.ReadAt(buf, int64(i)*S)
				r.lat.Observe(time.Since(t0))
				bytes.Add(int64(n))
				if err != nil && !errors.Is(err, context.Canceled) {
					errs.Add(1)
					errOnce.Do(func() { r.firstErr = fmt.Errorf("sample %d: %w", i, err) })
					continue
				}
				clips.Add(1)
			}
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	if feedErr != nil {
		return nil, feedErr
	}
	r.clips, r.errs, r.bytes = clips.Load(), errs.Load(), bytes.Load()
	if after, err := readStats(mnt); err == nil {
		r.hits = after.Cache.Hits - before.Cache.Hits
		r.misses = after.Cache.Misses - before.Cache.Misses
		r.waited = after.Reads.WaitSeconds - before.Reads.WaitSeconds
		r.decoded = after.Decode.Clips - before.Decode.Clips
		if served := after.Decode.FramesServed - before.Decode.FramesServed; served > 0 {
			r.amplif = float64(after.Decode.FramesDecoded-before.Decode.FramesDecoded) / float64(served)
		}
	}
	return r, nil
}

func (r *benchResult) print(w io.Writer) {
	secs := r.elapsed.Seconds()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	fmt.Fprintf(w, "vidfs bench %s: pattern=%s jobs=%d\n", r.mnt, r.pattern, r.jobs)
	fmt.Fprintf(w, "  read: %d clips in %.2f s: %.1f clips/s, %.1f MB/s\n", r.clips, secs, float64(r.clips)/secs, float64(r.bytes)/secs/1e6)
	fmt.Fprintf(w, "  lat (ms): p50=%.2f p90=%.2f p99=%.2f max=%.2f\n", ms(r.lat.Quantile(0.5)), ms(r.lat.Quantile(0.9)), ms(r.lat.Quantile(0.99)), ms(r.lat.Max()))
	fmt.Fprintf(w, "  errors: %d", r.errs)
	if r.firstErr != nil {
		fmt.Fprintf(w, " (first: %v)", r.firstErr)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  vidfs: hit rate %s, readers waited %.2f s, %d clips decoded, %.2f frames decoded per frame served\n",
		pct(r.hits, r.hits+r.misses), r.waited, r.decoded, r.amplif)
}
