package isolate

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A helper writes its frames into shared memory of its own, never into the cache: each helper
// has a window for each clip it may decode at once (a memfd the mount makes and maps, and hands
// the helper once), and the mount copies a clip's frames out of its window into the cache's
// buffer once the helper has answered, or lets them go if it died. A helper can therefore write
// only the frames of the clips it holds: no other sample in memory, none the disk tier or the
// training copy keep, and nothing of another helper's. Its windows hold at most its clips at
// once, each a sample and the frames kept for the training copy (a few MiB at 224x224). A
// request larger than maxWindow (a whole video's chunk for the training copy, a verify) gets
// memory of its own for that request alone, copied out and let go after.
//
// The other way, a mapping of the cache's buffer made for each request (its own memfd, handed to
// the helper), saves the copy but not its cost: the helper may keep the mapping after it answers,
// so the buffer could only be lent once, and each request would pay for a memfd, two mappings and
// the faults of fresh pages, more than a copy of pages already mapped (BenchmarkHandover).

// maxWindow bounds a window a helper keeps between requests.
const maxWindow = 16 << 20

// window is shared memory lent to one helper for one request at a time.
type window struct {
	fd  int
	mem []byte // the mount's mapping
}

// newWindow makes a window of size bytes.
func newWindow(size int64) (*window, error) {
	fd, mem, err := sharedMemory("vidfs-window", size)
	if err != nil {
		return nil, err
	}
	return &window{fd: fd, mem: mem}, nil
}

// close unmaps the window and lets its memory go (once the helper has too).
func (w *window) close() {
	unix.Munmap(w.mem)
	unix.Close(w.fd)
}

// sharedMemory makes a memfd of size bytes named name, and maps it to read and write; its pages
// are taken when first touched.
func sharedMemory(name string, size int64) (int, []byte, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return -1, nil, fmt.Errorf("shared memory: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("shared memory of %d bytes: %w", size, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("mapping shared memory of %d bytes: %w", size, err)
	}
	return fd, mem, nil
}

// mapGuarded maps size bytes of the shared memory fd to read and write, between two pages that
// cannot be touched: a helper's write that runs off either end of its window faults, and the
// mount sees a crash, where it would otherwise land in whatever memory lay beside it.
func mapGuarded(fd int, size int64) ([]byte, error) {
	if size <= 0 {
		return nil, nil
	}
	page := int64(os.Getpagesize())
	span := (size+page-1)/page*page + 2*page
	reserved, err := unix.MmapPtr(-1, 0, nil, uintptr(span), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("reserving %d bytes: %w", span, err)
	}
	at := unsafe.Add(reserved, page)
	if _, err := unix.MmapPtr(fd, 0, at, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
		unix.MunmapPtr(reserved, uintptr(span))
		return nil, fmt.Errorf("mapping shared memory of %d bytes: %w", size, err)
	}
	return unsafe.Slice((*byte)(at), size), nil
}

// unmapGuarded unmaps what mapGuarded mapped, guards and all.
func unmapGuarded(b []byte) {
	if len(b) == 0 {
		return
	}
	page := os.Getpagesize()
	start := unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), -page) // the reservation's, a page before b
	span := (len(b)+page-1)/page*page + 2*page
	unix.MunmapPtr(start, uintptr(span))
}
