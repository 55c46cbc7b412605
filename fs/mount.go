package fs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// MountOptions are the FUSE mount's own settings.
type MountOptions struct {
	AllowOther bool // let other users read the mount (needs user_allow_other for non-root)
	Debug      bool // log every FUSE request
}

// Mount is a mounted FS.
type Mount struct {
	f      *FS
	dir    string
	server *fuse.Server
	dev    uint64 // the mount's device number, whose minor names its fusectl connection
}

// Mount mounts the filesystem on dir, an existing directory, and serves it in the background.
func (f *FS) Mount(dir string, mo MountOptions) (*Mount, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("mount point: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("mount point %s: not a directory", dir)
	}
	hour := time.Hour // the tree never changes while mounted
	maxWrite := max(1<<20, pageRound(f.lay.Spec.SampleBytes()))
	opts := &gofs.Options{
		EntryTimeout: &hour, AttrTimeout: &hour, NegativeTimeout: &hour,
		MountOptions: fuse.MountOptions{
			AllowOther: mo.AllowOther, Debug: mo.Debug, FsName: "vidfs:" + f.cfg.Source, Name: "vidfs",
			// Requests as large as a sample, so that a pread of a whole sample is one request
			// (one round trip to vidfs and back) rather than one per MiB: the kernel caps them at
			// /proc/sys/fs/fuse/max_pages_limit pages (256, 1 MiB, unless root raised it; Linux
			// 6.13 and later), and go-fuse at what the kernel allows, so by default they stay 1
			// MiB (docs/benchmarks.md measures a raised limit). Splice stays off: go-fuse splices
			// only data that is in a file, and the samples are in memory.
			MaxWrite: maxWrite, DisableSplice: true,
			// About maxServed(workers) requests served at once, however many the readers send:
			// see inflightBudget.
			MaxInflightRequestBytes: inflightBudget(maxWrite, maxServed(f.cache.Workers())),
			// One page: the kernel's read-around for memory-mapped files would otherwise read
			// into neighbouring samples (and make vidfs decode them) on every page fault.
			MaxReadAhead:      4096,
			ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP | fuse.CAP_ATOMIC_O_TRUNC,
		},
	}
	// Without DIRECT_IO_ALLOW_MMAP (kernels before 6.6) direct I/O files cannot be memory-mapped,
	// so serve them through the page cache there. Guess from the kernel's version before the
	// first open can come, and take what the kernel offered at INIT once mounted.
	f.directIO.Store(kernelAtLeast(6, 6))
	server, err := gofs.Mount(dir, &root{dirNode(f)}, opts)
	if err != nil {
		return nil, fmt.Errorf("mounting on %s: %w (is fuse3 installed, and the directory empty and not mounted?)", dir, err)
	}
	f.directIO.Store(server.KernelSettings().Flags64()&fuse.CAP_DIRECT_IO_ALLOW_MMAP != 0)
	if !f.directIO.Load() {
		f.log.Warn("kernel lacks FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6+): tensor files go through the page cache; reads served from it are not seen, so plan tracking is weaker")
	}
	m := &Mount{f: f, dir: dir, server: server}
	var st syscall.Stat_t
	if syscall.Stat(dir, &st) == nil {
		m.dev = st.Dev
	}
	return m, nil
}

// maxServed is how many FUSE requests a mount serves at once: all that 2x workers readers
// waiting for decodes (cache.MaxLoads) can hold, and at least 16. Past it go-fuse reads no
// request, a lookup, a plan written or a stats open included, until one is answered: with more
// readers than that waiting on decodes (8 ranks of 8 DataLoader workers on a node of 14
// workers), those wait for a decode to end, a decode's time, not a hang. A larger bound lets
// them by, but costs memory that grows with the reads (docs/design.md, "Memory under many
// readers"; cmd/vidfs's TestMountHitsMemoryBound holds the bound).
func maxServed(workers int) int { return max(16, 2*workers) }

