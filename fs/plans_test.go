package fs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitUntil polls cond for up to 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
	}
}

// TestPlanFiles: writing .vidfs/plans/NAME creates a plan, appending queues more, reading gives
// it back, the folder lists it, unlinking removes it; bad names and bad plans are refused.
func TestPlanFiles(t *testing.T) {
	f, _ := fakeFS(t, 40, 1, nil)
	mnt := mountFake(t, f)
	plans := filepath.Join(mnt, ".vidfs", "plans")
	p := func(name string) string { return filepath.Join(plans, name) }
	if err := os.WriteFile(p("rank0"), []byte("3 1 2"), 0o644); err != nil {
		t.Fatal(err)
	}
	af, err := os.OpenFile(p("rank0"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	af.WriteString("7 7\n")
	if err := af.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p("rank0")); string(b) != "3 1 2 7 7\n" {
		t.Errorf("rank0 reads back %q", b)
	}
	if err := os.WriteFile(filepath.Join(mnt, ".vidfs", "order"), []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(plans)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "default empty rank0" {
		t.Errorf("plans/ lists %q, want default (the order file's), empty and rank0", got)
	}
	if b, _ := os.ReadFile(p("default")); string(b) != "5\n" {
		t.Errorf("plans/default reads %q, want the order file's plan", b)
	}
	// Refused: a plan that does not parse (the old one stays), a name that is no name.
	if err := os.WriteFile(p("rank0"), []byte("1 x"), 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("writing a bad plan: %v, want EINVAL", err)
	}
	if b, _ := os.ReadFile(p("rank0")); string(b) != "3 1 2 7 7\n" {
		t.Errorf("after a refused plan rank0 reads %q", b)
	}
	if err := os.WriteFile(p("-bad"), []byte("1"), 0o644); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a plan named -bad: %v, want EINVAL", err)
	}
	if err := os.Remove(p("rank0")); err != nil {
		t.Errorf("unlinking rank0: %v", err)
	}
	if _, err := os.Stat(p("rank0")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rank0 after unlink: %v", err)
	}
	if err := os.Remove(p("nothing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unlinking a plan that is not there: %v", err)
	}
	st := f.Stats()
	if len(st.Plans) != 2 || st.Plans[0].Name != "default" || st.Plans[1].Name != "empty" {
		t.Errorf("plans in the stats: %+v", st.Plans)
	}
}

// TestPlansShareDecodes: two plans that want the same samples get them decoded once, and each
// plan's readers find theirs ready; unlinking a plan frees its share of the cache (its samples
// are no longer due, and go first when room is needed).
func TestPlansShareDecodes(t *testing.T) {
	f, dec := fakeFS(t, 30, 1, nil) // prefetches 26 ahead
	mnt := mountFake(t, f)
	write := func(name, plan string) {
		if err := os.WriteFile(filepath.Join(mnt, ".vidfs", "plans", name), []byte(plan), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "0 1 2 3 4 5 6 7 8 9")
	write("b", "5 6 7 8 9 10 11 12 13 14")
	waitUntil(t, "both plans prefetched", func() bool { _, n := f.cache.ReadyAhead(seq(0, 15)); return n == 15 })
	for s := range 15 {
		if c := dec.decodes(f, s); c != 1 {
			t.Errorf("sample %d decoded %d times, want once", s, c)
		}
	}
	hdr, S := len(f.lay.NpyHeader()), int(f.lay.Spec.SampleBytes())
	fd, err := os.Open(filepath.Join(mnt, "clips.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	buf := make([]byte, S)
	for _, s := range []int{0, 1, 2, 3, 4, 10, 11} { // a reads its own; b reads two of its own
		if _, err := fd.ReadAt(buf, int64(hdr+s*S)); err != nil {
			t.Fatal(err)
		}
	}
	st := f.Stats()
	byName := map[string]int{}
	for i, p := range st.Plans {
		byName[p.Name] = i
	}
	a, b := st.Plans[byName["a"]], st.Plans[byName["b"]]
	if a.Hits != 5 || a.Position != 5 || b.Hits != 2 || b.Position != 0 || st.Cache.Misses != 0 {
		t.Errorf("a: %d hits at %d; b: %d hits at %d; %d misses; want 5 at 5, 2 at 0 (10 and 11 read out of order), none",
			a.Hits, a.Position, b.Hits, b.Position, st.Cache.Misses)
	}
	// b goes: the samples only b wanted are due no more; a's still are.
	if err := os.Remove(filepath.Join(mnt, ".vidfs", "plans", "b")); err != nil {
		t.Fatal(err)
	}
	for s := 12; s < 15; s++ {
		if d := f.plans.NextUse(s); d >= 0 {
			t.Errorf("sample %d, only b's, due in %d ms after b went", s, d)
		}
	}
	if f.plans.NextUse(7) < 0 {
		t.Error("sample 7, a's too, not due after b went")
	}
	// A third plan needs room: what b held goes, what a will read stays.
	write("c", numbers(20, 40))
	waitUntil(t, "c prefetched", func() bool { _, n := f.cache.ReadyAhead(seq(20, 30)); return n == 10 })
	if _, n := f.cache.ReadyAhead(seq(5, 10)); n != 5 {
		t.Errorf("%d of a's next 5 samples still ready, want 5", n)
	}
	if _, n := f.cache.ReadyAhead(seq(12, 15)); n == 3 {
		t.Error("b's samples all kept while c needed room")
	}
}

// seq is [from, to).
func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// numbers is from..to-1 as a plan's text.
func numbers(from, to int) string {
	var b strings.Builder
	for _, i := range seq(from, to) {
		b.WriteString(itoa(i) + " ")
	}
	return b.String()
}

// TestPlansOwnReaders: a read by the process that wrote a plan, or by one of its children (a
// DataLoader worker), counts toward that plan, though another plan has the sample due sooner; a
// read by a process that wrote no plan counts toward the plan with the sample due soonest.
func TestPlansOwnReaders(t *testing.T) {
	f, _ := fakeFS(t, 40, 1, nil)
	mnt := mountFake(t, f)
	plans := filepath.Join(mnt, ".vidfs", "plans")
	if err := os.WriteFile(filepath.Join(plans, "other"), []byte("5 6 7"), 0o644); err != nil { // this process
		t.Fatal(err)
	}
	hdr, S := len(f.lay.NpyHeader()), int(f.lay.Spec.SampleBytes())
	readSample := fmt.Sprintf("dd if=%s/clips.npy of=/dev/null bs=%d iflag=skip_bytes skip=%d count=1 status=none", mnt, S, hdr+5*S)
	// A shell writes its plan, in which sample 5 comes sixth, and its child dd reads sample 5.
	sh := exec.Command("sh", "-c", fmt.Sprintf("printf '0 1 2 3 4 5 6 7 8 9' > %s/mine && %s", plans, readSample))
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// A process that wrote no plan reads sample 5 again: due soonest in other.
	if out, err := exec.Command("sh", "-c", readSample).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]int64{}
	for _, p := range f.Stats().Plans {
		got[p.Name] = p.Hits + p.Misses
	}
	if got["mine"] != 1 || got["other"] != 1 {
		t.Errorf("reads counted toward mine %d, other %d; want 1 each (the writer's child's toward mine)", got["mine"], got["other"])
	}
	// A shell's redirection closes a descriptor of the plan before it writes: the plan is
	// replaced once, not emptied first. Truncating it with nothing written empties it.
	writes := func() int64 {
		for _, p := range f.Stats().Plans {
			if p.Name == "other" {
				return p.Writes
			}
		}
		return -1
	}
	before := writes()
	if out, err := exec.Command("sh", "-c", fmt.Sprintf("echo 9 8 > %s/other", plans)).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if e, _ := f.plans.Entries("other"); writes() != before+1 || fmt.Sprint(e) != "[9 8]" {
		t.Errorf("after echo 9 8 > other: %d writes (was %d), plan %v", writes(), before, e)
	}
	if out, err := exec.Command("sh", "-c", fmt.Sprintf(": > %s/other", plans)).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	waitUntil(t, "other emptied", func() bool { e, ok := f.plans.Entries("other"); return ok && len(e) == 0 })
}
