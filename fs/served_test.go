package fs

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestControlWhileReadsWait: with nearly as many reads waiting on decodes as the mount serves at
// once (maxServed), it still answers a stats open: the budget of requests in flight leaves room
// beside them for a goroutine to read the next request.
func TestControlWhileReadsWait(t *testing.T) {
	f, dec := fakeFS(t, 8, 1, nil)
	for i := range f.lay.Len() {
		s := f.lay.Sample(i)
		dec.stall[[2]int{s.Video, s.Start}] = true
	}
	dir := t.TempDir()
	m, err := f.Mount(dir, MountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	readers := maxServed(f.cache.Workers()) - 2
	var wg sync.WaitGroup
	raw, err := os.Open(filepath.Join(dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.cache.Close() // the stalled decodes end, and the reads waiting on them
		wg.Wait()
		raw.Close()
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	size := f.lay.Spec.SampleBytes()
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw.ReadAt(make([]byte, size), int64(r%f.lay.Len())*size) // waits on a stalled decode
		}()
	}
	time.Sleep(time.Second) // for the reads to reach the mount; not an assertion
	done := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(filepath.Join(dir, ".vidfs", "stats"))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("stats with %d reads waiting: %v", readers, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("stats not answered in 30 s with %d reads waiting on decodes (requests served at once: %d)", readers, maxServed(f.cache.Workers()))
	}
}
