package main

import (
	"testing"

	"github.com/vidfs/vidfs/load"
)

// TestHelpersFor: a mount's helpers decode all its clips at once and keep its idle decoders,
// each helper's windows (a clip's sample each) within maxHelperShared, and they do not grow with
// the workers faster than a helper for every 8 where the samples are small.
func TestHelpersFor(t *testing.T) {
	for _, c := range []struct {
		workers int
		window  int64
		helpers int
	}{{2, 16 * 224 * 224 * 3, 1}, {16, 16 * 224 * 224 * 3, 4}, {16, 4 * 32 * 32 * 3, 2}, {64, 4 * 32 * 32 * 3, 8}, {16, 64 << 20, 48}} {
		helpers, clips, idle := helpersFor(c.workers, c.window)
		n := load.Decoders(c.workers)
		if helpers != c.helpers || helpers*clips < n || helpers*idle < c.workers {
			t.Errorf("workers %d, windows of %d: %d helpers of %d clips, %d idle; want %d helpers for %d clips at once",
				c.workers, c.window, helpers, clips, idle, c.helpers, n)
		}
		if clips > 1 && int64(clips)*c.window > maxHelperShared {
			t.Errorf("workers %d: a helper's %d windows of %d bytes pass %d", c.workers, clips, c.window, maxHelperShared)
		}
	}
}
