package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
