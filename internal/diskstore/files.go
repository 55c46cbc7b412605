package diskstore

// The directory a store lives in: taking it for one process, finding the files a last mount
// left there, and reading and writing a file at an offset.

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// SamplesDir and FramesDir are where, under the directory a mount keeps on disk
// (--cache-dir), the sample tier keeps its entries and the training copy its frames.
const (
	SamplesDir = "v1"
	FramesDir  = "frames"
)

// LockDir takes dir for this process alone, so that two mounts never evict each other's files
// unawares: it opens dir/lock (making it if need be) and locks it (flock, exclusive, without
// waiting), failing if another process holds it. The lock lasts until the file returned is
// closed. Both stores take the same lock file: a mount uses one or the other.
func LockDir(dir string) (*os.File, error) {
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("disk tier: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("disk tier %s is in use by another vidfs mount (give each mount a directory of its own): %w", dir, err)
	}
	return lock, nil
}

// DropOther removes what another kind of store left in a directory that this one now takes:
// a directory keeps samples or frames, and --cache-disk bounds the one it keeps (a mount that
// kept frames and now keeps samples, or the other way round, starts anew).
func DropOther(path, what string, log *slog.Logger) {
	if _, err := os.Stat(path); err != nil {
		return
	}
	log.Info("disk tier: removing "+what+" left by an earlier mount: this directory now keeps the other", "dir", path)
	if err := os.RemoveAll(path); err != nil {
		log.Warn("disk tier: could not remove "+what+"; its bytes are not counted against --cache-disk", "dir", path, "err", err)
	}
}

// WalkKeys calls found for each file under dir named by a key (but those under skip), with its
// size and modification time.
func WalkKeys(dir, skip string, found func(k Key, size int64, mod time.Time)) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == skip {
				return filepath.SkipDir
			}
			return nil
		}
		k, ok := ParseKey(d.Name())
		if !ok {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		found(k, info.Size(), info.ModTime())
		return nil
	})
}

// PreadFull reads from fd at off until b is full or the file ends, and says how much it read.
func PreadFull(fd int, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		k, err := unix.Pread(fd, b[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			break
		}
		n += k
	}
	return n, nil
}

// PwriteFull writes all of b to fd at off.
func PwriteFull(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pwrite(fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}
