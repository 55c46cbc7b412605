package isolate

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A helper writes its frames into shared memory of its own, never into the cache: each helper
// has a window for each clip it may decode at once (a memfd the mount makes and maps, and hands
// the helper once), and the mount writes a clip's frames out of its window into the cache's
// buffer (Arena, with pwrite) once the helper has answered, or lets them go if it died. A helper can therefore write
// only the frames of the clips it holds: no other sample in memory, none the disk tier or the
// training copy keep, and nothing of another helper's. Its windows hold at most its clips at
// once, each a sample and the frames kept for the training copy (a few MiB at 224x224). A
// request larger than maxWindow (a whole video's chunk for the training copy, a verify) gets
// memory of its own for that request alone, copied out and let go after.
//
// The other way, a mapping of the cache's buffer made for each request (its own memfd, handed to
// the helper), saves the copy but not its cost: the helper may keep the mapping after it answers,
// so the buffer could only be lent once, and each request would pay for a memfd, two mappings and
// the faults of fresh pages, more than a copy of pages already mapped (BenchmarkHandover: 0.15
// ms for window and copy, 23 ms for a mapping made for the request, a 2.4 MB sample).

// maxWindow bounds a window a helper keeps between requests.
const maxWindow = 16 << 20

// A window keeps its pages between requests: the most clips a helper decoded at once, a sample
// each. Given back after each request instead, a window would cost the next the faults of fresh
// shared pages, which BenchmarkHandover (window-released) measured at 22 ms a 2.4 MB sample on a
// virtual machine (AMD EPYC under PVM), more than decoding the clip.

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

// Arena is memory of the mount's own for the cache's sample buffers (cache.Memory): one memfd of
// slots of a fixed size, mapped in the mount alone, never handed to a helper. A clip decoded for a
// buffer in it is written there from the helper's window with pwrite, by the kernel through the
// memfd's own pages, where a copy into fresh pages of a private mapping would fault them in one
// by one (8.9-12 ms a 2.4 MB clip on a virtual machine, against about 0.6: docs/benchmarks.md,
// issue 48). Pages are taken when first written, and given back when a buffer is freed.
type Arena struct {
	fd   int
	mem  []byte
	slot int64 // bytes a buffer spans: its size, rounded up to a page
	size int64 // bytes a buffer holds

	// mu guards next and free.
	mu   sync.Mutex
	next int   // slots handed out so far
	free []int // slots given back
}

// newArena makes memory for n buffers of size bytes.
func newArena(size int64, n int) (*Arena, error) {
	page := int64(os.Getpagesize())
	slot := (size + page - 1) / page * page
	if size <= 0 || n <= 0 || slot > (1<<62)/int64(n) {
		return nil, fmt.Errorf("memory for %d buffers of %d bytes: bad size", n, size)
	}
	fd, mem, err := sharedMemory("vidfs-cache", slot*int64(n))
	if err != nil {
		return nil, err
	}
	return &Arena{fd: fd, mem: mem, slot: slot, size: size}, nil
}

// Alloc returns a buffer of the arena's size, or an error when every slot is taken
// (cache.Memory).
func (a *Arena) Alloc() ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var i int
	switch {
	case len(a.free) > 0:
		i = a.free[len(a.free)-1]
		a.free = a.free[:len(a.free)-1]
	case int64(a.next)*a.slot < int64(len(a.mem)):
		i = a.next
		a.next++
	default:
		return nil, fmt.Errorf("cache memory: all %d buffers taken", a.next)
	}
	off := int64(i) * a.slot
	return a.mem[off : off+a.size : off+a.size], nil
}

// Discard gives a buffer's pages back to the system, keeping the buffer (cache.Memory).
func (a *Arena) Discard(b []byte) {
	if off, ok := a.locate(b); ok && off%a.slot == 0 {
		unix.Fallocate(a.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, a.slot)
	}
}

// Free gives a buffer back, and its pages to the system (cache.Memory).
func (a *Arena) Free(b []byte) {
	off, ok := a.locate(b)
	if !ok || off%a.slot != 0 {
		return
	}
	a.Discard(b)
	a.mu.Lock()
	a.free = append(a.free, int(off/a.slot))
	a.mu.Unlock()
}

// locate gives b's offset in the arena, if it lies wholly in it.
func (a *Arena) locate(b []byte) (int64, bool) {
	if a == nil || len(b) == 0 || len(a.mem) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(a.mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p+uintptr(len(b)) > base+uintptr(len(a.mem)) {
		return 0, false
	}
	return int64(p - base), true
}

// write writes b into the arena at off, as the kernel does (pwrite), all of it.
func (a *Arena) write(b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pwrite(a.fd, b, off)
		if err != nil {
			return fmt.Errorf("writing a clip into the cache's memory: %w", err)
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// close unmaps the arena and lets its memory go. No buffer may be in use.
func (a *Arena) close() {
	unix.Munmap(a.mem)
	unix.Close(a.fd)
}
