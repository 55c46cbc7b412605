package cache

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

// TestCloseWaitsForHandles: Close never unmaps a buffer under a reader. While a Handle is held,
// Close waits, the held bytes stay the sample's, and Get and Peek already fail; once the Handle
// is released, Close returns.
func TestCloseWaitsForHandles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, newLoader(), 4, 1, nil, nil)
		h, _, err := c.Get(context.Background(), 5)
		if err != nil {
			t.Fatal(err)
		}
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		synctest.Wait() // Close has returned, or waits for something
		select {
		case <-closed:
			t.Fatal("Close returned while a Handle was held: its buffer is unmapped under the reader")
		default:
		}
		for i, b := range h.Bytes() {
			if b != 5 {
				t.Fatalf("byte %d of a held sample is %d during Close, want 5", i, b)
			}
		}
		if _, _, err := c.Get(context.Background(), 6); !errors.Is(err, ErrClosed) {
			t.Errorf("Get while Close waits: %v, want ErrClosed", err)
		}
		if c.Peek(5) != nil {
			t.Error("Peek while Close waits pinned a sample")
		}
		h.Release()
		<-closed
	})
}

// TestCloseWhileFetching: a fetch that Close interrupts (Fetch gives up when the cache's context
// ends) settles its sample as closed: Close returns, the reader waiting for it fails, and the
// sample is not passed to Load.
func TestCloseWhileFetching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ld := newLoader()
		fetching := make(chan struct{})
		fetch := func(ctx context.Context, s int, buf []byte) Fetched {
			close(fetching)
			<-ctx.Done()
			return Fetched{}
		}
		c, err := New(Options{SampleBytes: sampleBytes, Capacity: 4, Workers: 1, Load: ld.load, Fetch: fetch})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error)
		go func() { _, _, err := c.Get(context.Background(), 3); errc <- err }()
		<-fetching
		c.Close()
		if err := <-errc; err == nil {
			t.Error("Get of a sample being fetched at Close succeeded")
		}
		if n := ld.count(3); n != 0 {
			t.Errorf("a sample whose fetch Close interrupted was loaded %d times", n)
		}
	})
}
