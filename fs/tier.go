package fs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/decode"
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
func (f *FS) sampleKey(i int) tier.Key {
	s := f.lay.Sample(i)
	v := f.lay.Videos[s.Video]
	c := SampleClip(f.lay, i)
	h := sha256.New()
	h.Write(f.tier.prefix[:])
	h.Write([]byte(f.videoPath(s.Video)))
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
	var k tier.Key
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

// current tells whether sample i's video file is still the version the layout describes: the
// tier neither serves nor keeps samples of a file that changed under the mount.
func (f *FS) current(i int) bool {
	vi := f.lay.Sample(i).Video
	v := f.lay.Videos[vi]
	if f.cfg.Current != nil {
		return f.cfg.Current(v.Path)
	}
	st, err := os.Stat(f.videoPath(vi))
	return err == nil && st.Size() == v.Size && st.ModTime().UnixNano() == v.ModTime && v.Size > 0
}

// fetchSample makes sample i's bytes from the disk tier or the training copy if it holds them,
// for the cache's quick lane (cache.Options.Fetch), so that their hits never wait behind decodes:
// a tier entry stored as it is lends the cache its file, mapped from the page cache (tier.Map),
// which saves copying it; a compressed one is decompressed into buf; the copy's frames are read
// into buf. A sample of a video changed under the mount is served from neither.
func (f *FS) fetchSample(ctx context.Context, i int, buf []byte) cache.Fetched {
	if ctx.Err() != nil || !f.current(i) {
		return cache.Fetched{}
	}
	if f.copy != nil {
		return cache.Fetched{OK: f.fetchCopy(i, buf, false)}
	}
	m, ok := f.tier.t.Map(f.sampleKey(i), i, buf)
	if !ok || m.Bytes == nil {
		return cache.Fetched{OK: ok}
	}
	return cache.Fetched{OK: true, Lent: &cache.Lent{Bytes: m.Bytes, Release: m.Unmap}}
}

// loadSample decodes sample i into buf, for the cache, after which the disk tier, if there is
// one, keeps it, or the training copy its frames and those the decode passed through that other
// samples use (written in the background). The cache asks them first (fetchSample).
func (f *FS) loadSample(ctx context.Context, i int, buf []byte) error {
	var keep *passKeeper
	if f.copy != nil {
		// Asked again: the cache asked the copy when the sample was queued, and its frames may
		// have come since (kept by the decodes of other samples, or a whole video's), while it
		// waited for a decoder, as samples planned an epoch ahead do.
		if f.current(i) && f.fetchCopy(i, buf, true) {
			return nil
		}
		if f.copy.mode == FillVideos && f.current(i) {
			f.fillNow(ctx, f.lay.Sample(i).Video)
			if f.fetchCopy(i, buf, true) {
				return nil
			}
		}
		keep = f.copy.keeper(f, f.lay.Sample(i).Video)
		defer f.copy.keepers.Put(keep)
	}
	if err := f.decodeSample(ctx, i, buf, keep.decodeKeeper()); err != nil {
		if !heldFailed(err) && ctx.Err() == nil {
			f.log.Warn("sample not decoded, for a reason that may pass; the next read tries again", "sample", i, "file", f.sampleFile(i), "err", err)
		}
		return err
	}
	if f.tier != nil && f.current(i) {
		f.tier.t.Put(f.sampleKey(i), i, buf)
	}
	if f.copy != nil && f.current(i) {
		f.keepFrames(i, buf, keep)
	}
	return nil
}

// tierCodec is the codec the disk tier writes with: the one asked for, or when none was, none
// if every sample of the layout fits within the tier's bound uncompressed (the least CPU, in
// every epoch), else zstd (the most samples in the room there is: a sample the tier cannot
// hold costs a decode, ten times a hit's decompression).
func tierCodec(asked tier.Codec, samples int, sampleBytes, bound int64) (tier.Codec, string) {
	if asked != 0 {
		return asked, "asked for (--cache-disk-codec)"
	}
	need := int64(samples) * (sampleBytes + tier.HeaderSize)
	if need <= bound {
		return tier.None, fmt.Sprintf("every sample fits uncompressed (%d MiB of %d MiB)", need>>20, bound>>20)
	}
	return tier.Zstd, fmt.Sprintf("the samples do not fit uncompressed (%d MiB, the bound %d MiB): the smallest", need>>20, bound>>20)
}

// startTagging runs tagTier in the background; the function it returns stops it and returns once
// it has ended (Close, before the tier closes).
func (f *FS) startTagging() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.tagTier(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// tagTier tells the tier which of its entries (found on disk from an earlier mount) are which
// samples of this one, so that eviction knows when each is due. It runs in the background, and
// stops with ctx.
func (f *FS) tagTier(ctx context.Context) {
	for i := range f.lay.Len() {
		if i%1024 == 0 && ctx.Err() != nil {
			return
		}
		f.tier.t.Tag(f.sampleKey(i), i)
	}
}

// tierStats is the disk tier's part of .vidfs/stats; nil without one.
func (f *FS) tierStats() *wire.TierStats {
	if f.tier == nil {
		return nil
	}
	s := f.tier.t.Stats()
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
