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

// allowed are the system calls a serving helper may make, as Linux names them; a name the
// architecture lacks (arm64 has no epoll_wait, say) is left out.
var allowed = []string{
	// descriptors it holds: the socket to the mount, video files, shared memory
	"read", "write", "readv", "writev", "pread64", "preadv", "preadv2", "lseek", "close", "fstat",
	"newfstatat", "statx", "fcntl", "dup", "dup3", "recvmsg", "sendmsg", "recvfrom", "sendto",
	"shutdown", "getsockopt", "fadvise64",
	// memory (mmap and mprotect below, without PROT_EXEC)
	"munmap", "madvise", "mremap", "brk", "mincore", "membarrier",
	// threads, signals to itself, time
	"clone", "clone3", "exit", "exit_group", "futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq",
	"set_tid_address", "gettid", "getpid", "getppid", "tgkill", "tkill", "rt_sigaction", "rt_sigprocmask",
	"rt_sigreturn", "rt_sigtimedwait", "sigaltstack", "sched_yield", "sched_getaffinity", "nanosleep",
	"clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "getrandom", "restart_syscall",
	"timer_create", "timer_settime", "timer_delete", "setitimer", "getrusage", "getrlimit", "prlimit64",
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
	noExec := seccomp.ArgumentConditions{{Argument: 2, Operation: seccomp.BitsNotSet, Value: unix.PROT_EXEC}}
	// kill only itself: the Go runtime raises signals on itself (kill(getpid(), sig))
	self := seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: uint64(os.Getpid())}}
	filter := seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionErrno,
			Syscalls: []seccomp.SyscallGroup{{
				Action: seccomp.ActionAllow,
				Names:  names,
				NamesWithCondtions: []seccomp.NameWithConditions{
					{Name: "mmap", Conditions: noExec},
					{Name: "mprotect", Conditions: noExec},
					{Name: "kill", Conditions: self},
				},
			}},
		},
	}
	if err := seccomp.LoadFilter(filter); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}
