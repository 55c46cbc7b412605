// Package testfd lets tests run code with the process's file descriptors all but used up, as a
// busy host's are: the failures that makes (EMFILE) must pass, not be remembered.
package testfd

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Short runs f with all but free of the process's file descriptors taken: it lowers the soft
// RLIMIT_NOFILE (to 256 at most, so that there are few to take), opens /dev/null until EMFILE,
// gives back free of them, and after f closes what it took and restores the limit. The whole
// process is short meanwhile, so tests that use it must not run in parallel.
func Short(t testing.TB, free int, f func()) {
	t.Helper()
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = min(lim.Cur, 256)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var held []int
	release := func() {
		for _, fd := range held {
			unix.Close(fd)
		}
		held = nil
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			t.Error(err)
		}
	}
	defer release()
	for {
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EMFILE) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, fd)
	}
	for range min(free, len(held)) {
		unix.Close(held[len(held)-1])
		held = held[:len(held)-1]
	}
	f()
}
