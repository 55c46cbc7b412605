package diskstore

// The writer both stores write with: a queue of jobs bounded in bytes, one goroutine that writes
// them, and a Close that gives up on a disk that does not answer.

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// CloseWarn is how long Close waits by default for the writer before it warns and drops what is
// queued but the job being written; CloseGiveUp (times that wait) how much longer it waits for
// that job before it gives up on the writer.
const (
	CloseWarn   = 5 * time.Second
	CloseGiveUp = 5
)

// WriterOptions configures a Writer whose jobs carry an M: what the store needs to write one,
// beside its bytes.
type WriterOptions[M any] struct {
	// Name is what the log and errors call the store ("disk tier"), Dir its directory, and Jobs
	// what they call its jobs ("entries").
	Name, Dir, Jobs string
	// Backlog bounds the bytes of the jobs queued: a Put beyond it is skipped.
	Backlog int64
	// Buffers is where the bytes queued are copied to (nil: the writer's own).
	Buffers *Buffers
	// Write writes one job, on the writer's goroutine, one job at a time, and says how many of
	// its units (the unit Put was told) it did not write. It logs its own failures. The job's
	// bytes stay queued, and readable with Queued, until it returns.
	Write func(m M, data []byte) (skipped int64)
	// What names a job for the error of a Close that gives up on it ("entry 0a1b...").
	What func(m M) string
	// Release closes what Write uses (the lock on the directory, coders, descriptors). It runs
	// once: in Close, if the writer has ended by then, or else when the writer ends, if ever.
	Release func()
	// ReleaseReaders closes what the store's readers use and Write does not; it runs once, in
	// the first Close, whether or not the writer has ended. Nil: nothing.
	ReleaseReaders func()
	// Log takes the warning of a Close that drops jobs and the error of one that gives up (nil:
	// none).
	Log *slog.Logger
}

// Writer writes a store's jobs in the order they were put, on a goroutine of its own at a low
// priority, so that its callers need not wait for the disk: Put never waits, PutBuffer as long as
// it is told. It is safe for concurrent use.
type Writer[M any] struct {
	opts WriterOptions[M]
	bufs *Buffers
	wake chan struct{} // a job was put, or Close asked the writer to end
	done chan struct{} // closed when the writer has ended

	// mu guards everything below. LOCK ORDERING: taken after the store's own lock (a store
	// calls Put, Queued and Stats holding its lock), before none: Write, What and the functions
	// given to Queued and Wait are called without it, or must take no lock.
	mu      sync.Mutex
	queue   []Job[M] // oldest first: the first is the one being written, if any
	queued  int64    // bytes in queue
	skipped int64    // units not written because Write said so
	full    int64    // units not queued because the backlog was full
	// changed is closed, and replaced, when a job leaves the queue (Flush and Wait).
	changed chan struct{}
	closed  bool
	// ended says the writer has ended; abandoned, that Close gave up on it first, leaving it
	// Release to run.
	ended, abandoned bool
}

// Job is a job queued: the store's M and its bytes.
type Job[M any] struct {
	Meta M
	buf  *[]byte
}

// Data is the job's bytes, as Put copied them.
func (j Job[M]) Data() []byte { return *j.buf }

// WriterStats is a snapshot of a Writer's queue.
type WriterStats struct {
	Jobs    int   // queued, the one being written included
	Bytes   int64 // their bytes
	Skipped int64 // units not written because Write said so (no room, the disk refused)
	Full    int64 // units not queued because the backlog was full
}

// NewWriter starts a writer of the jobs Put queues. Close ends it.
func NewWriter[M any](opts WriterOptions[M]) *Writer[M] {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	w := &Writer[M]{opts: opts, bufs: opts.Buffers, wake: make(chan struct{}, 1), done: make(chan struct{}), changed: make(chan struct{})}
	if w.bufs == nil {
		w.bufs = new(Buffers)
	}
	go w.run()
	return w
}

// Put queues a job of m and a copy of data, and says whether it was queued. It never waits:
// with the backlog full it skips the job, counting its units as Full; after Close it skips it
// without counting.
func (w *Writer[M]) Put(m M, data []byte, units int64) bool {
	bp := w.bufs.Get(len(data))
	copy(*bp, data)
	if !w.PutBuffer(context.Background(), m, bp, units, 0) {
		w.bufs.Put(bp)
		return false
	}
	return true
}

// PutBuffer queues a job of m whose bytes are *bp, a buffer of the writer's Buffers (Get), which
// the writer takes over if the job is queued; the caller keeps it otherwise. With the backlog
// full it waits up to wait for room (while ctx lasts), and then skips the job, counting its
// units as Full. A job alone in the queue is taken whatever its size.
func (w *Writer[M]) PutBuffer(ctx context.Context, m M, bp *[]byte, units int64, wait time.Duration) bool {
	var deadline <-chan time.Time
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return false
		}
		n := int64(len(*bp))
		if len(w.queue) == 0 || w.queued+n <= w.opts.Backlog {
			w.queue = append(w.queue, Job[M]{Meta: m, buf: bp})
			w.queued += n
			w.poke()
			w.mu.Unlock()
			return true
		}
		changed := w.changed
		if wait <= 0 {
			w.full += units
			w.mu.Unlock()
			return false
		}
		w.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-changed:
		case <-ctx.Done():
			wait = 0
		case <-deadline:
			wait = 0
		}
	}
}