// inflightBudget is go-fuse's MaxInflightRequestBytes for about n requests served at once
// with requests of at most maxWrite bytes.
//
// Without a bound go-fuse starts a goroutine to read the next request whenever none is waiting,
// and each request served holds a buffer as large as the read it answers (which vidfs never
// fills: it answers with the cache's buffers). Under many readers of cached samples the
// goroutines that have answered wait for a CPU behind new ones the reads start, each holding its
// buffer, and resident memory grows with the reads (docs/design.md, "Memory under many
// readers").
//
// go-fuse (v2.12, fuse/fusefd.go) counts against the budget, for each request it holds, its
// request struct (776 bytes), and while a goroutine waits for the kernel's next request, also
// its read buffer (the largest request, maxWrite as the kernel caps it, plus 4 KiB and 128
// bytes of header); it hands the read buffer back as soon as a read request is read. So one
// waiting goroutine's buffer plus n request structs lets n requests be served at once, and a
// goroutine read a request only when one of them is done.
func inflightBudget(maxWrite, n int) int {
	const request = 776
	pages := 256 // the kernel's limit on a request's pages, as go-fuse reads it
	if b, err := os.ReadFile("/proc/sys/fs/fuse/max_pages_limit"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 {
			pages = v
		}
	}
	readBuf := max(min(maxWrite, pages*os.Getpagesize())+128, 8192) + 4096
	return readBuf + n*request
}

// pageRound is n rounded up to whole pages.
func pageRound(n int64) int {
	p := int64(os.Getpagesize())
	return int((n + p - 1) / p * p)
}

// kernelAtLeast reports whether the running kernel is at least major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// Dir is the mount point.
func (m *Mount) Dir() string { return m.dir }

// Wait blocks until the filesystem is unmounted.
func (m *Mount) Wait() { m.server.Wait() }

// Unmount unmounts the filesystem and returns once the server has stopped. When files are
// still open (the plain unmount fails, busy) it detaches the mount point at once (lazy unmount)
// and aborts the FUSE connection, so that open files fail with ENOTCONN and the server stops.
// If the connection cannot be aborted, Unmount says so: the mount point is detached, but the
// server goes on answering the files still open, until they are closed or this process exits
// (which ends the connection). Either way, FS.Close then waits for the reads it has begun.
func (m *Mount) Unmount() error {
	busy := m.server.Unmount()
	if busy == nil {
		return nil
	}
	if out, err := exec.Command("fusermount3", "-u", "-z", m.dir).CombinedOutput(); err != nil {
		// EINVAL: m.dir is no mount point (any more): it was detached already, lazily (fusermount3
		// -uz, vidfs umount of a busy mount), and the files still open keep the connection.
		if err2 := syscall.Unmount(m.dir, syscall.MNT_DETACH); err2 != nil && !errors.Is(err2, syscall.EINVAL) {
			return fmt.Errorf("unmounting %s: %w; detaching it: fusermount3 -u -z: %s (%w); umount2: %w",
				m.dir, busy, bytes.TrimSpace(out), err, err2)
		}
	}
	m.f.log.Info("mount point detached; aborting the connection of the files still open", "at", m.dir, "unmount", strings.TrimSpace(busy.Error()))
	if err := abortConnection(m.dev); err != nil {
		return fmt.Errorf("%s is detached, but the connection of the files still open could not be aborted (they keep it until this process exits): %w", m.dir, err)
	}
	m.server.Wait()
	return nil
}

// abortConnection aborts the FUSE connection of the mount with device number dev through the
// fusectl filesystem (mounting it at its usual place if need be).
func abortConnection(dev uint64) error {
	if dev == 0 {
		return errors.New("device number unknown")
	}
	const ctl = "/sys/fs/fuse/connections"
	abort := fmt.Sprintf("%s/%d/abort", ctl, unix.Minor(dev))
	if _, err := os.Stat(abort); err != nil {
		if err := syscall.Mount("fusectl", ctl, "fusectl", 0, ""); err != nil {
			return fmt.Errorf("fusectl not mounted on %s and cannot be: %w", ctl, err)
		}
	}
	return os.WriteFile(abort, []byte("1"), 0)
}

// Umount unmounts dir, a vidfs mount whose process may have died: normally, or lazily if busy.
func Umount(dir string) error {
	out, err := exec.Command("fusermount3", "-u", dir).CombinedOutput()
	if err == nil {
		return nil
	}
	if out2, err2 := exec.Command("fusermount3", "-u", "-z", dir).CombinedOutput(); err2 == nil {
		return nil
	} else {
		return fmt.Errorf("fusermount3 -u %s: %s; -u -z: %s", dir, out, out2)
	}
}
