package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/vidfs/vidfs/order"
)

// ownersOf returns owners over proc and plans of their own, and how to have thread pid write a
// plan (as setPlan does) and to remove one.
func ownersOf(proc procfs.FS) (o *owners, wrote func(plan string, pid int), forget func(plan string)) {
	ps := order.NewPlans(1, 1, 0)
	o = newOwners(proc, ps)
	return o, func(plan string, pid int) { ps.SetOwned(plan, nil, false, o.process(pid)) }, func(plan string) { ps.Remove(plan) }
}

// fakeProc writes a /proc of threads, tid -> {tgid, ppid}: their status and stat files, as
// Linux writes them.
func fakeProc(t *testing.T, threads map[int][2]int) procfs.FS {
	dir := t.TempDir()
	for tid, p := range threads {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprint(tid)), 0o755); err != nil {
			t.Fatal(err)
		}
		status := fmt.Sprintf("Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\nNgid:\t0\nPid:\t%d\nPPid:\t%d\n", p[0], tid, p[1])
		stat := fmt.Sprintf("%d (python3) S %d %d %d 0 -1 4194560 %s\n", tid, p[1], p[0], p[0], strings.Repeat("0 ", 44))
		for name, text := range map[string]string{"status": status, "stat": stat} {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(tid), name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	proc, err := procfs.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	return proc
}

// TestOwners: a plan belongs to the process that wrote it (whichever of its threads did), and
// reads by it, its threads and its descendants (DataLoader workers) find it; others find none.
func TestOwners(t *testing.T) {
	o, wrote, forget := ownersOf(fakeProc(t, map[int][2]int{
		100: {100, 1},   // torchrun
		200: {200, 100}, // rank 0
		201: {200, 100}, // a thread of rank 0
		210: {210, 200}, // rank 0's DataLoader worker
		211: {211, 210}, // a worker's child
		300: {300, 100}, // rank 1
		310: {310, 300}, // rank 1's worker
		400: {400, 1},   // a shell
	}))
	if got := o.of(210); got != nil {
		t.Errorf("before any plan has an owner: %v", got)
	}
	wrote("rank0", 201)
	wrote("rank1", 300)
	wrote("val1", 300)
	for pid, want := range map[int][]string{200: {"rank0"}, 201: {"rank0"}, 210: {"rank0"}, 211: {"rank0"},
		300: {"rank1", "val1"}, 310: {"rank1", "val1"}, 400: nil, 100: nil, 999: nil, 0: nil} {
		if got := o.of(pid); !slices.Equal(got, want) {
			t.Errorf("plans of %d: %v, want %v", pid, got, want)
		}
	}
	wrote("rank0", 400) // the shell rewrote it: rank 0's process owns it no longer
	forget("val1")
	if got := o.of(210); got != nil {
		t.Errorf("rank 0's worker after rank0 was rewritten by another process: %v", got)
	}
	if got := o.of(400); !slices.Equal(got, []string{"rank0"}) {
		t.Errorf("the shell: %v", got)
	}
	if got := o.of(310); !slices.Equal(got, []string{"rank1"}) {
		t.Errorf("rank 1's worker after val1 was removed: %v", got)
	}
}

// TestOwnersProc: the real /proc says this process descends from its parent.
func TestOwnersProc(t *testing.T) {
	proc, err := procfs.NewFS(procfs.DefaultMountPoint)
	if err != nil {
		t.Fatal(err)
	}
	o, wrote, _ := ownersOf(proc)
	wrote("mine", os.Getppid())
	if got := o.of(os.Getpid()); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("plans of this process, whose parent wrote one: %v", got)
	}
}

// TestOwnersRemembered: a thread asked of again is answered from memory, without /proc (which is
// gone here), until a plan's owner changes.
func TestOwnersRemembered(t *testing.T) {
	dir := t.TempDir()
	threads := map[int][2]int{200: {200, 1}, 210: {210, 200}}
	proc := fakeProc(t, threads)
	o, wrote, forget := ownersOf(proc)
	wrote("rank0", 200)
	if got := o.of(210); !slices.Equal(got, []string{"rank0"}) {
		t.Fatalf("plans of 210: %v", got)
	}
	// Point /proc at an empty directory: any lookup now fails.
	empty, err := procfs.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	o.proc = empty
	for range 3 {
		if got := o.of(210); !slices.Equal(got, []string{"rank0"}) {
			t.Fatalf("plans of 210 asked again: %v (read /proc?)", got)
		}
	}
	forget("rank0")
	if got := o.of(210); got != nil {
		t.Errorf("plans of 210 after rank0 was removed: %v", got)
	}
}
