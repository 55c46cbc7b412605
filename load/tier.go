package load

// The disk tier on the load path: the keys of samples, and telling the tier which of its
// entries are which samples.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"strconv"
	"strings"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/tier"
)

// diskTier is the disk tier on a mount's load path: the key of each sample, and whether its
// video is still the version the layout describes.
type diskTier struct {
	t      *tier.Tier
	prefix [32]byte // digest of what every key of this mount shares: versions and output
}

// sampleKey is the key of sample i's bytes: a digest of the decoder's output version and
// FFmpeg's, the output (size, fit, decoding), the video's file (absolute path, size,
// modification time) and the clip (start, frames, stride, padding, and the target frame rate
// when there is one: keys without one are as they were before rates). Anything that changes the
// bytes changes the key, so a remount with other parameters, or over a rewritten video, never
// finds stale bytes.
func (l *Loader) sampleKey(i int) diskstore.Key {
	s := l.lay.Sample(i)
	v := l.lay.Videos[s.Video]
	c := SampleClip(l.lay, i)
	h := sha256.New()
	h.Write(l.tier.prefix[:])
	h.Write([]byte(l.videoPath(s.Video)))
	var b [8 * 6]byte
	for k, x := range []int64{v.Size, v.ModTime, int64(c.Start), int64(c.Frames), int64(c.Stride), boolInt(c.PadEnd)} {
		binary.LittleEndian.PutUint64(b[8*k:], uint64(x))
	}
	h.Write(b[:])
	if c.FPS.Valid() {
		binary.LittleEndian.PutUint64(b[:8], uint64(c.FPS.Num))
		binary.LittleEndian.PutUint64(b[8:16], uint64(c.FPS.Den))
		h.Write([]byte("fps\x00"))
		h.Write(b[:16])
	}
	var k diskstore.Key
	h.Sum(k[:0])
	return k
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// keyPrefix digests what every sample key of a mount with output o shares.
func keyPrefix(o decode.Output) [32]byte {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], decode.OutputVersion)
	h.Write([]byte("vidfs sample\x00"))
	h.Write(b[:])
	h.Write([]byte(decode.FFmpegVersion() + "\x00" + o.Key() + "\x00"))
	var p [32]byte
	h.Sum(p[:0])
	return p
}

// tagTier tells the tier which of its entries (found on disk from an earlier mount) are which
// samples of this one, so that eviction knows when each is due. It runs in the background, and
// stops with ctx.
func (l *Loader) tagTier(ctx context.Context) {
	for i := range l.lay.Len() {
		if i%1024 == 0 && ctx.Err() != nil {
			return
		}
		l.tier.t.Tag(l.sampleKey(i), i)
	}
}

// TierStats is the disk tier's part of .vidfs/stats; nil without one.
func (l *Loader) TierStats() *wire.TierStats {
	if l.tier == nil {
		return nil
	}
	s := l.tier.t.Stats()
	w := &wire.TierStats{Dir: s.Dir, Codec: s.Codec.String(), CapacityBytes: s.MaxBytes, UsedBytes: s.Bytes, Entries: s.Entries,
		Hits: s.Hits, Misses: s.Misses, Written: s.Written, Skipped: s.Skipped, Corrupt: s.Corrupt,
		ReadErrors: s.ReadErrors, Checked: s.Checked, Evicted: s.Evicted, Backlog: s.Backlog, BacklogBytes: s.BacklogBytes}
	if s.Written > 0 {
		w.BytesPerSample = float64(s.StoredBytes) / float64(s.Written)
		w.Ratio = float64(s.WrittenBytes) / float64(s.StoredBytes)
	}
	if n := s.Hits + s.Misses; n > 0 {
		w.HitRate = float64(s.Hits) / float64(n)
	}
	return w
}

// maxLent is how many samples the cache may hold as disk tier files mapped (cache.Options.MaxLent),
// in a cache of capacity samples: half the memory maps the kernel allows a process
// (vm.max_map_count, 65,530 unless raised), less one for each of the cache's own buffers, so
// that the Go runtime, FFmpeg and the buffers keep the other half. Tier hits beyond it are
// copied into the cache's buffers, as all are in a cache of over 32,000 samples (9 GiB of
// 8x112x112 samples, say) unless the limit is raised.
func maxLent(capacity int) int {
	limit := 65530
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			limit = n
		}
	}
	return max(0, min(limit/2-capacity, capacity))
}
