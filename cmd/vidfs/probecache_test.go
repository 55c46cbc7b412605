package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/internal/catalog"
	"github.com/vidfs/vidfs/layout"
)

// TestProbeCacheNotWritten: a mount whose probe cache cannot be written (its directory's parent
// is a regular file, which stops the root user the tests run as, where file modes would not)
// serves all the same, and warns that the probe tables were not kept.
func TestProbeCacheNotWritten(t *testing.T) {
	src := linkSources(t, map[string]string{"a.mp4": "h264_gop16.mp4"})
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mp := startMount(t, src, "--probe-cache", filepath.Join(file, "probe"), "--size", "32x32", "--cache-mem", "16MiB")
	if log := mp.log(); !strings.Contains(log, "probe cache") || !strings.Contains(log, "not a directory") {
		t.Errorf("no warning that the probe cache was not written:\n%s", log)
	}
}

// TestTableUnreadable: a probe table that cannot be read back from the probe cache (its segment
// damaged, or removed on a shared filesystem by another node's merge) is probed again once, and
// the new table kept with the others, not probed again at each decode of the video.
func TestTableUnreadable(t *testing.T) {
	src := linkSources(t, map[string]string{"a.mp4": "h264_gop16.mp4"})
	o := &mountOptions{}
	o.probeWorkers, o.probeCache = 1, t.TempDir()
	spec := layout.Spec{Frames: 4, Stride: 1, Height: 32, Width: 32, PadShort: true}
	lay, tables, _, _, err := o.scan(t.Context(), io.Discard, slog.New(slog.DiscardHandler), spec, catalog.Dir(src), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tables.tables.Close()
	segs, err := filepath.Glob(filepath.Join(catalog.CachePath(o.probeCache, src), "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v: %v", segs, err)
	}
	if err := os.Truncate(segs[0], 0); err != nil { // read through the mount's open file
		t.Fatal(err)
	}
	first, err := tables.Info(0)
	if err != nil || first.Frames != lay.Videos[0].Frames || len(first.PTS) != first.Frames {
		t.Fatalf("table after its segment was damaged: %v", err)
	}
	// Its segment is empty: the first table was probed. A second probe would give another.
	if again, err := tables.Info(0); err != nil || again != first {
		t.Errorf("asked again: %p (%v), want the table probed the first time, %p", again, err, first)
	}
}
