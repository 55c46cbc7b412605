package main

import (
	"testing"

	"github.com/vidfs/vidfs/load"
)

// TestHelpersFor: a mount's helpers decode all the clips it decodes at once (load.Decoders:
// bounded by the CPUs, so the counts below follow from them) and keep its idle decoders, each
// helper's windows (a clip's sample each) within maxHelperShared, and they do not grow faster
// than a helper for every 16 clips at once where the samples are small.
func TestHelpersFor(t *testing.T) {
	ceil := func(a, b int) int { return (a + b - 1) / b }
	for _, c := range []struct {
		workers int
		window  int64
		helpers func(n int) int // of the clips at once
	}{
		{2, 16 * 224 * 224 * 3, func(int) int { return 1 }},
		{16, 16 * 224 * 224 * 3, func(n int) int { return max(min(8, ceil(n, 16)), ceil(n, 13)) }},
		{16, 4 * 32 * 32 * 3, func(n int) int { return min(8, ceil(n, 16)) }},
		{64, 4 * 32 * 32 * 3, func(n int) int { return min(8, ceil(n, 16)) }},
		{16, 64 << 20, func(n int) int { return n }},
	} {
		helpers, clips, idle := helpersFor(c.workers, c.window)
		n := load.Decoders(c.workers)
		if want := c.helpers(n); helpers != want || helpers*clips < n || helpers*idle < load.IdleDecoders(c.workers) {
			t.Errorf("workers %d, windows of %d: %d helpers of %d clips, %d idle; want %d helpers for %d clips at once",
				c.workers, c.window, helpers, clips, idle, want, n)
		}
		if clips > 1 && int64(clips)*c.window > maxHelperShared {
			t.Errorf("workers %d: a helper's %d windows of %d bytes pass %d", c.workers, clips, c.window, maxHelperShared)
		}
	}
}
