package main

import (
	"log/slog"
	"runtime"
	"strings"
	"testing"
)

// TestFetchAheadCloseWaits: close returns only once the fetch-ahead's goroutine has ended, even
// when close comes in the middle of a pass (here, while it asks what is due).
func TestFetchAheadCloseWaits(t *testing.T) {
	for range 20 {
		var a *fetchAhead
		asked := make(chan struct{}, 1)
		upcoming := func(dst []int, n int) []int {
			asked <- struct{}{}
			<-a.ctx.Done() // a pass that lasts until close
			return dst
		}
		kick := newAheadKick()
		a = newFetchAhead(nil, nil, nil, upcoming, nil, kick, 1<<20, slog.New(slog.DiscardHandler))
		a.start()
		kick.moved()
		<-asked
		a.close()
		buf := make([]byte, 1<<20)
		if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, ".(*fetchAhead).run(") {
			t.Fatalf("the fetch-ahead still runs after close:\n%s", stacks)
		}
	}
}
