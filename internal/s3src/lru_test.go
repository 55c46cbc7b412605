package s3src_test

import (
	"context"
	"testing"

	"github.com/vidfs/vidfs/internal/s3src"
)

// TestCacheLeastRecentlyUsed: past its bound the block cache drops the block used least
// recently, not the one fetched first: a block read again stays, and the one left alone goes.
func TestCacheLeastRecentlyUsed(t *testing.T) {
	_, p := bucketOf(t)
	const bs = 4 << 10
	b := open(t, p.Endpoint(), "s3://data/videos/", s3src.Options{CacheBytes: 4 * bs, BlockSize: bs})
	if _, err := b.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	path := b.Path("h264_gop16.mp4")
	// read reads block i alone: a fresh reader fetches no block ahead on its first read.
	read := func(i int64) s3src.Stats {
		t.Helper()
		src, err := b.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if src.Size() < 6*bs {
			t.Fatalf("%s: %d bytes, want at least 6 blocks", path, src.Size())
		}
		if _, err := src.ReadAt(make([]byte, bs), i*bs); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		return b.Stats()
	}
	for i := range int64(4) { // the cache full: blocks 0 to 3, fetched in that order
		read(i)
	}
	before := read(0) // block 0 now the most recently used
	if before.Hits != 1 || before.Misses != 4 || before.Evicted != 0 {
		t.Fatalf("after blocks 0-3 and 0 again: %+v, want 1 hit, 4 misses, none evicted", before)
	}
	if st := read(4); st.Evicted != 1 { // block 1 goes, the least recently used
		t.Fatalf("block 4 evicted %d blocks, want 1: %+v", st.Evicted, st)
	}
	if st := read(0); st.Hits != before.Hits+1 {
		t.Fatalf("block 0, read last before block 4, was evicted: %+v", st)
	}
	if st := read(1); st.Misses != before.Misses+2 {
		t.Fatalf("block 1, the least recently used, was not evicted: %+v", st)
	}
	if st := b.Stats(); st.CacheBytes != 4*bs {
		t.Fatalf("%d bytes held, want the bound, %d", st.CacheBytes, 4*bs)
	}
}
