package fs

// The load path: what the cache's Fetch (its quick lane) and Load do for a sample, from the
// disk tier or the training copy, or by decoding it.

import (
	"context"
	"os"

	"github.com/vidfs/vidfs/cache"
)

// current tells whether sample i's video file is still the version the layout describes: neither
// the disk tier nor the training copy serves or keeps what was decoded from a file that changed
// under the mount.
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
