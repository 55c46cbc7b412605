package isolate

// The sandbox's first half, applied before the Go runtime starts a thread.
//
// Landlock confines only the thread that asks, and its children, until Landlock ABI 8 (Linux
// 7.0) can confine a whole process at once. A Go program has several threads before main runs,
// and go-landlock's way of reaching them all (libpsx) needs every cgo build linked with
// -Wl,--wrap=pthread_create. So a helper confines itself here, in a C constructor that runs at
// load, before the Go runtime starts: the one thread there is confines itself, and every thread
// the runtime makes after inherits it. The constructor does nothing unless the process is a
// helper (argv[1] is HelperArg). The seccomp filter, the second half, is loaded from Go
// (seccomp.go), which can reach every thread (SECCOMP_FILTER_FLAG_TSYNC).

/*
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <signal.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_restrict_self 446
#endif

struct vidfs_ll_attr { uint64_t fs, net, scoped; };

// What the constructor did, for the helper to report: 0 not a helper, 1 confined; the Landlock
// ABI it found (0: none); the uid it runs as; and the first failure, if any.
static int vidfs_helper;
static int vidfs_landlock_abi;
static char vidfs_sandbox_err[256];

static void fail(const char *what) {
	if (vidfs_sandbox_err[0] == 0) {
		snprintf(vidfs_sandbox_err, sizeof vidfs_sandbox_err, "%s: %s", what, strerror(errno));
	}
}

// vidfs_confine: a helper gives up every privilege, then confines itself with Landlock.
__attribute__((constructor)) static void vidfs_confine(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc < 2 || argv == NULL || argv[1] == NULL || strcmp(argv[1], "__decoder-helper") != 0) {
		return;
	}
	vidfs_helper = 1;
	// Nothing but the socket to the mount (3) and stdin, stdout and stderr: a descriptor the
	// mount inherited without close-on-exec stays with the mount.
	syscall(SYS_close_range, 4, ~0U, 0);
	// The first the kernel kills if the machine runs out of memory: a helper, not the trainer.
	// Written while /proc/self is still this process's own to open (before the change of user
	// and PR_SET_DUMPABLE), and before Landlock forbids opening anything.
	int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (adj < 0 || write(adj, "1000", 4) != 4) fail("oom_score_adj");
	if (adj >= 0) close(adj);
	struct rlimit zero = {0, 0};
	setrlimit(RLIMIT_CORE, &zero); // a crash writes no core file of a hostile video's decode
	if (geteuid() == 0) {
		// Root's capabilities go with the change of user below; the bounding set is dropped
		// first, while CAP_SETPCAP allows it, so that nothing can bring them back.
		for (int c = 0; c <= CAP_LAST_CAP; c++) {
			prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
		}
		if (setgroups(0, NULL) != 0) fail("setgroups");
		if (setresgid(65534, 65534, 65534) != 0) fail("setresgid(nogroup)");
		if (setresuid(65534, 65534, 65534) != 0) fail("setresuid(nobody)");
	}
	// Whatever capabilities remain (a mount that is not root, given some: systemd's
	// AmbientCapabilities=, file capabilities) go too: every set emptied.
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	for (int c = 0; c <= CAP_LAST_CAP; c++) {
		prctl(PR_CAPBSET_DROP, c, 0, 0, 0); // refused without CAP_SETPCAP: then none is held anyway
	}
	struct __user_cap_header_struct caphead = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct capdata[2];
	memset(capdata, 0, sizeof capdata);
	if (syscall(SYS_capset, &caphead, capdata) != 0) fail("capset");
	// A change of user clears these; set them after it.
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) fail("prctl(PR_SET_PDEATHSIG)");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) fail("prctl(PR_SET_DUMPABLE)");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("prctl(PR_SET_NO_NEW_PRIVS)");

	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1); // LANDLOCK_CREATE_RULESET_VERSION
	if (abi < 1) {
		return; // no Landlock in this kernel: the helper reports it, and seccomp still holds
	}
	vidfs_landlock_abi = (int)abi;
	// Every access right the kernel knows is handled, and no rule allows any: the helper can
	// open, make, remove or run no file, bind or connect no TCP port, reach no abstract socket
	// and signal no process outside itself.
	struct vidfs_ll_attr attr = {0, 0, 0};
	size_t size = 8;
	attr.fs = (1ULL << 13) - 1;                // ABI 1: execute .. make_sym
	if (abi >= 2) attr.fs |= 1ULL << 13;       // refer
	if (abi >= 3) attr.fs |= 1ULL << 14;       // truncate
	if (abi >= 4) { attr.net = 3; size = 16; } // bind_tcp, connect_tcp
	if (abi >= 5) attr.fs |= 1ULL << 15;       // ioctl_dev
	if (abi >= 6) { attr.scoped = 3; size = 24; } // abstract unix sockets, signals
	long fd = syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (fd < 0) {
		fail("landlock_create_ruleset");
		return;
	}
	if (syscall(SYS_landlock_restrict_self, fd, 0) != 0) fail("landlock_restrict_self");
	close((int)fd);
}

static int vidfs_is_helper(void) { return vidfs_helper; }
static int vidfs_abi(void) { return vidfs_landlock_abi; }
static const char *vidfs_err(void) { return vidfs_sandbox_err; }
*/
import "C"

import "errors"

// HelperArg is the hidden first argument that makes vidfs a decoder helper.
const HelperArg = "__decoder-helper"

// confinement says what the constructor did: whether this process is a helper, the Landlock ABI
// it confined itself under (0: the kernel has no Landlock), and the first step that failed.
func confinement() (helper bool, landlockABI int, err error) {
	if msg := C.GoString(C.vidfs_err()); msg != "" {
		err = errors.New(msg)
	}
	return C.vidfs_is_helper() != 0, int(C.vidfs_abi()), err
}

// Confinement is confinement, exported for a quick check.
func Confinement() (bool, int, error) { return confinement() }
