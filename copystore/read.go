package copystore

// Reading frames: Get, from the frames queued to be written or from a video's file, each frame
// checked, with the hits, misses and damage counted.

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/pierrec/lz4/v4"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// errMissing is a read's error for a frame the copy does not hold (yet): a miss, not damage.
var errMissing = errors.New("frame not in the copy")

// Get fills dst with video v's frames units (ascending), FrameBytes each, one after another,
// from the copy of the video under key, and says whether it held them all, sound. A frame found
// damaged is a miss, logged, and written again by the next Put of it; a file that cannot be read
// (EMFILE, EIO) is a miss, logged, and kept.
func (c *Store) Get(v int, key diskstore.Key, units []int, dst []byte) bool {
	return c.get(v, key, units, dst, true)
}

// GetAgain is Get for a clip whose miss was counted already (asked again, its frames having
// perhaps come since): a miss is not counted again.
func (c *Store) GetAgain(v int, key diskstore.Key, units []int, dst []byte) bool {
	return c.get(v, key, units, dst, false)
}

func (c *Store) get(v int, key diskstore.Key, units []int, dst []byte, countMiss bool) bool {
	if v < 0 || v >= len(c.videos) || len(units) == 0 {
		return false
	}
	// The frames still queued to be written are taken from the queue, the rest from the file:
	// a sample's frames may lie in both while a whole decode of its video is written.
	var queuedBuf [64]bool
	queued := queuedBuf[:0]
	if len(units) > len(queuedBuf) {
		queued = make([]bool, 0, len(units))
	}
	queued = queued[:len(units)]
	if c.fromQueue(v, key, units, dst, queued) == len(units) {
		c.mu.Lock()
		c.stats.Hits++
		if !countMiss && c.stats.Misses > 0 {
			c.stats.Misses--
		}
		c.mu.Unlock()
		return true
	}
	c.mu.Lock()
	if !c.known(v, key) {
		if countMiss {
			c.stats.Misses++
		}
		c.mu.Unlock()
		return false
	}
	c.videos[v].used = c.now()
	c.mu.Unlock()
	err := c.read(key, units, dst, queued)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.stats.Hits++
		if !countMiss && c.stats.Misses > 0 {
			c.stats.Misses-- // its miss when first asked turned out a hit
		}
		return true
	case errors.Is(err, errMissing), errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, diskstore.ErrDamaged):
		c.stats.Corrupt++
		if !c.damaged[int32(v)] {
			c.damaged[int32(v)] = true
			c.log.Warn("training copy: damaged frames; they are decoded and written again", "file", c.path(key), "reason", err)
		}
	default:
		c.stats.ReadErrors++
		if c.warnNow(&c.readWarned) {
			c.log.Warn("training copy: could not be read, and is kept; the sample is decoded (logged once a minute at most; stats count them)", "file", c.path(key), "err", err)
		}
	}
	if countMiss {
		c.stats.Misses++
	}
	return false
}

// fromQueue fills dst with those of video v's frames units that are queued to be written,
// setting their places in got, and says how many: frames just kept are served before the
// writer has written them (a sample's decode keeps frames of the next sample a reader asks for;
// a whole decode, those of the samples waiting for it). It looks at a few hundred queued
// samples' frames at most (the backlog's bound), copies those it needs as they are stored while
// the queue is held, and unpacks them after. Called without mu.
func (c *Store) fromQueue(v int, key diskstore.Key, units []int, dst []byte, got []bool) int {
	fb := c.opts.FrameBytes
	var bp *[]byte
	n := 0
	c.w.Queued(func(queue []diskstore.Job[job]) bool {
		if len(queue) == 0 {
			return false
		}
		for k, u := range units {
			var r []byte
			for _, q := range queue {
				if j := q.Meta; j.video == v && j.key == key && j.first <= u && u <= j.last {
					if r = findRecord(q.Data(), u); r != nil {
						break
					}
				}
			}
			if r == nil {
				continue
			}
			if bp == nil {
				bp = c.bufs.Get(len(units) * (recordSize + fb))
				*bp = (*bp)[:0]
			}
			*bp = append(*bp, r...)
			got[k] = true
			n++
		}
		return true
	})
	if bp == nil {
		return 0
	}
	defer c.bufs.Put(bp)
	rest := *bp
	for k := range units {
		if !got[k] {
			continue
		}
		var r record
		r, rest = nextRecord(rest)
		if c.unpack(r.codec, r.stored, dst[k*fb:(k+1)*fb]) != nil {
			got[k] = false // read from the file instead
			n--
		}
	}
	return n
}

// findRecord returns the record of unit u in a job's data (its header and stored bytes), or nil.
func findRecord(data []byte, u int) []byte {
	for rest := data; len(rest) > 0; {
		r, next := nextRecord(rest)
		if r.unit == u {
			return rest[:len(rest)-len(next)]
		}
		if r.unit > u {
			return nil
		}
		rest = next
	}
	return nil
}

