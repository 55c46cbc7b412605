package main

import (
	"testing"

	"github.com/vidfs/vidfs/load"
)

// TestHelpersFor: a mount's helpers decode all the clips it decodes at once (load.Decoders:
// bounded by the cores) and keep its idle decoders, each helper's windows (a clip's sample each)
// within maxHelperShared, and they do not grow faster than a helper for every 16 clips at once
// where the samples are small.
func TestHelpersFor(t *testing.T) {
	for _, c := range []struct {
		workers, cores int
		window         int64
		helpers        int
	}{
		{2, 2, 16 * 224 * 224 * 3, 1},   // 6 clips at once
		{16, 2, 16 * 224 * 224 * 3, 1},  // 6: the cores bound them, not the workers
		{14, 16, 16 * 224 * 224 * 3, 4}, // 42, 13 windows a helper
		{16, 16, 4 * 32 * 32 * 3, 3},    // 48
		{64, 64, 4 * 32 * 32 * 3, 8},    // 192: at most 8
		{16, 16, 64 << 20, 48},          // a window each
	} {
		helpers, clips, idle := helpersFor(c.workers, c.cores, c.window)
		n := load.Decoders(c.workers, c.cores)
		if helpers != c.helpers || helpers*clips < n || helpers*idle < load.IdleDecoders(c.workers, c.cores) {
			t.Errorf("workers %d on %d cores, windows of %d: %d helpers of %d clips, %d idle; want %d helpers for %d clips at once",
				c.workers, c.cores, c.window, helpers, clips, idle, c.helpers, n)
		}
		if clips > 1 && int64(clips)*c.window > maxHelperShared {
			t.Errorf("workers %d: a helper's %d windows of %d bytes pass %d", c.workers, clips, c.window, maxHelperShared)
		}
	}
}