// poke wakes the writer if it waits.
func (w *Writer[M]) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Queued calls f with the jobs queued, oldest first (the first may be being written), and
// returns what it returns. f runs with the writer's lock held: it must be quick, keep nothing of
// the jobs, and call nothing of the writer's.
func (w *Writer[M]) Queued(f func(jobs []Job[M]) bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return f(w.queue)
}

// Stats returns a snapshot of the queue.
func (w *Writer[M]) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WriterStats{Jobs: len(w.queue), Bytes: w.queued, Skipped: w.skipped, Full: w.full}
}

// Flush waits until every job queued is written (or skipped).
func (w *Writer[M]) Flush() {
	w.Wait(context.Background(), func(M) bool { return true })
}

// Wait waits until no job queued matches match (each matching job written, or skipped), or until
// ctx is done, and then returns ctx's error. match is called with the writer's lock held: it
// must be quick and take no lock.
func (w *Writer[M]) Wait(ctx context.Context, match func(m M) bool) error {
	for {
		w.mu.Lock()
		pending := slices.ContainsFunc(w.queue, func(j Job[M]) bool { return match(j.Meta) })
		changed := w.changed
		w.mu.Unlock()
		if !pending {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// signal tells Flush and Wait that the queue changed. Called with mu held.
func (w *Writer[M]) signal() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// Done is closed when the writer has ended.
func (w *Writer[M]) Done() <-chan struct{} { return w.done }

// run writes queued jobs until Close. It runs on a thread of its own at a low priority (nice
// 10), so that compressing and writing yield the CPU to decoding and reading; when it cannot
// keep up, the backlog fills and Put skips.
func (w *Writer[M]) run() {
	defer close(w.done)
	defer func() {
		w.mu.Lock()
		w.ended = true
		abandoned := w.abandoned
		w.mu.Unlock()
		if abandoned { // Close gave up on this writer: what it used is its to close
			w.opts.Release()
		}
	}()
	// Locked and never unlocked: the thread, with its priority, ends with this goroutine instead
	// of going back to run others.
	runtime.LockOSThread()
	unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 10) // best effort
	for {
		w.mu.Lock()
		for len(w.queue) == 0 {
			if w.closed {
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			<-w.wake
			w.mu.Lock()
		}
		j := w.queue[0]
		w.mu.Unlock()
		skipped := w.opts.Write(j.Meta, *j.buf)
		w.mu.Lock()
		w.queue[0] = Job[M]{} // so that the array behind the queue does not keep its buffer
		w.queue = w.queue[1:]
		w.queued -= int64(len(*j.buf))
		w.skipped += skipped
		w.signal()
		w.mu.Unlock()
		w.bufs.Put(j.buf)
	}
}

// Close writes what is queued, if it can within warn, and then releases what the store uses
// (ReleaseReaders, then Release). A writer the disk holds longer than that is given less: Close
// warns and drops what is queued but the job being written, and waits CloseGiveUp times warn
// more for it; a writer still held then is given up on: Close returns an error naming the job it
// is stuck on, and the writer, if the disk ever answers, finishes that job and runs Release
// itself. A second Close does nothing.
func (w *Writer[M]) Close(warn time.Duration) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	w.poke()
	select {
	case <-w.done:
	case <-time.After(warn):
		w.mu.Lock()
		n := len(w.queue)
		if n > 0 { // the one being written finishes; the rest are dropped
			w.queue, w.queued = w.queue[:1], int64(len(*w.queue[0].buf))
			w.signal()
		}
		w.mu.Unlock()
		w.opts.Log.Warn(w.opts.Name+": closing with "+w.opts.Jobs+" unwritten", w.opts.Jobs, n)
		select {
		case <-w.done:
		case <-time.After(CloseGiveUp * warn):
			if err := w.abandon(warn); err != nil {
				if w.opts.ReleaseReaders != nil {
					w.opts.ReleaseReaders()
				}
				return err
			}
		}
	}
	if w.opts.ReleaseReaders != nil {
		w.opts.ReleaseReaders()
	}
	w.opts.Release()
	return nil
}

// abandon gives up on a writer that the disk holds, and returns an error saying what it is
// stuck on; the writer runs Release if it ever ends. It returns nil if the writer has ended
// meanwhile, and Close releases as usual.
func (w *Writer[M]) abandon(warn time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return nil
	}
	w.abandoned = true
	what := "the writer is stuck"
	if len(w.queue) > 0 {
		what += " writing " + w.opts.What(w.queue[0].Meta)
	}
	err := fmt.Errorf("%s %s: %s for %v after Close asked it to end; closed without it (the directory stays locked until the disk answers)",
		w.opts.Name, w.opts.Dir, what, (1+CloseGiveUp)*warn)
	w.opts.Log.Error(w.opts.Name+": given up on the writer", "err", err)
	return err
}
