package tier

// Reading entries: Get, which reads an entry into the caller's buffer, and Map, which maps one
// stored as it is from the page cache; both check what they read, and count hits and misses.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"runtime/debug"
	"time"
	"unsafe"

	"github.com/pierrec/lz4/v4"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// Get fills dst with the entry's bytes and says whether there was a sound entry of exactly
// len(dst) bytes under key, which it tags with tag. A damaged entry is dropped and logged, and is
// a miss; one that cannot be read is logged and kept, and is a miss.
func (t *Tier) Get(key diskstore.Key, tag int, dst []byte) bool {
	e, _, ok := t.lookup(key, tag)
	if !ok {
		return false
	}
	return t.recordRead(e, fileID{}, t.read(key, dst))
}

// Mapping is an entry's bytes where they lie in the page cache, mapped read-only (Map): served
// without being copied. They stay valid until Unmap, even if the entry is evicted meanwhile.
type Mapping struct {
	Bytes []byte
	mem   []byte // the whole file mapped
}

// Unmap lets the mapping go; its Bytes must not be used after. The zero Mapping's does nothing.
func (m Mapping) Unmap() {
	if m.mem != nil {
		unix.Munmap(m.mem)
	}
}

// Map is Get, except that an entry stored as it is (diskstore.None) is mapped rather than read
// into dst: m.Bytes are its len(dst) bytes, in the page cache, until m.Unmap. That saves a hit
// the copy into dst (docs/benchmarks.md, "Where a disk tier hit's time goes"). For an entry
// stored compressed m.Bytes is nil, and dst holds the bytes, as from Get.
//
// Its bytes are checked against the entry's CRC when Map first maps it, and then again only if
// its file changed (rewritten, cut short, replaced: another inode, size or change time; see
// fileID). What that does not catch is a disk that hands back other bytes, without an I/O error,
// after the page cache let the checked ones go; Get, and the compressed codecs, check at every
// read.
func (t *Tier) Map(key diskstore.Key, tag int, dst []byte) (m Mapping, ok bool) {
	e, checked, ok := t.lookup(key, tag)
	if !ok {
		return Mapping{}, false
	}
	m, id, err := t.mapEntry(key, dst, checked)
	if !t.recordRead(e, id, err) {
		m.Unmap()
		return Mapping{}, false
	}
	return m, true
}

// lookup finds the entry under key and tags it, counting a miss when there is none; it also
// returns the version of its file whose bytes were checked.
func (t *Tier) lookup(key diskstore.Key, tag int) (*entry, fileID, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[key]
	if e == nil {
		t.stats.Misses++
		return nil, fileID{}, false
	}
	e.tag = tag
	t.evict.Add(key, tag) // used now, under its tag
	return e, e.checked, true
}

// recordRead counts a read of entry e that returned err, and drops or keeps the entry as err says;
// it reports whether the read was a hit. checked, when not zero, is the version of its file
// whose bytes the read checked. A damaged entry's file is unlinked after mu is let go, and Put
// refuses its key until then, so that the unlink cannot take a new entry's file in its place.
func (t *Tier) recordRead(e *entry, checked fileID, err error) bool {
	key := e.key
	t.mu.Lock()
	if err == nil {
		t.stats.Hits++
		if checked != (fileID{}) && t.entries[key] == e {
			e.checked = checked
			t.stats.Checked++
		}
		t.mu.Unlock()
		return true
	}
	t.stats.Misses++
	drop := false
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t.forget(key) // evicted meanwhile
	case errors.Is(err, diskstore.ErrDamaged):
		t.stats.Corrupt++
		if drop = t.entries[key] == e; drop {
			t.remove(e)
			t.unlinking[key]++
		}
	default:
		t.stats.ReadErrors++
	}
	t.mu.Unlock()
	switch {
	case errors.Is(err, diskstore.ErrDamaged):
		t.log.Warn("disk tier: damaged entry dropped; the sample is decoded again", "file", t.path(key), "reason", err)
		if drop {
			t.unlink(t.path(key))
			t.mu.Lock()
			if t.unlinking[key]--; t.unlinking[key] == 0 {
				delete(t.unlinking, key)
			}
			t.mu.Unlock()
		}
	case !errors.Is(err, fs.ErrNotExist):
		t.log.Warn("disk tier: entry could not be read, and is kept; the sample is decoded", "file", t.path(key), "err", err)
	}
	return false
}