// read reads frames units of the copy under key into dst, checking each, but those have says
// are there already.
func (c *Store) read(key diskstore.Key, units []int, dst []byte, have []bool) error {
	fb := c.opts.FrameBytes
	if len(units) == 0 || len(dst) < len(units)*fb {
		return fmt.Errorf("training copy: %d frames asked into %d bytes", len(units), len(dst))
	}
	fd, size, err := c.open(key, unix.O_RDONLY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	first, last := units[0], units[len(units)-1]
	span := (last - first + 1) * slotSize
	bp := c.bufs.Get(headerSize + span)
	defer c.bufs.Put(bp)
	b := *bp
	if n, err := diskstore.PreadFull(fd, b[:headerSize], 0); err != nil {
		return err
	} else if n < headerSize {
		return errMissing // made, and nothing written yet (or cut short: written anew either way)
	}
	h, err := parseHeader(b[:headerSize], key, fb)
	if err != nil {
		return err
	}
	if last >= h.units {
		return errMissing
	}
	idx := b[headerSize : headerSize+span]
	if n, err := diskstore.PreadFull(fd, idx, slotAt(first)); err != nil {
		return err
	} else if n < span {
		return errMissing // the index's end was never written (a sparse file's is)
	}
	// The file's size as the slots read know it: the writer appends a frame before its slot,
	// so a slot read now points within the size taken after it (not at open, before the
	// writer added frames a slot read meanwhile points at).
	if size, err = fileSize(fd); err != nil {
		return err
	}
	slot := func(j int) frameSlot { return parseSlot(idx[(units[j]-first)*slotSize:]) }
	for j := 0; j < len(units); {
		if have[j] {
			j++
			continue
		}
		s := slot(j)
		if !s.present() {
			return errMissing
		}
		if err := s.check(units[j], size, h.units, fb); err != nil {
			return err
		}
		if s.codec != diskstore.None {
			if err := c.readPacked(fd, units[j], s, idx[(units[j]-first)*slotSize:], dst[j*fb:(j+1)*fb]); err != nil {
				return err
			}
			j++
			continue
		}
		// Frames stored as they are and one after another on disk are read in one go.
		k := j + 1
		for ; k < len(units); k++ {
			n := slot(k)
			if have[k] || !n.present() || n.codec != diskstore.None || n.off != s.off+int64((k-j)*fb) || n.check(units[k], size, h.units, fb) != nil {
				break
			}
		}
		out := dst[j*fb : k*fb]
		if n, err := diskstore.PreadFull(fd, out, s.off); err != nil {
			return err
		} else if n < len(out) {
			return diskstore.Damaged("frame %d: cut short while read", units[j])
		}
		for ; j < k; j++ {
			raw := idx[(units[j]-first)*slotSize:]
			if slotSum(raw, units[j], dst[j*fb:(j+1)*fb]) != parseSlot(raw).sum {
				return diskstore.Damaged("frame %d: checksum mismatch", units[j])
			}
		}
	}
	return nil
}

// readPacked reads the compressed frame u (slot s, raw its 16 bytes) into out.
func (c *Store) readPacked(fd, u int, s frameSlot, raw, out []byte) error {
	bp := c.bufs.Get(s.stored)
	defer c.bufs.Put(bp)
	stored := *bp
	if n, err := diskstore.PreadFull(fd, stored, s.off); err != nil {
		return err
	} else if n < len(stored) {
		return diskstore.Damaged("frame %d: cut short while read", u)
	}
	if slotSum(raw, u, stored) != s.sum {
		return diskstore.Damaged("frame %d: checksum mismatch", u)
	}
	if err := c.unpack(s.codec, stored, out); err != nil {
		return fmt.Errorf("frame %d: %w", u, err)
	}
	return nil
}

// unpack decompresses a frame stored with codec into out, exactly its size.
func (c *Store) unpack(codec diskstore.Codec, stored, out []byte) error {
	switch codec {
	case diskstore.None:
		if len(stored) != len(out) {
			return diskstore.Damaged("%d bytes stored, want %d", len(stored), len(out))
		}
		copy(out, stored)
	case diskstore.LZ4:
		n, err := lz4.UncompressBlock(stored, out)
		if err != nil {
			return fmt.Errorf("%w: lz4: %w", diskstore.ErrDamaged, err)
		}
		if n != len(out) {
			return diskstore.Damaged("decompressed to %d bytes, want %d", n, len(out))
		}
	case diskstore.Zstd:
		got, err := c.dec.DecodeAll(stored, out[:0:len(out)])
		if err != nil {
			return fmt.Errorf("%w: zstd: %w", diskstore.ErrDamaged, err)
		}
		if len(got) != len(out) || &got[0] != &out[0] {
			return diskstore.Damaged("decompressed to %d bytes, want %d", len(got), len(out))
		}
	case diskstore.Huff:
		h, ok := c.huffs.Get().(*huffCodec)
		if !ok {
			h = &huffCodec{width: c.opts.Width}
		}
		defer c.huffs.Put(h)
		return h.unpack(out, stored)
	default:
		return diskstore.Damaged("unknown codec %d", codec)
	}
	return nil
}

// fileSize is the size of the open file fd.
func fileSize(fd int) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Size, nil
}

// open opens the copy under key, relative to the store's directory, and says its size.
func (c *Store) open(key diskstore.Key, flags int) (int, int64, error) {
	for {
		fd, err := unix.Openat(c.dirFD, key.Rel(), flags|unix.O_CLOEXEC, 0o644)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, 0, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, 0, err
		}
		return fd, st.Size, nil
	}
}
