package tier

// Writing entries: Put queues them, and the writer goroutine (diskstore.Writer) compresses them
// and puts them in place.

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"

	"github.com/pierrec/lz4/v4"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// job is an entry queued to be written: its bytes are the job's data.
type job struct {
	key diskstore.Key
	tag int
}

// Put queues src to be written under key, tagged tag, copying it, and says whether it was
// queued. It never waits: with the backlog full, it skips.
func (t *Tier) Put(key diskstore.Key, tag int, src []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.entries[key] != nil || t.unlinking[key] > 0 {
		return false
	}
	// Not queued twice: an entry is in the index before it leaves the queue.
	if t.w.Queued(func(jobs []diskstore.Job[job]) bool {
		return slices.ContainsFunc(jobs, func(j diskstore.Job[job]) bool { return j.Meta.key == key })
	}) {
		return false
	}
	return t.w.Put(job{key, tag}, src, 1)
}

// writeJob writes the entry of job j, for the writer (diskstore.WriterOptions.Write), and says
// whether it was skipped.
func (t *Tier) writeJob(j job, raw []byte) (skipped int64) {
	if t.beforeWrite != nil {
		t.beforeWrite()
	}
	if err := t.write(j.key, j.tag, raw); err != nil {
		t.log.Warn("disk tier: entry not written", "reason", err)
		return 1
	}
	return 0
}

// write compresses raw and puts it in place under key, making room for it first. Only the
// writer goroutine calls it.
func (t *Tier) write(key diskstore.Key, tag int, raw []byte) error {
	codec, stored := t.opts.Codec, raw
	switch codec {
	case diskstore.LZ4:
		t.zbuf = slices.Grow(t.zbuf[:0], lz4.CompressBlockBound(len(raw)))[:lz4.CompressBlockBound(len(raw))]
		if n, err := t.lz4.CompressBlock(raw, t.zbuf); err == nil && n > 0 {
			stored = t.zbuf[:n]
		}
	case diskstore.Zstd:
		t.zbuf = t.enc.EncodeAll(raw, t.zbuf[:0])
		stored = t.zbuf
	}
	if len(stored) >= len(raw) { // compressing did not shrink it: as it is
		codec, stored = diskstore.None, raw
	}
	var hdr [headerSize]byte
	copy(hdr[:], magic)
	copy(hdr[8:40], key[:])
	binary.LittleEndian.PutUint64(hdr[40:48], uint64(len(raw)))
	binary.LittleEndian.PutUint32(hdr[48:52], uint32(len(stored)))
	hdr[52] = byte(codec)
	binary.LittleEndian.PutUint32(hdr[60:64], crc32.Update(crc32.ChecksumIEEE(hdr[:60]), crc32.IEEETable, stored))
	size := int64(headerSize + len(stored))

	t.mu.Lock()
	evicted, ok := t.makeRoom(size, t.due(tag))
	t.mu.Unlock()
	t.unlinkEntries(evicted) // before anything else is written: none of them is written again first
	if !ok {
		return errors.New("no room: everything held is wanted sooner")
	}
	final := t.path(key)
	err := os.MkdirAll(filepath.Dir(final), 0o755)
	if err == nil {
		// Written under a temporary name in tmp/ (which Open empties), then renamed.
		err = writeFile(final, filepath.Join(t.dir, "tmp"), hdr[:], stored)
	}
	if err != nil {
		return t.unreserve(size, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bytes -= size // reserved by makeRoom; now counted with the entry
	if old := t.entries[key]; old != nil {
		t.remove(old)
	}
	e := &entry{key: key, tag: tag, size: size}
	t.evict.Add(key, tag)
	t.entries[key] = e
	t.bytes += size
	t.stats.Written++
	t.stats.WrittenBytes += int64(len(raw))
	t.stats.StoredBytes += size
	return nil
}

// writeFile writes the parts, one after the other, to a temporary file in tmp and renames it to
// path, without syncing: path is whole or absent, unless the power fails before the kernel has
// written it out (see the package's doc).
func writeFile(path, tmp string, parts ...[]byte) (err error) {
	f, err := os.CreateTemp(tmp, "entry-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := f.Write(p); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// unreserve gives back room reserved for an entry that was not written.
func (t *Tier) unreserve(size int64, err error) error {
	t.mu.Lock()
	t.bytes -= size
	t.mu.Unlock()
	return err
}
