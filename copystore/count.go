package copystore

// Counting: which video each file is (Adopt, Claim), how many of the frames a video needs its
// file holds, and which videos are whole.

import (
	"math/bits"

	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// Adopt tells the store that the file under key, if one was found at Open, is video v's: it is
// evicted by the plans from then on, not as a stray file. It is quick (no I/O); the caller
// adopts every video at once after Open, then Claims them in the background.
func (c *Store) Adopt(v int, key diskstore.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.known(v, key)
}

// Claim adopts the file under key as video v's, whose samples use the frames whose bits are
// set in need, and counts the frames of them it holds, reading its index (so it is called in
// the background, video after video), unless they are counted already.
func (c *Store) Claim(v int, key diskstore.Key, need []uint64) {
	needed := 0
	for _, w := range need {
		needed += bits.OnesCount64(w)
	}
	c.mu.Lock()
	for c.writing[int32(v)] { // its frames are counted as written: wait for the write to end
		c.counted.Wait()
	}
	ok := c.known(v, key)
	c.setNeeded(v, needed)
	counted := c.videos[v].frames != uncounted
	if !ok || counted || c.counting[int32(v)] {
		c.mu.Unlock()
		return
	}
	c.counting[int32(v)] = true // the writer adds no frame to it meanwhile
	c.mu.Unlock()
	n, err := c.count(key, need)
	if c.afterCount != nil {
		c.afterCount()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.counting, int32(v))
	c.counted.Broadcast()
	if cv := &c.videos[v]; cv.at >= 0 && cv.key == key && cv.frames == uncounted {
		cv.frames = 0
		if err == nil { // a damaged file is found and written again when read
			c.addFrames(v, n)
		}
	}
}

// Whole tells whether video v's copy holds every frame it needs (as counted: by Claim, or as
// written).
func (c *Store) Whole(v int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.videos[v].at >= 0 && c.whole(v)
}

// known tells whether video v (under key) has a file, adopting one found at Open. Called with
// mu held.
func (c *Store) known(v int, key diskstore.Key) bool {
	cv := &c.videos[v]
	if cv.at >= 0 {
		if cv.key == key {
			return true
		}
		return false // the caller's video is another version than the one stored
	}
	f, ok := c.untagged[key]
	if !ok {
		return false
	}
	delete(c.untagged, key)
	c.untaggedBytes -= f.size
	cv.key, cv.bytes, cv.frames = key, f.size, uncounted
	c.addPresent(v)
	return true
}

// whole tells whether video v's copy holds every frame it needs, as counted. Called with mu
// held.
func (c *Store) whole(v int) bool {
	cv := &c.videos[v]
	return cv.frames != uncounted && cv.needed > 0 && cv.frames >= cv.needed
}

// setNeeded records how many frames video v needs. Called with mu held.
func (c *Store) setNeeded(v, needed int) {
	if c.whole(v) {
		c.complete--
	}
	c.videos[v].needed = uint32(needed)
	if c.whole(v) {
		c.complete++
	}
}

// addFrames counts n more frames stored for video v (none while its file's are uncounted: Claim
// counts them all). Called with mu held.
func (c *Store) addFrames(v, n int) {
	cv := &c.videos[v]
	if cv.frames == uncounted {
		return
	}
	was := c.whole(v)
	cv.frames += uint32(n)
	c.frames += int64(n)
	if !was && c.whole(v) {
		c.complete++
		c.owe(v, 0) // whole: what was promised and not taken is free again
	}
}

// resetFrames forgets the frames counted for video v, whose file is written anew. Called with
// mu held.
func (c *Store) resetFrames(v int) {
	cv := &c.videos[v]
	if c.whole(v) {
		c.complete--
	}
	if cv.frames != uncounted {
		c.frames -= int64(cv.frames)
	}
	cv.frames = 0
}

func (c *Store) addPresent(v int) {
	c.videos[v].at = int32(len(c.present))
	c.present = append(c.present, int32(v))
}

// dropPresent forgets video v's file, its bytes and frames. Called with mu held.
func (c *Store) dropPresent(v int) {
	cv := &c.videos[v]
	if cv.at < 0 {
		return
	}
	last := c.present[len(c.present)-1]
	c.present[cv.at] = last
	c.videos[last].at = cv.at
	c.present = c.present[:len(c.present)-1]
	c.bytes -= cv.bytes
	if c.whole(v) {
		c.complete--
	}
	if cv.frames != uncounted {
		c.frames -= int64(cv.frames)
	}
	c.owe(v, 0)
	*cv = videoEntry{at: -1, needed: cv.needed}
	delete(c.damaged, int32(v))
}

// count reads the index of the copy under key and counts the frames it points at of those
// whose bits are set in need.
func (c *Store) count(key diskstore.Key, need []uint64) (int, error) {
	fd, size, err := c.open(key, unix.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var hb [headerSize]byte
	if _, err := diskstore.PreadFull(fd, hb[:], 0); err != nil {
		return 0, err
	}
	h, err := parseHeader(hb[:], key, c.opts.FrameBytes)
	if err != nil {
		return 0, err
	}
	bp := c.bufs.Get(h.units * slotSize)
	defer c.bufs.Put(bp)
	idx := *bp
	n, err := diskstore.PreadFull(fd, idx, slotAt(0))
	if err != nil {
		return 0, err
	}
	if size, err = fileSize(fd); err != nil { // after the index: see read
		return 0, err
	}
	frames := 0
	for u := 0; u+1 <= n/slotSize && u < len(need)*64; u++ {
		s := parseSlot(idx[u*slotSize:])
		if need[u/64]&(1<<(u%64)) != 0 && s.present() && s.check(u, size, h.units, c.opts.FrameBytes) == nil {
			frames++
		}
	}
	return frames, nil
}
