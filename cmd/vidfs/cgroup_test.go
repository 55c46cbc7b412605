package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupCPUs: the CPU quota is read from cgroup v2's cpu.max and v1's cfs files, of the
// process's cgroup and those above it (the least wins), under a file-system root laid out as
// Linux lays it out.
func TestCgroupCPUs(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  float64
	}{
		{"v2 quota", map[string]string{"proc/self/cgroup": "0::/job/vidfs\n",
			"sys/fs/cgroup/job/vidfs/cpu.max": "250000 100000\n", "sys/fs/cgroup/job/cpu.max": "max 100000\n"}, 2.5},
		{"v2 parent's quota", map[string]string{"proc/self/cgroup": "0::/job/vidfs\n",
			"sys/fs/cgroup/job/vidfs/cpu.max": "max 100000\n", "sys/fs/cgroup/job/cpu.max": "150000 100000\n"}, 1.5},
		{"v2 none", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/cpu.max": "max 100000\n"}, 0},
		{"v2 host path in a container", map[string]string{"proc/self/cgroup": "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/cpu.max": "400000 100000\n"}, 4},
		{"v1", map[string]string{"proc/self/cgroup": "4:memory:/x\n3:cpu,cpuacct:/docker/c1\n",
			"sys/fs/cgroup/cpu,cpuacct/docker/c1/cpu.cfs_quota_us": "300000\n", "sys/fs/cgroup/cpu,cpuacct/docker/c1/cpu.cfs_period_us": "100000\n"}, 3},
		{"v1 none", map[string]string{"proc/self/cgroup": "1:cpu:/\n",
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"}, 0},
		{"no cgroup", map[string]string{}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for name, text := range c.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := cgroupCPUs(root); got != c.want {
				t.Fatalf("cgroupCPUs: %v, want %v", got, c.want)
			}
		})
	}
	for n, want := range map[int]int{1: 1, 2: 2, 7: 7, 8: 7, 16: 14, 64: 56} {
		if got := decodeWorkers(n); got != want {
			t.Errorf("decodeWorkers(%d) = %d, want %d", n, got, want)
		}
	}
}
