package diskstore

// The directory a store lives in: taking it for one process, finding the files a last mount
// left there, and reading and writing a file at an offset.

import (
	"fmt"
	"io/fs"
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
		return nil, fmt.Errorf("--cache-dir %s: %w", dir, err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("--cache-dir %s is in use by another vidfs mount (give each mount a directory of its own): %w", dir, err)
	}
	return lock, nil
}

// HoldsKeys tells whether dir holds a file named by a key, in any of its folders: whether a
// store kept anything there. It stops at the first one found.
func HoldsKeys(dir string) bool {
	found := false
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !d.IsDir() {
			if _, ok := ParseKey(d.Name()); ok {
				found = true
				return filepath.SkipAll
			}
		}
		return nil
	})
	return found
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
