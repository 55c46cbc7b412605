//go:build vidfstest

package isolate

// Hooks of test builds only (go build -tags vidfstest), absent from release builds: a video
// whose name holds a mark crashes or stops the helper decoding it, and a helper asked tries what
// its sandbox forbids.

/*
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
static void vidfs_segv(void) { volatile int *p = 0; *p = 1; }
static void vidfs_abort(void) { abort(); }
// vidfs_scribble writes from p on until it faults, as a decoder's buffer overflow would.
static void vidfs_scribble(char *p) { for (volatile char *q = p;; q++) *q = (char)0xa5; }
// vidfs_clone makes a process (flags without CLONE_THREAD), which exits at once: 0, or the errno.
static int vidfs_clone(unsigned long flags) {
	long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
	if (pid == 0) _exit(0);
	return pid < 0 ? errno : 0;
}
*/
import "C"

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/vidfs/vidfs/decode"
)

// mountFault fails the mount's own part of a decode (its write of the frames into the cache) of
// a video whose name holds "poison-mount", as a full memfd would; else it gives err as it is.
func mountFault(path string, err error) error {
	if strings.Contains(filepath.Base(path), "poison-mount") {
		return syscall.ENOSPC
	}
	return err
}

// poison crashes the helper on a video whose name holds "poison-segv" (a write through a null
// pointer in C, as a decoder's bug would), "poison-abort" (abort(3)), or stops it for ever on
// "poison-hang".
func poison(path string) {
	base := filepath.Base(path)
	switch {
	case strings.Contains(base, "poison-segv"):
		C.vidfs_segv()
	case strings.Contains(base, "poison-abort"):
		C.vidfs_abort()
	case strings.Contains(base, "poison-hang"):
		select {}
	case strings.Contains(base, "poison-hog"):
		hog()
	}
}

// hog allocates without end, as a decoder led on by a hostile file would, until its limit
// stops it.
func hog() {
	var held [][]byte
	for {
		b := make([]byte, 16<<20)
		b[0], b[len(b)-1] = 1, 1
		held = append(held, b)
	}
}

// poisonProbe crashes the helper probing a video whose name holds "poison-probe-segv", or stops
// it for ever on "poison-probe-hang" (decodes of such a video are not touched: poison's marks
// are others).
func poisonProbe(path string) {
	base := filepath.Base(path)
	switch {
	case strings.Contains(base, "poison-probe-segv"):
		C.vidfs_segv()
	case strings.Contains(base, "poison-probe-hang"):
		select {}
	}
}

// scribble, for a video whose name holds "poison-scribble", writes past the end of the frames
// it decoded into dst until it faults, as a decoder's buffer overflow would: over whatever
// memory lies beyond them.
func scribble(path string, dst []byte) {
	if !strings.Contains(filepath.Base(path), "poison-scribble") || len(dst) == 0 {
		return
	}
	// In C, through a volatile pointer: Go's compiler drops stores no one reads in a loop that
	// never ends (it made this a jump to itself, except under the race detector).
	C.vidfs_scribble((*C.char)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(dst)), len(dst))))
}

// forgeMarks, for a video whose name holds "poison-marks", adds to the keyframes found unusable
// marks a lying helper would: frames out of range, of no keyframe, of the first keyframe, and
// those of another video ("poison-marks-of-F-G" in the name: frames F and G, the keyframes of
// the video the test holds them for), beside one true keyframe of this one, its last.
func forgeMarks(info *decode.Info, marks []int) []int {
	base := filepath.Base(info.Path)
	if !strings.Contains(base, "poison-marks") || len(info.Keyframes) < 2 {
		return marks
	}
	forged := []int{-1, info.Frames, info.Frames + 1000, info.Keyframes[0].Frame, info.Keyframes[1].Frame + 1,
		info.Keyframes[len(info.Keyframes)-1].Frame}
	if _, of, ok := strings.Cut(base, "poison-marks-of-"); ok {
		for _, f := range strings.Split(strings.TrimSuffix(of, filepath.Ext(of)), "-") {
			if n, err := strconv.Atoi(f); err == nil {
				forged = append(forged, n)
			}
		}
	}
	return append(marks, forged...)
}

// trySandbox tries, from inside the helper, what a hostile video's code would: read a file,
// make a socket, run a program, trace the mount.
func trySandbox() []tryResult {
	var out []tryResult
	try := func(what string, err error) {
		r := tryResult{What: what}
		if err != nil {
			r.Err = err.Error()
		}
		out = append(out, r)
	}
	f, err := os.Open("/etc/hostname")
	if err == nil {
		f.Close()
	}
	try("open /etc/hostname", err)
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.Close(fd)
	}
	try("socket(AF_INET)", err)
	fd, err = syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.Close(fd)
	}
	try("socket(AF_UNIX)", err)
	argv0, _ := syscall.BytePtrFromString("/bin/true")
	argv := []*byte{argv0, nil}
	envv := []*byte{nil}
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(argv0)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	try("execve /bin/true", errnoErr(errno))
	_, _, errno = syscall.RawSyscall(syscall.SYS_PTRACE, syscall.PTRACE_ATTACH, uintptr(os.Getppid()), 0)
	try("ptrace the mount", errnoErr(errno))
	try("kill the mount", syscall.Kill(os.Getppid(), syscall.SIGCONT))
	_, err = syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE|syscall.PROT_EXEC, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	try("mmap executable memory", err)
	try("fork a process", errnoErr(syscall.Errno(C.vidfs_clone(0))))
	try("a new user namespace", errnoErr(syscall.Errno(C.vidfs_clone(syscall.CLONE_NEWUSER))))
	_, err = os.Stat("/etc/passwd")
	try("stat /etc/passwd", err)
	// Aimed at a process that does not exist: only the filter answers EPERM (the kernel: ESRCH).
	const nobody = 0x3ffffff0
	_, _, errno = syscall.RawSyscall(syscall.SYS_TGKILL, nobody, nobody, 0)
	try("tgkill another process", filtered(errno))
	_, _, errno = syscall.RawSyscall6(syscall.SYS_PRLIMIT64, nobody, syscall.RLIMIT_NOFILE, 0, 0, 0, 0)
	try("prlimit another process", filtered(errno))
	_, _, errno = syscall.RawSyscall(syscall.SYS_FCNTL, 0, syscall.F_SETOWN, uintptr(os.Getpid()))
	try("fcntl F_SETOWN", errnoErr(errno))
	return out
}

// filtered is the error of a call the filter must refuse: EPERM, or nil for any other answer
// (the call went through to the kernel).
func filtered(e syscall.Errno) error {
	if e == syscall.EPERM {
		return e
	}
	return nil
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}
