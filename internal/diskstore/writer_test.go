package diskstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// testWriter is a writer of jobs named by an int, each written by write, which records what it
// wrote; released and readers count the calls of Release and ReleaseReaders.
type testWriter struct {
	*Writer[int]
	mu                sync.Mutex
	wrote             []int
	released, readers int
}

func newTestWriter(backlog int64, write func(m int)) *testWriter {
	tw := &testWriter{}
	tw.Writer = NewWriter(WriterOptions[int]{Name: "test store", Dir: "/nowhere", Jobs: "jobs", Backlog: backlog,
		Write: func(m int, data []byte) int64 {
			if write != nil {
				write(m)
			}
			tw.mu.Lock()
			tw.wrote = append(tw.wrote, m)
			tw.mu.Unlock()
			if len(data) == 0 {
				return 1 // skipped: nothing to write
			}
			return 0
		},
		What:           func(m int) string { return fmt.Sprint("job ", m) },
		Release:        func() { tw.mu.Lock(); tw.released++; tw.mu.Unlock() },
		ReleaseReaders: func() { tw.mu.Lock(); tw.readers++; tw.mu.Unlock() },
	})
	return tw
}

func (tw *testWriter) counts() (wrote []int, released, readers int) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return append([]int(nil), tw.wrote...), tw.released, tw.readers
}

// TestWriterBacklog: Put never waits; past the backlog it skips, counting the units it was told;
// the jobs queued are written in order, their bytes readable while queued; Close releases once.
func TestWriterBacklog(t *testing.T) {
	hold := make(chan struct{})
	tw := newTestWriter(30, func(int) { <-hold })
	for m := range 5 {
		ok := tw.Put(m, bytes.Repeat([]byte{byte(m)}, 10), 7)
		if ok != (m < 3) {
			t.Fatalf("job %d queued: %v; want the first 3 (the backlog's room)", m, ok)
		}
	}
	if !tw.Queued(func(jobs []Job[int]) bool {
		return len(jobs) == 3 && bytes.Equal(jobs[2].Data(), bytes.Repeat([]byte{2}, 10))
	}) {
		t.Error("the jobs queued, or their bytes, are not those put")
	}
	if s := tw.Stats(); s.Jobs != 3 || s.Bytes != 30 || s.Full != 14 || s.Skipped != 0 {
		t.Errorf("stats %+v: want 3 jobs, 30 bytes, 14 units refused for a full backlog", s)
	}
	// PutBuffer waits for room as long as it is told, and no longer.
	began := time.Now()
	bp := tw.bufs.Get(10)
	if tw.PutBuffer(context.Background(), 8, bp, 2, 30*time.Millisecond) {
		t.Fatal("queued past the backlog")
	}
	if d := time.Since(began); d < 30*time.Millisecond {
		t.Errorf("gave up after %v, told to wait 30ms", d)
	}
	done := make(chan bool)
	go func() { done <- tw.PutBuffer(context.Background(), 8, bp, 2, time.Minute) }()
	close(hold)
	if !<-done {
		t.Error("a PutBuffer waiting for room did not queue once the writer made some")
	}
	tw.Flush()
	tw.Put(9, nil, 1) // Write says it skipped 1
	tw.Flush()
	if s := tw.Stats(); s.Jobs != 0 || s.Bytes != 0 || s.Skipped != 1 || s.Full != 16 {
		t.Errorf("flushed: stats %+v: want nothing queued, 1 unit skipped, 16 refused", s)
	}
	if err := tw.Close(time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(time.Minute); err != nil {
		t.Fatal(err)
	}
	if tw.Put(10, []byte{1}, 1) {
		t.Error("a Put after Close was queued")
	}
	wrote, released, readers := tw.counts()
	if !slices.Equal(wrote, []int{0, 1, 2, 8, 9}) || released != 1 || readers != 1 {
		t.Errorf("wrote %v, released %d, readers released %d; want 0 1 2 8 9, once each", wrote, released, readers)
	}
}

// TestWriterWait: Wait returns once the jobs it matches are written, whatever else is queued,
// and with ctx's error when ctx ends first.
func TestWriterWait(t *testing.T) {
	holds := map[int]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
	tw := newTestWriter(1<<20, func(m int) {
		if h := holds[m]; h != nil {
			<-h
		}
	})
	defer tw.Close(time.Minute)
	for m := range 3 {
		tw.Put(m, []byte{1}, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := tw.Wait(ctx, func(m int) bool { return m == 2 }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for job 2, held: %v; want the context's deadline", err)
	}
	close(holds[1])
	waited := make(chan error)
	go func() { waited <- tw.Wait(context.Background(), func(m int) bool { return m == 1 }) }()
	select {
	case err := <-waited:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(30 * time.Second): // a guard: job 1 is written at once
		t.Fatal("Wait for job 1 has not returned though it was written (job 2 is held)")
	}
	close(holds[2])
	tw.Flush()
}

// TestWriterCloseStuck: a writer stuck on a job holds Close only for a bounded time: Close drops
// what is queued but that job, gives up, says what is stuck, and releases what readers use; the
// writer, once the disk answers, finishes its job and releases what it used itself.
func TestWriterCloseStuck(t *testing.T) {
	held, hold := make(chan struct{}), make(chan struct{})
	var once sync.Once
	tw := newTestWriter(1<<20, func(int) {
		once.Do(func() { close(held) })
		<-hold
	})
	for m := range 3 {
		tw.Put(m, []byte{1}, 1)
	}
	<-held
	err := tw.Close(5 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "writer is stuck writing job 0") || !strings.Contains(err.Error(), "test store /nowhere") {
		t.Errorf("Close with the writer stuck: %v; want an error naming the store and job 0", err)
	}
	if _, released, readers := tw.counts(); released != 0 || readers != 1 {
		t.Errorf("given up: released %d, readers released %d; want only the readers' released", released, readers)
	}
	close(hold)
	<-tw.Done()
	if wrote, released, readers := tw.counts(); !slices.Equal(wrote, []int{0}) || released != 1 || readers != 1 {
		t.Errorf("the writer ended: wrote %v, released %d, readers %d; want job 0 alone, then released once", wrote, released, readers)
	}
}