// mapEntry maps the file of the entry under key, a sample of len(dst) bytes, if it is stored as
// it is, and checks its header, and its bytes unless its file is the version checked; it returns
// the mapping and the version of the file it checked (zero when it checked none). An entry of
// another kind (compressed, of the format before codecs, or of another length: damaged) is read
// into dst instead, and the mapping is the zero one.
func (t *Tier) mapEntry(key diskstore.Key, dst []byte, checked fileID) (Mapping, fileID, error) {
	n := len(dst)
	s := t.getScratch()
	defer t.putScratch(s)
	var st unix.Stat_t
	fd, err := t.openEntry(key, s, &st)
	if err != nil {
		return Mapping{}, fileID{}, err
	}
	defer unix.Close(fd)
	if st.Size != int64(headerSize+n) {
		return Mapping{}, fileID{}, t.readFD(fd, &st, s, key, dst)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return Mapping{}, fileID{}, fmt.Errorf("mapping: %w", err)
	}
	m := Mapping{Bytes: mem[headerSize:], mem: mem}
	id := idOf(&st)
	asIs := true
	err = touchMapped(func() error {
		h, err := parseHeader(mem[:headerSize], st.Size, key, n)
		switch {
		case err != nil:
			return err
		case h.codec != diskstore.None || h.legacy: // as long as the sample, but compressed
			asIs = false
			return nil
		case id == checked:
			id = fileID{} // nothing checked now
			return nil
		case crc32.Update(crc32.ChecksumIEEE(mem[:60]), crc32.IEEETable, m.Bytes) != h.sum:
			return diskstore.Damaged("checksum mismatch")
		case time.Since(time.Unix(0, id.ctime)) < t.trustAge:
			id = fileID{} // checked, but the version might not be told from the next: check again
		}
		return nil
	})
	if errors.Is(err, errFault) {
		// The file was cut short under the mapping (damaged), or the disk failed to give a page
		// (an I/O error: the entry is kept, as read keeps it).
		var now unix.Stat_t
		if unix.Fstat(fd, &now) == nil && now.Size < st.Size {
			err = diskstore.Damaged("cut short while read (%v)", err)
		} else {
			err = fmt.Errorf("reading: %w (%w)", unix.EIO, err)
		}
	}
	if err != nil || !asIs {
		m.Unmap()
		if err == nil {
			err = t.readFD(fd, &st, s, key, dst)
		}
		return Mapping{}, fileID{}, err
	}
	return m, id, nil
}

// errFault is touchMapped's error for a fault on a mapped file (SIGBUS): the file was cut short
// under the mapping, or the disk failed to give a page.
var errFault = errors.New("fault reading a mapped file")

// touchMapped runs f, which reads a mapped file, and turns a fault (SIGBUS) into errFault rather
// than the end of the process.
func touchMapped(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errFault, r)
		}
	}()
	return f()
}

// scratch is what reading an entry needs besides its destination: reused, so that a read
// allocates nothing.
type scratch struct {
	name [2 + 1 + 2*len(diskstore.Key{}) + 1]byte // "ab/abcd...\x00": Key.Rel, under Tier.dir
	hdr  [headerSize]byte
	buf  []byte // the stored bytes of a compressed entry
}

func (t *Tier) getScratch() *scratch {
	select {
	case s := <-t.scratch:
		return s
	default:
		return new(scratch)
	}
}

func (t *Tier) putScratch(s *scratch) {
	select {
	case t.scratch <- s:
	default: // enough kept
	}
}

