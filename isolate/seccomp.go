package isolate

import (
	"fmt"
	"os"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// The sandbox's second half: a seccomp filter, loaded on every thread of the helper at once
// (SECCOMP_FILTER_FLAG_TSYNC), that allows only the system calls a helper makes once it serves:
// the Go runtime's (memory, threads, signals to itself, timers, its poller), reading and writing
// descriptors it was handed, and mapping shared memory. Everything else fails with EPERM: opening
// any path, making a socket or a connection, running a program, tracing or signalling another
// process. Memory is never made executable, so a hostile video cannot write code and run it.
// github.com/elastic/go-seccomp-bpf assembles the filter from names, per architecture (it is
// maintained, and has no dependencies beyond x/net and x/sys).

// allowed are the system calls a serving helper may make with any arguments, as Linux names
// them; a name the architecture lacks is left out. Those it may make only with some arguments are
// in loadSeccomp.
var allowed = []string{
	// descriptors it holds: the socket to the mount, video files, shared memory
	"read", "write", "readv", "writev", "pread64", "preadv", "preadv2", "lseek", "close", "fstat",
	"dup", "dup3", "recvmsg", "sendmsg", "recvfrom", "sendto", "shutdown", "getsockopt", "fadvise64",
	// memory (mmap and mprotect below, never executable)
	"munmap", "madvise", "mremap", "brk", "mincore", "membarrier",
	// threads, signals to itself, time
	"exit", "exit_group", "futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq",
	"set_tid_address", "gettid", "getpid", "getppid", "rt_sigaction", "rt_sigprocmask",
	"rt_sigreturn", "rt_sigtimedwait", "sigaltstack", "sched_yield", "sched_getaffinity", "nanosleep",
	"clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "getrandom", "restart_syscall",
	"timer_create", "timer_settime", "timer_delete", "setitimer", "getrusage", "getrlimit",
	"uname", "getuid", "geteuid", "getgid", "getegid", "arch_prctl", "sysinfo",
	// the Go runtime's poller
	"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd2", "pipe2", "poll", "ppoll",
}

// loadSeccomp loads the filter on every thread of the process.
func loadSeccomp() error {
	info, err := arch.GetInfo("")
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	var names []string
	for _, n := range allowed {
		if _, ok := info.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	if _, ok := info.SyscallNames["fstat"]; !ok {
		// Where there is no fstat (arm64), fstat is fstatat(fd, "", AT_EMPTY_PATH); which looks
		// up a path given one too: file metadata, never contents (Landlock does not cover it).
		names = append(names, "newfstatat")
	}
	is := func(arg uint32, v uint64) seccomp.ArgumentConditions {
		return seccomp.ArgumentConditions{{Argument: arg, Operation: seccomp.Equal, Value: v}}
	}
	pid := uint64(os.Getpid())
	conditional := []seccomp.NameWithConditions{
		// memory, never executable
		{Name: "mmap", Conditions: seccomp.ArgumentConditions{{Argument: 2, Operation: seccomp.BitsNotSet, Value: unix.PROT_EXEC}}},
		{Name: "mprotect", Conditions: seccomp.ArgumentConditions{{Argument: 2, Operation: seccomp.BitsNotSet, Value: unix.PROT_EXEC}}},
		// threads, never processes: a child process would outlive the helper's death holding its
		// socket, and escape PR_SET_PDEATHSIG
		{Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_THREAD}}},
		// signals and limits of itself only (the Go runtime signals its own threads)
		{Name: "kill", Conditions: is(0, pid)},
		{Name: "tgkill", Conditions: is(0, pid)},
		{Name: "prlimit64", Conditions: is(0, 0)},
		{Name: "prlimit64", Conditions: is(0, pid)},
		// its own thread's scheduling: SCHED_IDLE for a background clip (idleThread)
		{Name: "sched_setattr", Conditions: is(0, 0)},
		{Name: "sched_getattr", Conditions: is(0, 0)},
	}
	// a descriptor's flags, and dups of it; not its owner or signals (F_SETOWN, F_SETSIG)
	for _, cmd := range []uint64{unix.F_GETFD, unix.F_SETFD, unix.F_GETFL, unix.F_SETFL, unix.F_DUPFD_CLOEXEC} {
		conditional = append(conditional, seccomp.NameWithConditions{Name: "fcntl", Conditions: is(1, cmd)})
	}
	groups := []seccomp.SyscallGroup{{Action: seccomp.ActionAllow, Names: names, NamesWithCondtions: conditional}}
	if _, ok := info.SyscallNames["clone3"]; ok {
		// clone3's flags are in memory, out of the filter's reach: ENOSYS makes glibc fall back
		// to clone, whose flags it sees.
		groups = append(groups, seccomp.SyscallGroup{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}})
	}
	filter := seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy:     seccomp.Policy{DefaultAction: seccomp.ActionErrno, Syscalls: groups},
	}
	if err := seccomp.LoadFilter(filter); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}
