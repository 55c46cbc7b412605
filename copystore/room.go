package copystore

// Room: the bound the copy keeps to (a fixed one, or what the filesystem has room for), which
// videos it takes (Admit), and what a frame is expected to take on disk.

import (
	"time"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// assumedRatio is what a frame of real footage is expected to take, stored with each codec,
// against its raw bytes, until the copy has measured it (Measure, or frames written): the
// medians docs/usage.md gives for 224x224 frames of real footage.
func assumedRatio(c diskstore.Codec) float64 {
	switch c {
	case diskstore.Huff:
		return 0.44
	case diskstore.Zstd:
		return 0.57
	case diskstore.LZ4:
		return 0.65
	}
	return 1
}

// measuredFrames is how many frames written make their stored size the measure of a frame's
// (FrameEstimate), rather than a sample measured or the assumed ratio.
const measuredFrames = 64

// freeEvery is how often the bound asks the filesystem how much room it has, at most (a statfs).
const freeEvery = time.Second

// FileOverhead is what a video's file takes besides its frames: its header and index, for a copy
// of units slots.
func FileOverhead(units int) int64 { return framesStart(units) }

// bound is the most the copy's files may take now: MaxBytes, or with none, what they take and
// what the filesystem has free, less KeepFree. Called with mu held.
func (c *Store) bound() int64 {
	if c.opts.MaxBytes > 0 {
		return c.opts.MaxBytes
	}
	if now := time.Now(); now.Sub(c.freeAt) >= freeEvery || c.freeAt.IsZero() {
		if free, err := c.free(); err == nil {
			// The copy's room: what its files take and what is free (what is queued for the
			// writer is in c.bytes before it is out of the free space: counted twice for a
			// moment, which errs towards room), fixed until the filesystem is asked again.
			c.room, c.freeAt = c.bytes+free, now
		}
	}
	return max(0, c.room-c.opts.KeepFree)
}

// FrameEstimate is what a frame is expected to take on disk, in bytes, and whether that was
// measured (frames written, or a sample measured) rather than assumed from the codec.
func (c *Store) FrameEstimate() (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frameEstimate()
}

// frameEstimate is FrameEstimate. Called with mu held.
func (c *Store) frameEstimate() (float64, bool) {
	fb := float64(c.opts.FrameBytes)
	switch {
	case c.opts.Codec == diskstore.None:
		return fb, true
	case c.stats.WrittenFrames >= measuredFrames:
		return float64(c.stats.StoredBytes) / float64(c.stats.WrittenFrames), true
	case c.measured > 0:
		return c.measured, true
	}
	return fb * assumedRatio(c.opts.Codec), false
}

// Measure stores nothing: it packs frames (whole frames, as served) with the copy's codec and
// takes what they took as the measure of a frame's size on disk, until frames written give a
// better one. A mount measures a few samples before it says how much of the copy fits.
func (c *Store) Measure(frames []byte) {
	fb := c.opts.FrameBytes
	n := len(frames) / fb
	if n == 0 {
		return
	}
	p, ok := c.packers.Get().(*packer)
	if !ok {
		p = &packer{huff: &huffCodec{width: c.opts.Width}}
	}
	defer c.packers.Put(p)
	stored := 0
	for k := range n {
		_, b := c.pack(p, frames[k*fb:(k+1)*fb])
		stored += len(b)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sampled += n
	c.sampledBytes += int64(stored)
	c.measured = float64(c.sampledBytes) / float64(c.sampled)
}

// Admit tells whether the frames of video v (under key; its samples use needed frames of a copy
// of extent slots) are to be kept, before they are decoded for it: a video the copy holds frames
// of is; another is when its whole copy, at what a frame is expected to take, fits within the
// bound beside what the copy holds (files a last mount left that no video named yet aside: they
// go first) and what the videos admitted before it still need. That room is then promised to it
// until its frames are written, it is whole, or Release gives it back. A copy that does not hold
// every video so keeps a stable set of them, those admitted first, rather than swap one video for
// another epoch after epoch: under fresh random clips, every video is worth the same, and a
// video decoded whole only to be dropped, or to drop another, is decoding with no return.
func (c *Store) Admit(v int, key diskstore.Key, needed, extent int) bool {
	if v < 0 || v >= len(c.videos) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cv := &c.videos[v]
	per, _ := c.frameEstimate()
	if c.known(v, key) || cv.owed > 0 {
		if cv.owed == 0 && !c.whole(v) && cv.frames != uncounted && needed > int(cv.frames) {
			c.owe(v, int64(per*float64(needed-int(cv.frames))))
		}
		return true
	}
	need := int64(per*float64(needed)) + framesStart(extent)
	if c.bytes-c.untaggedBytes+c.promised+need > c.bound() {
		c.stats.Refused++
		return false
	}
	c.owe(v, need)
	c.stats.Admitted++
	return true
}

// GiveBack evicts while the copy takes more than its bound: with no MaxBytes, when other files
// took room of the filesystem's that the copy held, so that it keeps KeepFree free for them.
// Files a last mount left that no video named go first, then videos no plan wants, least
// recently used first, then any, least recently used first. It says how many bytes it gave back.
func (c *Store) GiveBack() int64 {
	if c.opts.MaxBytes > 0 {
		return 0
	}
	c.mu.Lock()
	was := c.bytes
	var gone []diskstore.Key
	for c.bytes > c.bound() {
		k, ok := c.evictOne(-1, true)
		if !ok {
			break
		}
		gone = append(gone, k)
	}
	given := was - c.bytes
	c.stats.GivenBack += given
	c.mu.Unlock()
	c.unlinkAll(gone)
	if given > 0 {
		c.log.Info("training copy: room given back, other files taking the filesystem's free space", "bytes", given, "keep_free", c.opts.KeepFree)
	}
	return given
}

// Release gives back the room promised to video v that its frames have not taken: they will not
// all come (a whole decode of it ended early).
func (c *Store) Release(v int) {
	if v < 0 || v >= len(c.videos) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owe(v, 0)
}

// owe sets what is promised to video v to n bytes. Called with mu held.
func (c *Store) owe(v int, n int64) {
	cv := &c.videos[v]
	c.promised += n - cv.owed
	cv.owed = n
}

// paid counts n bytes written for video v against what it was promised. Called with mu held.
func (c *Store) paid(v int, n int64) {
	if cv := &c.videos[v]; cv.owed > 0 {
		c.owe(v, max(0, cv.owed-n))
	}
}
