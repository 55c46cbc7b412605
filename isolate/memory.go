package isolate

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Arena is shared memory the mount owns and every helper maps: the cache's sample buffers, so
// that a helper decodes a sample straight into the buffer it is read from (no copy). It is one
// memfd of slots of a fixed size; pages are taken only when first touched, as an anonymous
// mapping's are.
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

// newArena makes shared memory for n buffers of size bytes.
func newArena(size int64, n int) (*Arena, error) {
	page := int64(os.Getpagesize())
	slot := (size + page - 1) / page * page
	if size <= 0 || n <= 0 || slot > (1<<62)/int64(n) {
		return nil, fmt.Errorf("shared memory for %d buffers of %d bytes: bad size", n, size)
	}
	fd, mem, err := sharedMemory("vidfs-cache", slot*int64(n))
	if err != nil {
		return nil, err
	}
	return &Arena{fd: fd, mem: mem, slot: slot, size: size}, nil
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
		return nil, fmt.Errorf("shared memory: all %d buffers taken", a.next)
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

// close unmaps the arena and lets its memory go. No buffer may be in use.
func (a *Arena) close() {
	unix.Munmap(a.mem)
	unix.Close(a.fd)
}