// read reads and checks the entry's file into dst, decompressing straight into it (an entry
// stored as it is is read straight into it), checking the stored bytes before decompressing
// them. What it finds wrong with the file's bytes is diskstore.ErrDamaged; failing to open or read
// the file is not. It allocates nothing.
func (t *Tier) read(key diskstore.Key, dst []byte) error {
	s := t.getScratch()
	defer t.putScratch(s)
	var st unix.Stat_t
	fd, err := t.openEntry(key, s, &st)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return t.readFD(fd, &st, s, key, dst)
}

// readFD is read of the entry's file open as fd, of status st.
func (t *Tier) readFD(fd int, st *unix.Stat_t, s *scratch, key diskstore.Key, dst []byte) error {
	n, err := diskstore.PreadFull(fd, s.hdr[:min(int64(len(s.hdr)), st.Size)], 0)
	if err != nil {
		return fmt.Errorf("reading: %w", err)
	}
	h, err := parseHeader(s.hdr[:n], st.Size, key, len(dst))
	if err != nil {
		return err
	}
	stored := dst // stored as it is: straight into dst
	if h.codec != diskstore.None {
		if cap(s.buf) < len(dst) { // once: a compressed entry is shorter than its sample
			s.buf = make([]byte, len(dst))
		}
		stored = s.buf[:h.stored]
	}
	if n, err := diskstore.PreadFull(fd, stored, int64(h.size)); err != nil {
		return fmt.Errorf("reading: %w", err)
	} else if n < len(stored) {
		return diskstore.Damaged("cut short while read")
	}
	if !h.legacy && crc32.Update(crc32.ChecksumIEEE(s.hdr[:60]), crc32.IEEETable, stored) != h.sum {
		return diskstore.Damaged("checksum mismatch")
	}
	switch h.codec {
	case diskstore.LZ4:
		if n, err := lz4.UncompressBlock(stored, dst); err != nil {
			return fmt.Errorf("%w: lz4: %w", diskstore.ErrDamaged, err)
		} else if n != len(dst) {
			return diskstore.Damaged("decompressed to %d bytes, want %d", n, len(dst))
		}
	case diskstore.Zstd:
		out, err := t.dec.DecodeAll(stored, dst[:0])
		if err != nil {
			return fmt.Errorf("%w: zstd: %w", diskstore.ErrDamaged, err)
		}
		if len(out) != len(dst) || len(out) > 0 && &out[0] != &dst[0] {
			return diskstore.Damaged("decompressed to %d bytes, want %d", len(out), len(dst))
		}
	}
	if h.legacy && crc32.Checksum(dst, castagnoli) != h.sum {
		return diskstore.Damaged("checksum mismatch")
	}
	return nil
}

// openEntry opens the file of the entry under key for reading, and fills st with its status. Its
// name, relative to t.dir, is made in s.name, so that opening allocates nothing (unix.Openat
// would, for the name).
func (t *Tier) openEntry(key diskstore.Key, s *scratch, st *unix.Stat_t) (int, error) {
	hex.Encode(s.name[3:len(s.name)-1], key[:])
	s.name[0], s.name[1], s.name[2] = s.name[3], s.name[4], '/'
	s.name[len(s.name)-1] = 0
	for {
		fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(t.dirFD), uintptr(unsafe.Pointer(&s.name[0])),
			unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
		switch errno {
		case 0:
			if err := unix.Fstat(int(fd), st); err != nil {
				unix.Close(int(fd))
				return -1, err
			}
			return int(fd), nil
		case unix.EINTR:
			continue
		}
		return -1, errno
	}
}

// fileID tells one version of a file from another: a file replaced, rewritten, cut short or
// touched has another (its inode, size or change time differ). Change times are taken from a
// clock that may tick only every few milliseconds, so a file changed within one tick of the
// last change would keep its change time: a version is only told apart for sure once its change
// time is older than trustAge.
type fileID struct {
	ino, size, ctime int64
}

// trustAge is how old a file's change time must be for Map to take its version as checked, well
// above the coarse clock's tick (1-10 ms, by the kernel's HZ). (Tier.trustAge: tests change it.)
const trustAge = time.Second

func idOf(st *unix.Stat_t) fileID {
	return fileID{int64(st.Ino), st.Size, st.Ctim.Nano()}
}
