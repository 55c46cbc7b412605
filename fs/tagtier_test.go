package fs

import (
	"runtime"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

// TestCloseJoinsTagTier: Close returns only once the goroutine that tags the disk tier's entries
// with this mount's samples has ended, even when it is closed long before that work is done (a
// million samples here).
func TestCloseJoinsTagTier(t *testing.T) {
	spec := layout.Spec{Frames: 4, Stride: 1, Height: 4, Width: 4}
	videos := []layout.Video{{Path: "a/long.mp4", Frames: 4 << 20}}
	lay, err := layout.New(spec, videos)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Source: "/fake", Layout: lay, Infos: load.InfoList{{Path: "a/long.mp4", Frames: 4 << 20}}, Decoder: &fakeDecoder{},
		Workers: 1, CacheBytes: 64 * spec.SampleBytes()}
	onDisk(t, t.TempDir(), t.TempDir(), diskstore.None)(&cfg)
	// The goroutine is cancelled at once but ends in its own time: a few rounds show one that
	// Close does not wait for.
	for range 20 {
		f, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		buf := make([]byte, 1<<20)
		if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, ".tagTier(") {
			t.Fatalf("the disk tier's tagging still runs after Close:\n%s", stacks)
		}
	}
}
