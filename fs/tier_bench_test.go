package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/tier"
)

// realSamples decodes n samples of real footage as make bench's mounts do (16 frames at stride
// 2, 224x224, cropped): Megamind (720x528) and vtest (768x576) from Debian's opencv-doc,
// transcoded to H.264, starts spread over each video. Half come from each. They are kept in the
// user's cache directory beside the transcoded videos, and decoded again when missing.
func realSamples(tb testing.TB, n int) (samples [][]byte) {
	tb.Helper()
	const S = 16 * 224 * 224 * 3
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	saved := filepath.Join(dir, "vidfs", "testvideos", fmt.Sprintf("tier-samples-v%d-%s-%d.raw", decode.OutputVersion, decode.FFmpegVersion(), n))
	if b, err := os.ReadFile(saved); err == nil && len(b) == n/2*2*S {
		var out [][]byte
		for i := 0; i < len(b); i += S {
			out = append(out, b[i:i+S:i+S])
		}
		return out
	}
	defer func() {
		if !tb.Failed() {
			os.MkdirAll(filepath.Dir(saved), 0o755)
			renameio.WriteFile(saved, bytes.Join(samples, nil), 0o644)
		}
	}()
	out := decode.Output{Width: 224, Height: 224, Resize: decode.Crop}
	pool, err := decode.NewPool(decode.PoolOptions{Concurrency: 1})
	if err != nil {
		tb.Fatal(err)
	}
	defer pool.Close()
	for _, src := range []string{testvideo.Megamind, filepath.Join(filepath.Dir(testvideo.Megamind), "vtest.avi")} {
		info, err := decode.Probe(testvideo.Transcode(tb, src, "-g 48"))
		if err != nil {
			tb.Fatal(err)
		}
		k := n / 2
		for j := range k {
			c := decode.Clip{Start: j * (info.Frames - 32) / k, Frames: 16, Stride: 2}
			buf := make([]byte, 16*out.FrameBytes())
			if _, err := pool.DecodeClip(context.Background(), info, c, out, buf); err != nil {
				tb.Fatal(err)
			}
			samples = append(samples, buf)
		}
	}
	return samples
}

// cacheBuffer is a buffer like the memory cache's: mapped outside the Go heap.
func cacheBuffer(tb testing.TB, n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { syscall.Munmap(b) })
	return b
}

// processCPU is the CPU time this process has used, all its threads together.
func processCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// BenchmarkTierCodec: the disk tier with each codec, on 16 samples of real footage (2.4 MB each):
// writing an entry (compressing, checksumming, writing and syncing it: what the tier's writer
// spends for each sample decoded in the first epoch), and a hit (reading the entry from the page
// cache, checking it and decompressing it into a buffer like the memory cache's: what a later
// epoch spends instead of decoding), one at a time. Reported in CPU time of the whole process per
// sample, with the bytes on disk per sample; allocs/op is a hit's.
//
// none/map is the hit the mount makes of an entry stored as it is: mapped from the page cache
// (tier.Map), its checksum checked the first time and trusted after, for a file written over a
// second before (as the entries of an earlier epoch are), and its pages faulted in (a byte of
// each read).
func BenchmarkTierCodec(b *testing.B) {
	samples := realSamples(b, 16)
	for _, c := range append(slices.Clone(tier.Codecs), 0) { // 0: none, mapped
		mapped := c == 0
		name := c.String()
		if mapped {
			c, name = diskstore.None, "none/map"
		}
		b.Run(name, func(b *testing.B) {
			tr, err := tier.Open(tier.Options{Dir: b.TempDir(), MaxBytes: 1 << 30, Codec: c})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			keys := make([]diskstore.Key, len(samples))
			cpu := processCPU()
			for i, s := range samples {
				keys[i] = sha256.Sum256([]byte(fmt.Sprint(i)))
				tr.Put(keys[i], i, s)
				tr.Flush()
			}
			write := processCPU() - cpu
			st := tr.Stats()
			dst := cacheBuffer(b, len(samples[0]))
			tr.Get(keys[0], 0, dst) // the tier's reusable buffers, made once
			b.SetBytes(int64(len(dst)))
			b.ReportAllocs()
			get := func(k diskstore.Key, tag int) bool { return tr.Get(k, tag, dst) }
			var sink byte
			if mapped {
				time.Sleep(1100 * time.Millisecond) // the files' change times old enough to trust
				get = func(k diskstore.Key, tag int) bool {
					m, ok := tr.Map(k, tag, dst)
					if m.Bytes == nil {
						b.Fatal("an entry stored as it is was not mapped")
					}
					// A byte of each page: the page faults that map them, which the FUSE reply's
					// copy takes in a mount (the copy itself, every hit's, is not counted).
					for j := 0; j < len(m.Bytes); j += 4096 {
						sink += m.Bytes[j]
					}
					m.Unmap()
					return ok
				}
			}
			cpu = processCPU()
			for i := 0; b.Loop(); i++ {
				if !get(keys[i%len(keys)], i) {
					b.Fatal("miss")
				}
			}
			hit := processCPU() - cpu
			_ = sink
			b.ReportMetric(float64(st.StoredBytes)/float64(st.Written)/1e6, "disk-MB/sample")
			b.ReportMetric(float64(st.WrittenBytes)/float64(st.StoredBytes), "ratio")
			b.ReportMetric(float64(write.Microseconds())/1e3/float64(len(samples)), "write-cpu-ms/sample")
			b.ReportMetric(float64(hit.Microseconds())/1e3/float64(b.N), "hit-cpu-ms/sample")
		})
	}
}
