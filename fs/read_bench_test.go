package fs

import (
	"context"
	"log/slog"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

// BenchmarkCachedRead: a read of a whole sample the cache holds (a hit), through f.read as go-fuse
// calls it, by as many readers at once as GOMAXPROCS (-cpu): what vidfs does for each read
// beside the kernel's copy, its counters and latency histogram included.
func BenchmarkCachedRead(b *testing.B) {
	spec := layout.Spec{Frames: 4, Stride: 1, Height: 4, Width: 4}
	lay, err := layout.New(spec, fakeVideos)
	if err != nil {
		b.Fatal(err)
	}
	dec := &fakeDecoder{clips: map[[2]int]int{}, failClip: map[[2]int]error{}, stall: map[[2]int]bool{}, video: map[string]int{}}
	infos := make([]*decode.Info, len(lay.Videos))
	for i, v := range lay.Videos {
		infos[i] = &decode.Info{Path: v.Path, Frames: v.Frames}
		dec.video[v.Path] = i
	}
	n, S := lay.Len(), spec.SampleBytes()
	f, err := New(Config{Source: "/fake", Layout: lay, Infos: load.InfoList(infos), Decoder: dec, Workers: 1,
		CacheBytes: int64(n+8) * S, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	hdr := lay.NpyHeader()
	read := func(i int, dest []byte) {
		res, errno := f.read(context.Background(), hdr, 0, n, dest, int64(len(hdr))+int64(i)*S)
		if errno != 0 || res.Size() != int(S) {
			b.Fatalf("sample %d: %v", i, errno)
		}
		res.Done()
	}
	for i := range n {
		read(i, make([]byte, S))
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		dest := make([]byte, S)
		for i := 0; pb.Next(); i++ {
			read(i%n, dest)
		}
	})
	b.StopTimer()
	if st := f.Stats(); st.Cache.Misses != int64(n) {
		b.Fatalf("%d misses: want only the %d of the warm-up", st.Cache.Misses, n)
	}
}
