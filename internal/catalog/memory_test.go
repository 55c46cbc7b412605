package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/layout"
)

// maxBytesPerVideo bounds what a mount keeps in memory per video once its source is scanned and
// laid out, beyond its caches (issue 18: at most 1 KiB).
const maxBytesPerVideo = 1024

// linksPerCopy is how many hard links fabricate makes to one copy of its video (ext4 allows
// 65,000 to a file).
const linksPerCopy = 50000

// fabricate makes a source of n hard links to copies of one test video, in 400 class folders, and a probe
// cache that holds their tables (written by the real writer, without probing each): as a source
// of n videos looks at its remount.
func fabricate(tb testing.TB, n int) (src, cacheDir string) {
	tb.Helper()
	src, cacheDir = tb.TempDir(), tb.TempDir()
	video := testvideo.Path("h264_gop16.mp4")
	info, err := decode.Probe(video)
	if err != nil {
		tb.Fatal(err)
	}
	root, _ := filepath.Abs(src)
	w, err := newSegWriter(storeDir(cacheDir, root), root)
	if err != nil {
		tb.Fatal(err)
	}
	for c := range 400 {
		if err := os.Mkdir(filepath.Join(src, fmt.Sprintf("class%03d", c)), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	var id FileID
	copies := tb.TempDir()
	for i := range n {
		if i%linksPerCopy == 0 {
			b, err := os.ReadFile(testvideo.Path("h264_gop16.mp4"))
			if err != nil {
				tb.Fatal(err)
			}
			video = filepath.Join(copies, fmt.Sprint(i))
			if err := os.WriteFile(video, b, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		rel := fmt.Sprintf("class%03d/video%07d.mp4", i%400, i)
		p := filepath.Join(src, rel)
		if err := os.Link(video, p); err != nil {
			tb.Fatal(err)
		}
		if i%linksPerCopy == 0 {
			st, err := os.Stat(p)
			if err != nil {
				tb.Fatal(err)
			}
			id = FileID{Size: st.Size(), ModTime: st.ModTime().UnixNano()}
		}
		if _, _, err := w.add(rel, id, info, nil); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := w.finish(); err != nil {
		tb.Fatal(err)
	}
	return src, cacheDir
}

// mounted is what a mount keeps of its videos: the layout, where each table lies, and the tables.
type mounted struct {
	lay    *layout.Layout
	refs   []Ref
	tables *Tables
}

// remount scans src from its cache and lays it out as vidfs mount does, keeping only what the
// mount keeps.
func remount(tb testing.TB, src, cacheDir string) (mounted, Progress) {
	tb.Helper()
	var last Progress
	tables, videos, err := Scan(context.Background(), Options{Root: src, CacheDir: cacheDir, Progress: func(p Progress) { last = p }})
	if err != nil {
		tb.Fatal(err)
	}
	var lv []layout.Video
	var refs []Ref
	for _, v := range videos {
		lv = append(lv, layout.Video{Path: v.Rel, Frames: v.Brief.Frames, Size: v.File.Size, ModTime: v.File.ModTime})
		refs = append(refs, v.Table)
	}
	lay, err := layout.New(layout.Spec{Frames: 16, Stride: 2, Height: 224, Width: 224, PadShort: true}, lv)
	if err != nil {
		tb.Fatal(err)
	}
	return mounted{lay, refs, tables}, last
}

// heapInuse is the heap's bytes in use after a collection.
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestMemoryPerVideo: a mount of 20,000 videos keeps at most maxBytesPerVideo per video in the
// heap once scanned from its probe cache and laid out, and a table read for decoding is whole.
func TestMemoryPerVideo(t *testing.T) {
	const n = 20000
	src, cacheDir := fabricate(t, n)
	before := heapInuse()
	m, prog := remount(t, src, cacheDir)
	after := heapInuse()
	per := (float64(after) - float64(before)) / n
	t.Logf("%d videos, %d samples: %.0f bytes per video in the heap", n, m.lay.Len(), per)
	if prog.Cached != n {
		t.Fatalf("scan: %+v, want every video from the cache", prog)
	}
	if per > maxBytesPerVideo {
		t.Errorf("%.0f bytes per video in the heap, want at most %d", per, maxBytesPerVideo)
	}
	info, err := m.tables.Info(m.refs[n-1], "x")
	if err != nil || len(info.PTS) != info.Frames || len(info.Keyframes) == 0 {
		t.Errorf("table of the last video: %v", err)
	}
	runtime.KeepAlive(m)
	m.tables.Close()
}

// BenchmarkRemount scans n videos from their probe cache and lays them out, and reports the
// heap each video keeps (bytes/video) and the time per remount.
func BenchmarkRemount(b *testing.B) {
	for _, n := range []int{20000, 240000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			src, cacheDir := fabricate(b, n)
			b.ResetTimer()
			var per float64
			var took time.Duration
			for range b.N {
				before := heapInuse()
				start := time.Now()
				m, _ := remount(b, src, cacheDir)
				took += time.Since(start)
				per = (float64(heapInuse()) - float64(before)) / float64(n)
				runtime.KeepAlive(m)
				m.tables.Close()
			}
			b.ReportMetric(per, "bytes/video")
			b.ReportMetric(took.Seconds()/float64(b.N), "s/remount")
		})
	}
}

// BenchmarkTableRead reads probe tables from the cache as a mount does on decoding a video whose
// table is not in memory: a pread and a decode of one record.
func BenchmarkTableRead(b *testing.B) {
	src, cacheDir := fabricate(b, 1000)
	m, _ := remount(b, src, cacheDir)
	defer m.tables.Close()
	m.tables.maxBytes = 0 // every read a miss
	b.ResetTimer()
	for i := range b.N {
		if _, err := m.tables.Info(m.refs[i%len(m.refs)], "x"); err != nil {
			b.Fatal(err)
		}
	}
}
