package fs

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
)

// TestReadFailuresThatAreNotDecodes: under --on-error zeros, a read that gets no sample for a
// reason other than its failed decode (the reader's request cancelled, the cache closed while the
// reader waited or before it asked) fails, with EINTR or EIO: it is not served zeros, and
// .vidfs/failed lists no sample.
func TestReadFailuresThatAreNotDecodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, dec := fakeFSWith(t, 40, 1, nil, OnErrorZeros)
		dec.stall[[2]int{0, 8}] = true // a/one.mp4's sample 2 (starts 0, 4, 8, ...): decodes until the cache stops it
		S := int(f.lay.Spec.SampleBytes())
		off := int64(len(f.lay.NpyHeader()) + 2*S)
		read := func(ctx context.Context) syscall.Errno {
			res, errno := f.read(ctx, f.lay.NpyHeader(), 0, f.lay.Len(), make([]byte, S), off)
			if errno == 0 {
				defer res.Done()
				b, _ := res.Bytes(make([]byte, S))
				t.Errorf("served %d bytes (zeros: %v) of a sample that never failed to decode", len(b), bytes.Equal(b, make([]byte, S)))
			}
			return errno
		}
		done := make(chan syscall.Errno)

		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- read(ctx) }()
		synctest.Wait() // the reader waits for the decode
		cancel()
		if errno := <-done; errno != syscall.EINTR {
			t.Errorf("a read cancelled while its sample decodes: %v, want EINTR", errno)
		}

		go func() { done <- read(context.Background()) }()
		synctest.Wait()
		f.cache.Close() // cancels the decode the reader waits for
		if errno := <-done; errno != syscall.EIO {
			t.Errorf("a read waiting when the cache closed: %v, want EIO", errno)
		}
		if errno := read(context.Background()); errno != syscall.EIO {
			t.Errorf("a read after the cache closed: %v, want EIO", errno)
		}

		if rows := strings.Split(strings.TrimSpace(string(f.failedCSV())), "\n"); len(rows) != 1 {
			t.Errorf(".vidfs/failed lists samples that never failed to decode:\n%s", f.failedCSV())
		}
		if st := f.Stats(); st.Reads.Zeroed != 0 {
			t.Errorf("%d accesses served zeros, want none", st.Reads.Zeroed)
		}
	})
}
