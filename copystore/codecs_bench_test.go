package copystore

import (
	"bytes"
	"context"
	"flag"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// copyFrames names a file of raw rgb24 frames, 224x224 each, one after another, for
// BenchmarkCopyCodecs (bench/framecodecs.py makes one from real footage and passes it).
var copyFrames = flag.String("copy.frames", "", "raw rgb24 224x224 frames for BenchmarkCopyCodecs")

const (
	copyW, copyH   = 224, 224
	copyFrameBytes = copyW * copyH * 3
	copyClip       = 16 // frames a Put hands the store: a sample's
)

// BenchmarkCopyCodecs: what each way of storing a frame of the training copy costs on the frames
// of -copy.frames: bytes stored per frame, and the time (wall and CPU of the process) to write
// every frame and to read each back on its own. none, lz4, zstd and huff go through the store: write
// is Put (a sample of 16 frames at a time) and Flush, into a fresh copy; read is a Get of each
// frame from the page cache. zstd+left is measured without the store, as the store does not
// have it: each row's bytes less the byte 3 before (the same channel of the pixel to the left),
// then zstd as the store's; zstd-direct is plain zstd the same way, to set it against.
// bytes/frame counts the stored frames, not the file's header and index.
func BenchmarkCopyCodecs(b *testing.B) {
	if *copyFrames == "" {
		b.Skip("no frames: pass -copy.frames FILE (raw rgb24 224x224; bench/framecodecs.py makes one)")
	}
	raw, err := os.ReadFile(*copyFrames)
	if err != nil {
		b.Fatal(err)
	}
	if len(raw) == 0 || len(raw)%copyFrameBytes != 0 {
		b.Fatalf("%s: %d bytes, not a whole number of %d-byte frames", *copyFrames, len(raw), copyFrameBytes)
	}
	for _, c := range diskstore.Codecs {
		b.Run(c.String(), func(b *testing.B) { benchStore(b, c, raw) })
	}
	b.Run("zstd-direct", func(b *testing.B) { benchDirect(b, raw, false) })
	b.Run("zstd+left", func(b *testing.B) { benchDirect(b, raw, true) })
}

// cpuTime is the CPU (user and system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clock is a wall and a CPU time, taken together.
type clock struct{ wall, cpu time.Duration }

func (k *clock) add(b *testing.B, f func()) {
	w, c := time.Now(), cpuTime(b)
	f()
	k.wall += time.Since(w)
	k.cpu += cpuTime(b) - c
}

func (k clock) report(b *testing.B, what string, frames int) {
	b.ReportMetric(float64(k.wall.Nanoseconds())/float64(frames), what+"-ns/frame")
	b.ReportMetric(float64(k.cpu.Nanoseconds())/float64(frames), what+"-cpu-ns/frame")
}

func benchStore(b *testing.B, c diskstore.Codec, raw []byte) {
	n := len(raw) / copyFrameBytes
	var write, read clock
	var stored int64
	loops := 0
	dst := make([]byte, len(raw))
	for b.Loop() {
		b.StopTimer()
		cp, err := Open(Options{Dir: b.TempDir(), MaxBytes: 1 << 40, Codec: c, FrameBytes: copyFrameBytes, Width: copyW,
			Videos: 1, Backlog: int64(len(raw)) + 1})
		if err != nil {
			b.Fatal(err)
		}
		clear(dst)
		key := diskstore.Key{1}
		b.StartTimer()
		write.add(b, func() {
			for u := 0; u < n; u += copyClip {
				units := make([]int, 0, copyClip)
				for k := u; k < min(u+copyClip, n); k++ {
					units = append(units, k)
				}
				if !cp.Put(context.Background(), 0, key, n, n, units, raw[u*copyFrameBytes:], 0) {
					b.Fatalf("frames %d-%d: not queued", units[0], units[len(units)-1])
				}
			}
			cp.Flush()
		})
		read.add(b, func() {
			for u := range n {
				if !cp.Get(0, key, []int{u}, dst[u*copyFrameBytes:(u+1)*copyFrameBytes:(u+1)*copyFrameBytes]) {
					b.Fatalf("frame %d: a miss", u)
				}
			}
		})
		b.StopTimer()
		st := cp.Stats()
		if err := cp.Close(); err != nil {
			b.Fatal(err)
		}
		if st.WrittenFrames != int64(n) || st.Skipped != 0 || st.Corrupt != 0 {
			b.Fatalf("%d frames written, %d skipped, %d corrupt; want %d written", st.WrittenFrames, st.Skipped, st.Corrupt, n)
		}
		if !bytes.Equal(dst, raw) {
			b.Fatal("the frames read back differ from those written")
		}
		stored += st.StoredBytes
		loops++
		b.StartTimer()
	}
	b.ReportMetric(float64(stored)/float64(loops*n), "bytes/frame")
	write.report(b, "write", loops*n)
	read.report(b, "read", loops*n)
}

// leftPredict replaces each byte of frame (rows of copyW pixels) by its difference from the same
// channel of the pixel to its left, in place; a row's first pixel stays as it is.
func leftPredict(frame []byte) {
	const row = copyW * 3
	for r := 0; r < len(frame); r += row {
		p := frame[r : r+row]
		for i := len(p) - 1; i >= 3; i-- {
			p[i] -= p[i-3]
		}
	}
}

// leftUnpredict undoes leftPredict in place.
func leftUnpredict(frame []byte) {
	const row = copyW * 3
	for r := 0; r < len(frame); r += row {
		p := frame[r : r+row]
		for i := 3; i < len(p); i++ {
			p[i] += p[i-3]
		}
	}
}

// benchDirect compresses each frame with zstd as the store does (after left prediction when
// left is set), each on its own, and decompresses each, with no file in between.
func benchDirect(b *testing.B, raw []byte, left bool) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true), zstd.IgnoreChecksum(true))
	if err != nil {
		b.Fatal(err)
	}
	defer dec.Close()
	n := len(raw) / copyFrameBytes
	var write, read clock
	var stored int64
	loops := 0
	tmp := make([]byte, copyFrameBytes)
	dst := make([]byte, len(raw))
	packed := make([][]byte, n)
	for b.Loop() {
		clear(dst)
		write.add(b, func() {
			for u := range n {
				frame := raw[u*copyFrameBytes : (u+1)*copyFrameBytes]
				if left {
					copy(tmp, frame)
					leftPredict(tmp)
					frame = tmp
				}
				packed[u] = enc.EncodeAll(frame, packed[u][:0])
			}
		})
		read.add(b, func() {
			for u := range n {
				out := dst[u*copyFrameBytes : (u+1)*copyFrameBytes : (u+1)*copyFrameBytes]
				got, err := dec.DecodeAll(packed[u], out[:0])
				if err != nil || len(got) != copyFrameBytes {
					b.Fatalf("frame %d: decompressed to %d bytes (%v)", u, len(got), err)
				}
				if left {
					leftUnpredict(out)
				}
			}
		})
		b.StopTimer()
		if !bytes.Equal(dst, raw) {
			b.Fatal("the frames decompressed differ from those compressed")
		}
		for _, p := range packed {
			stored += int64(len(p))
		}
		loops++
		b.StartTimer()
	}
	b.ReportMetric(float64(stored)/float64(loops*n), "bytes/frame")
	write.report(b, "write", loops*n)
	read.report(b, "read", loops*n)
}
