package tier

import (
	"bytes"
	"testing"
)

// BenchmarkMap: a hit as the mount takes it, for each codec: an entry stored as it is is mapped
// (and its mapping let go), a compressed one decompressed into a buffer like the memory cache's.
// allocs/op is what a hit allocates. Made-up samples of 2.4 MB; fs's BenchmarkTierHit measures
// real footage through a mount.
func BenchmarkMap(b *testing.B) {
	const S = 16 * 224 * 224 * 3
	for _, c := range Codecs {
		b.Run(c.String(), func(b *testing.B) {
			tr, err := Open(Options{Dir: b.TempDir(), MaxBytes: 1 << 30, Codec: c})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			raw := bytes.Repeat(sample(0), S/sampleBytes+1)[:S]
			tr.Put(key(0), 0, raw)
			tr.Flush()
			dst, k := make([]byte, S), key(0)
			if m, ok := tr.Map(k, 0, dst); ok { // the first map checks the entry's bytes
				m.Unmap()
			}
			b.SetBytes(S)
			b.ReportAllocs()
			for b.Loop() {
				m, ok := tr.Map(k, 0, dst)
				if !ok {
					b.Fatal("miss")
				}
				m.Unmap()
			}
		})
	}
}
