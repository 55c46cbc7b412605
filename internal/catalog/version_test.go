package catalog

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// TestOldTablesProbedAgain: a probe cache whose tables an earlier decode.TableVersion made (which
// count an edit list's frames differently, and have no keyframe checksums) is not believed: its
// videos are probed again, and the tables then kept are taken by the next scan.
func TestOldTablesProbedAgain(t *testing.T) {
	src, cacheDir := t.TempDir(), t.TempDir()
	for _, n := range []string{"h264_editstart.mp4", "h264_gop16.mp4"} {
		if err := os.Link(testvideo.Path(n), filepath.Join(src, n)); err != nil {
			t.Fatal(err)
		}
	}
	scan := func() Progress {
		t.Helper()
		var last Progress
		tables, _, err := Scan(context.Background(), Options{Root: src, CacheDir: cacheDir, Progress: func(p Progress) { last = p }})
		if err != nil {
			t.Fatal(err)
		}
		tables.Close()
		return last
	}
	if p := scan(); p.Done != 2 || p.Cached != 0 {
		t.Fatalf("first scan: %+v, want 2 videos probed", p)
	}
	if p := scan(); p.Cached != 2 {
		t.Fatalf("second scan: %+v, want both from the cache", p)
	}
	names, _ := filepath.Glob(filepath.Join(CachePath(cacheDir, src), "*"+segSuffix))
	if len(names) == 0 {
		t.Fatal("no segment written")
	}
	for _, n := range names { // as an earlier version wrote them
		f, err := os.OpenFile(n, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		var v [4]byte
		binary.LittleEndian.PutUint32(v[:], decode.TableVersion-1)
		if _, err := f.WriteAt(v[:], int64(len(segMagic))); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if _, err := readSegment(n, src); err == nil {
			t.Errorf("%s: a segment of tables version %d read as this version's", n, decode.TableVersion-1)
		}
	}
	if p := scan(); p.Done != 2 || p.Cached != 0 {
		t.Errorf("scan over tables of version %d: %+v, want both probed again", decode.TableVersion-1, p)
	}
	if p := scan(); p.Cached != 2 {
		t.Errorf("scan after: %+v, want both from the tables kept by the scan before", p)
	}
}
