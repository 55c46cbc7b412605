package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// usableCores is how many CPUs this process may keep busy at once: the CPUs of its affinity mask
// (taskset, cpuset), bounded by its cgroup's CPU quota rounded up (a container's --cpus: cgroup
// v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us); at least 1.
func usableCores() int {
	n := runtime.NumCPU()
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil && set.Count() > 0 {
		n = set.Count()
	}
	if q := cgroupCPUs("/"); q > 0 {
		n = min(n, int(math.Ceil(q)))
	}
	return max(n, 1)
}

// decodeWorkers is --workers' default on n usable cores: all but an eighth of them, which are
// left to the trainer's own processes (its DataLoader workers collating batches, its main
// loop). Decoding is what a mount spends its CPU on, and scales nearly linearly with workers (16
// workers gave 12.3x the clips/s of one on 16 cores), so it gets the rest: 14 of 16, 7 of 8, all
// of up to 7.
func decodeWorkers(n int) int { return max(n-n/8, 1) }

// coresHelp says what a worker count's default came from, for --help.
func coresHelp(workers, cores int) string {
	return fmt.Sprintf("default: %d, from the %s this process may use", workers, plural(cores, "core"))
}

// cgroupCPUs is the CPU quota, in CPUs, of the cgroup this process is in and of those above it
// (the least), as seen under root (a file-system root: "/"); 0 when none has one.
func cgroupCPUs(root string) float64 {
	f, err := os.Open(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0
	}
	defer f.Close()
	least := 0.0
	note := func(q float64) {
		if q > 0 && (least == 0 || q < least) {
			least = q
		}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controllers:path; v2 is 0::path.
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls, path := parts[1], parts[2]
		switch {
		case parts[0] == "0" && ctrls == "":
			for _, mnt := range []string{"sys/fs/cgroup", "sys/fs/cgroup/unified"} {
				walkCgroup(filepath.Join(root, mnt), path, func(dir string) { note(cpuMax(dir)) })
			}
		case hasController(ctrls, "cpu"):
			for _, mnt := range []string{"sys/fs/cgroup/cpu", "sys/fs/cgroup/cpu,cpuacct", "sys/fs/cgroup/cpuacct,cpu"} {
				walkCgroup(filepath.Join(root, mnt), path, func(dir string) { note(cfsQuota(dir)) })
			}
		}
	}
	return least
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// walkCgroup calls visit on the cgroup path under the hierarchy mounted at mnt and on each
// directory above it up to mnt. A path that is not there (a container that sees its host's path
// for its own cgroup, mounted as mnt itself) visits mnt alone.
func walkCgroup(mnt, path string, visit func(dir string)) {
	if _, err := os.Stat(mnt); err != nil {
		return
	}
	dir := filepath.Join(mnt, filepath.Clean("/"+path))
	if _, err := os.Stat(dir); err != nil {
		dir = mnt
	}
	for {
		visit(dir)
		if dir == mnt || !strings.HasPrefix(dir, mnt) {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// cpuMax reads a cgroup v2 cpu.max ("max 100000" or "QUOTA PERIOD") as CPUs; 0: no quota.
func cpuMax(dir string) float64 {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	return quotaCPUs(f[0], f[1])
}

// cfsQuota reads a cgroup v1 cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us as CPUs.
func cfsQuota(dir string) float64 {
	q, err1 := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	p, err2 := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
	if err1 != nil || err2 != nil {
		return 0
	}
	return quotaCPUs(strings.TrimSpace(string(q)), strings.TrimSpace(string(p)))
}

func quotaCPUs(quota, period string) float64 {
	q, err1 := strconv.ParseFloat(quota, 64)
	p, err2 := strconv.ParseFloat(period, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0 // "max", -1 or unreadable: no quota
	}
	return q / p
}
