package decode

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// populateMin is the smallest buffer Populate maps in: below it, the system call costs more
// than the page faults it saves.
const populateMin = 256 << 10

// Populate maps in the whole pages of b, writable, with one system call (MADV_POPULATE_WRITE,
// Linux 5.14), before b is filled: fresh memory (a new cache buffer) otherwise takes a page fault
// for every 4 KiB written (588 for a clip of 16 frames of 224x224). Each fault costs a trap into
// the kernel, and under a hypervisor that maps guest memory lazily, one into the host too:
// writing a fresh 2.4 MB buffer measured 7.6-9.7 ms of CPU with the faults, 4.1-5.5 ms populated
// first, 0.1-0.2 ms rewriting it (bench/fresh_memory.c; AMD EPYC under PVM; docs/benchmarks.md,
// issue 48). Pool.DecodeClip
// populates the buffer it is given; whoever copies decoded frames into fresh memory should too.
// Where the call fails (an older kernel, memory that cannot be populated), the writes fault as
// before.
func Populate(b []byte) {
	page := uintptr(os.Getpagesize())
	if len(b) < populateMin {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	first := (start + page - 1) &^ (page - 1)
	end := (start + uintptr(len(b))) &^ (page - 1)
	if end <= first {
		return
	}
	// The pages lie wholly within b, whose memory is the caller's and stays alive meanwhile.
	pages := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), first-start)), end-first)
	_ = unix.Madvise(pages, unix.MADV_POPULATE_WRITE)
}
