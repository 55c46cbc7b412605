package load

// The load path: what the cache's Fetch (its quick lane) and Load do for a sample, from the
// disk tier or the training copy, or by decoding it.

import (
	"context"
	"os"
	"runtime"

	"github.com/vidfs/vidfs/cache"
)

// current tells whether sample i's video file is still the version the layout describes: neither
// the disk tier nor the training copy serves or keeps what was decoded from a file that changed
// under the mount.
func (l *Loader) current(i int) bool {
	vi := l.lay.Sample(i).Video
	v := l.lay.Videos[vi]
	if l.cfg.Current != nil {
		return l.cfg.Current(v.Path)
	}
	st, err := os.Stat(l.videoPath(vi))
	return err == nil && st.Size() == v.Size && st.ModTime().UnixNano() == v.ModTime && v.Size > 0
}

// fetchSample makes sample i's bytes from the disk tier or the training copy if it holds them,
// for the cache's quick lane (cache.Options.Fetch), so that their hits never wait behind decodes:
// a tier entry stored as it is lends the cache its file, mapped from the page cache (tier.Map),
// which saves copying it; a compressed one is decompressed into buf; the copy's frames are read
// into buf. A sample of a video changed under the mount is served from neither.
func (l *Loader) fetchSample(ctx context.Context, i int, buf []byte) cache.Fetched {
	if ctx.Err() != nil || !l.current(i) {
		return cache.Fetched{}
	}
	if l.copy != nil {
		return cache.Fetched{OK: l.fetchCopy(i, buf, false)}
	}
	m, ok := l.tier.t.Map(l.sampleKey(i), i, buf)
	if !ok || m.Bytes == nil {
		return cache.Fetched{OK: ok}
	}
	return cache.Fetched{OK: true, Lent: &cache.Lent{Bytes: m.Bytes, Release: m.Unmap}}
}

// loadSample decodes sample i into buf, for the cache, after which the disk tier, if there is
// one, keeps it, or the training copy its frames and those the decode passed through that other
// samples use (written in the background). The cache asks them first (fetchSample). With a copy,
// the sample's video may be decoded whole instead (fillFor), and the sample served from that.
func (l *Loader) loadSample(ctx context.Context, i int, buf []byte) error {
	var keep *passKeeper
	if l.copy != nil && l.current(i) {
		if l.copy.seen != nil {
			defer l.copy.seen.set(l.lay.Sample(i).Video, true) // after wantedAgain asked
		}
		// Asked again: the cache asked the copy when the sample was queued, and its frames may
		// have come since (kept by the decodes of other samples, or a whole video's), while it
		// waited for a decoder, as samples planned an epoch ahead do.
		if l.fetchCopy(i, buf, true) {
			return nil
		}
		if l.fillFor(ctx, i) && l.fetchCopy(i, buf, true) {
			return nil
		}
		keep = l.copy.keeper(l, l.lay.Sample(i).Video)
		defer l.copy.keepers.Put(keep)
	}
	// At most loadDecodes at once: those past it wait, holding no decoder (nor a thread).
	select {
	case l.decoding <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	// The decode's CPU, which the budget of --copy-fill auto is reckoned in, is the thread's, and
	// a helper process's where it decodes there.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	began := threadCPU()
	res, err := l.decodeSample(ctx, i, buf, keep.decodeKeeper())
	<-l.decoding
	if err != nil {
		if !heldFailed(err) && ctx.Err() == nil {
			l.log.Warn("sample not decoded, for a reason that may pass; the next read tries again", "sample", i, "file", l.lay.Videos[l.lay.Sample(i).Video].Path, "err", err)
		}
		return err
	}
	var b *budget
	if l.copy != nil {
		b = l.copy.budget
	}
	if b != nil {
		b.decoded(threadCPU() - began + res.CPU)
		l.copy.served.set(i, false)
	}
	if l.tier != nil && l.current(i) {
		l.tier.t.Put(l.sampleKey(i), i, buf)
	}
	// Under auto, keeping the sample's frames is paid from the budget too (compressing them may
	// cost as much as the decode did), and leaves less for whole videos; so is measuring a
	// frame's size by them, while the copy still wants that (the first few samples).
	if keep != nil && l.current(i) {
		began = threadCPU()
		l.copy.measureLoaded(buf)
		l.keepFrames(ctx, i, res.Path, buf, keep)
		if b != nil {
			b.spend(threadCPU() - began)
		}
	}
	return nil
}

// fillAhead is how many chunks ahead of where a whole video's decode is a load waits for it to
// pass the load's frames rather than decode them itself.
const fillAhead = 2

// fillFor waits for a whole decode of sample i's video under way to pass the sample's frames, if
// it is about to, or starts one at the sample where the mode says so (--copy-fill videos; auto,
// when the plans read the video again and the budget allows) and waits for it to pass them; it
// says whether the frames are in the copy now.
func (l *Loader) fillFor(ctx context.Context, i int) bool {
	t := l.copy
	v := l.lay.Sample(i).Video
	var ub [64]int
	units := l.sampleUnits(i, ub[:0])
	first, last := units[0], units[len(units)-1]
	step := fillStride(l.lay.Spec)
	ahead := fillAhead * t.chunkFrames() * step
	if fl := t.fills.of(v); fl != nil {
		return fl.waitFor(ctx, first, last, ahead)
	}
	switch t.mode {
	case FillVideos:
	case FillAuto:
		if !t.budget.ready() || !l.wantedAgain(i) {
			return false
		}
	default:
		return false
	}
	if !t.admit(v) {
		return false // no room for it: decided before decoding it whole
	}
	fl := t.fills.tryStart(v, first/step*step, atReaders)
	if fl == nil {
		if t.mode == FillVideos {
			t.fills.wait(v) // every slot taken: decoded whole when one frees
		}
		return false
	}
	return fl.waitFor(ctx, first, last, ahead)
}

// wantedScan bounds the samples of a video wantedAgain asks the plans about.
const wantedScan = 256

// wantedAgain tells whether sample i's video is read again after it, so that decoding it whole
// pays: a sample of it was loaded before in this mount, or another of its samples is due in the
// plans (a plan holding the next epoch's clips, or every clip; of a video with many samples,
// wantedScan of them, spread over it, are asked).
func (l *Loader) wantedAgain(i int) bool {
	v := l.lay.Sample(i).Video
	if t := l.copy; t.seen != nil && t.seen.has(v) {
		return true
	}
	first, end := l.lay.VideoSamples(v)
	every := max(1, (end-first+wantedScan-1)/wantedScan)
	for j := first; j < end; j += every {
		if j != i && l.plans.Due(j) >= 0 {
			return true
		}
	}
	return false
}
