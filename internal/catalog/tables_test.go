package catalog

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// TestTablesLRU: the tables kept in memory stay within their bound in bytes, a table read again
// is the one kept (no read of the segment), and past the bound the least recently used goes,
// not the first kept; a bound below one table keeps the last one read.
func TestTablesLRU(t *testing.T) {
	src := t.TempDir()
	for _, name := range []string{"a.mp4", "b.mp4", "c.mp4"} {
		copyFile(t, testvideo.Path("h264_gop16.mp4"), filepath.Join(src, name))
	}
	tables, vs, err := Scan(context.Background(), Options{Root: src, Workers: 2, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer tables.Close()
	if len(vs) != 3 {
		t.Fatalf("%d videos scanned, want 3", len(vs))
	}
	info := func(i int) *decode.Info {
		t.Helper()
		in, err := tables.Info(vs[i].Table, vs[i].Brief.Path)
		if err != nil {
			t.Fatal(err)
		}
		if tables.bytes > tables.maxBytes && tables.lru.Len() > 1 {
			t.Fatalf("%d bytes of tables kept, over the bound of %d", tables.bytes, tables.maxBytes)
		}
		return in
	}
	a := info(0)
	tables.maxBytes = 2 * tableBytes(a) // room for two: the three are alike
	b := info(1)
	if info(0) != a { // a is now the most recently used
		t.Fatal("a table kept in memory was read again")
	}
	info(2) // evicts b, the least recently used
	if tables.lru.Len() != 2 {
		t.Fatalf("%d tables kept, want 2", tables.lru.Len())
	}
	if info(0) != a {
		t.Fatal("the table used more recently than the one evicted was evicted")
	}
	if again := info(1); again == b || again.Frames != b.Frames {
		t.Fatalf("the least recently used table was kept (same: %v), or read back wrong (%d frames, want %d)", again == b, again.Frames, b.Frames)
	}
	tables.maxBytes = 1
	c := info(2)
	if tables.lru.Len() != 1 || info(2) != c {
		t.Fatalf("with a bound below one table: %d kept, want the last one read", tables.lru.Len())
	}
}
