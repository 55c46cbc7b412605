// Package readers runs paced readers beside a benchmark and records the longest any single
// read took: how long readers waited while the benchmark's work ran.
package readers

import (
	"sync"
	"sync/atomic"
	"time"
)

// Readers are goroutines each calling read with their own sequence of numbers (k, k+n, ...),
// pausing between calls.
type Readers struct {
	stop    atomic.Bool
	longest atomic.Int64 // nanoseconds
	wg      sync.WaitGroup
	err     error
	errOnce sync.Once
}

// Start starts n readers that call read, with pause between calls, until Stop. A reader that
// gets an error stops, and Stop returns the first error.
func Start(n int, pause time.Duration, read func(i int) error) *Readers {
	r := &Readers{}
	for k := range n {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for i := k; !r.stop.Load(); i += n {
				time.Sleep(pause)
				t0 := time.Now()
				if err := read(i); err != nil {
					r.errOnce.Do(func() { r.err = err })
					return
				}
				if d := time.Since(t0).Nanoseconds(); d > r.longest.Load() {
					r.longest.Store(d)
				}
			}
		}()
	}
	return r
}

// Reset forgets the longest read so far (the readers' start).
func (r *Readers) Reset() { r.longest.Store(0) }

// Stop stops the readers, waits for them, and returns the longest read since Reset, and the
// first error a reader got.
func (r *Readers) Stop() (time.Duration, error) {
	r.stop.Store(true)
	r.wg.Wait()
	return time.Duration(r.longest.Load()), r.err
}
