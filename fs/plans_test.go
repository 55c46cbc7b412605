package fs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/npy"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/order"
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
		if d := f.plans.DueInHorizon(s); d >= 0 {
			t.Errorf("sample %d, only b's, due in %d ms after b went", s, d)
		}
	}
	if f.plans.DueInHorizon(7) < 0 {
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

// replacingPlan is plan k of n samples as TestPlanWritersConcurrent writes it: every sample once,
// starting at k, each index two characters wide, so that all such plans are as long and one
// written at offset 0 over another leaves exactly one of them.
func replacingPlan(k, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%2d ", (k+i*7)%n) // 7 and n are coprime
	}
	return b.String()
}

// chunkLen is the length of an appended chunk: three indices, two characters wide, each ended by
// a space or a newline.
const chunkLen = 9

// chunk is appended chunk c (c < m³): c's digits in base m, as three indices.
func chunk(c, m int) string { return fmt.Sprintf("%2d %2d %2d\n", c/m/m%m, c/m%m, c%m) }

// planText is a plan as reading a plan file gives it.
func planText(entries []string) string {
	if len(entries) == 0 {
		return ""
	}
	return strings.Join(entries, " ") + "\n"
}

// chunksIn is the chunks (in base m) that the indices of text spell after those of first; an
// error where text does not start with first, they are not whole chunks, or a chunk comes twice.
func chunksIn(text, first string, m int) ([]int, error) {
	fields, skip := strings.Fields(text), len(strings.Fields(first))
	if len(fields) < skip || !slices.Equal(fields[:skip], strings.Fields(first)) || (len(fields)-skip)%3 != 0 {
		return nil, fmt.Errorf("%d indices: not %q and whole chunks of 3", len(fields), first)
	}
	var cs []int
	seen := map[int]bool{}
	for i := skip; i < len(fields); i += 3 {
		c := 0
		for _, d := range fields[i : i+3] {
			v, err := strconv.Atoi(d)
			if err != nil || v < 0 || v >= m {
				return nil, fmt.Errorf("index %q", d)
			}
			c = c*m + v
		}
		if seen[c] {
			return nil, fmt.Errorf("chunk %d twice", c)
		}
		seen[c] = true
		cs = append(cs, c)
	}
	return cs, nil
}

// withClose closes fd and gives err, or else close's error.
func withClose(fd int, err error) error {
	if cerr := unix.Close(fd); err == nil {
		return cerr
	}
	return err
}

// withFile opens path, runs do on the descriptor and closes it; it gives do's error, or else
// close's.
func withFile(path string, flags int, do func(fd int) error) error {
	fd, err := unix.Open(path, flags, 0)
	if err != nil {
		return err
	}
	return withClose(fd, do(fd))
}

// writeAll writes s to fd in one write.
func writeAll(fd int, s string) error {
	if k, err := unix.Write(fd, []byte(s)); err != nil || k != len(s) {
		return fmt.Errorf("wrote %d of %d bytes: %w", k, len(s), err)
	}
	return nil
}

// TestPlanWritersConcurrent: with -race, several goroutines write, append, read back (pread) and
// close (a dup of) one O_RDWR descriptor of a plan, while others open, write and close their own
// descriptors of the same plans (replacing, appending, emptying, and refused with EINVAL and
// EFBIG), read the plans and the stats, and read samples. Nothing races; every call succeeds but
// the refusals; every plan read is one of those written; an appended plan holds each chunk
// appended once, in the order each writer appended them; a plan written after it all is the
// one in force.
func TestPlanWritersConcurrent(t *testing.T) {
	f, _ := fakeFS(t, 40, 2, nil)
	mnt := mountFake(t, f)
	n := f.lay.Len()
	orderPath := filepath.Join(mnt, ".vidfs", "order")
	queuePath := filepath.Join(mnt, ".vidfs", "plans", "queue")
	const rounds = 60
	const base = "0 1 2\n" // the queue's first plan, before every chunk
	// The queue names samples below half alone, and the samples read are the others: no read
	// moves the queue's position (an append drops what was read before it).
	half := n / 2

	written := map[string]bool{}          // as written
	readBack := map[string]bool{"": true} // as read back: a plan written, or none (emptied)
	for k := range n {
		p := replacingPlan(k, n)
		written[p] = true
		readBack[planText(strings.Fields(p))] = true
	}
	if err := os.WriteFile(orderPath, []byte(replacingPlan(0, n)), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(queuePath, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	shared, err := unix.Open(orderPath, unix.O_RDWR|unix.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Pwrite(shared, []byte(replacingPlan(1, n)), 0); err != nil {
		t.Fatal(err)
	}
	sharedQueue, err := unix.Open(queuePath, unix.O_RDWR|unix.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// closeDup closes a dup of fd: the kernel flushes, and what was written through fd is applied.
	closeDup := func(fd int) error {
		d, err := unix.Dup(fd)
		if err != nil {
			return err
		}
		return unix.Close(d)
	}
	// asShell writes s to path as a shell's redirection does: it opens path, dups the descriptor,
	// closes the one opened, and writes through the dup.
	asShell := func(path, s string) error {
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_TRUNC, 0)
		if err != nil {
			return err
		}
		d, err := unix.Dup(fd)
		if err != nil {
			unix.Close(fd)
			return err
		}
		if err := unix.Close(fd); err != nil {
			unix.Close(d)
			return err
		}
		return withClose(d, writeAll(d, s))
	}

	var wg sync.WaitGroup
	// Chunk numbers: writer w appends chunks w*rounds to (w+1)*rounds-1, in order.
	const sharedAppenders, ownAppenders = 2, 2
	for w := range sharedAppenders {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for i := range rounds {
				if err := writeAll(sharedQueue, chunk(w*rounds+i, half)); err != nil {
					t.Errorf("appending through the shared descriptor: %v", err)
					return
				}
				k, err := unix.Pread(sharedQueue, buf, 0)
				if err != nil {
					t.Errorf("pread of the shared appending descriptor: %v", err)
					return
				}
				if _, err := chunksIn(string(buf[:k]), "", half); err != nil || k%chunkLen != 0 {
					t.Errorf("the shared appending descriptor reads %d bytes: %v", k, err)
				}
				if i%3 == 0 {
					if err := closeDup(sharedQueue); err != nil {
						t.Errorf("closing a dup of the shared appending descriptor: %v", err)
					}
				}
			}
		})
	}
	for w := sharedAppenders; w < sharedAppenders+ownAppenders; w++ {
		wg.Go(func() {
			for i := range rounds {
				c := chunk(w*rounds+i, half)
				if err := withFile(queuePath, unix.O_WRONLY|unix.O_APPEND, func(fd int) error {
					if err := writeAll(fd, c[:5]); err != nil {
						return err
					}
					return writeAll(fd, c[5:])
				}); err != nil {
					t.Errorf("appending chunk %d: %v", w*rounds+i, err)
				}
			}
		})
	}
	for w := range 3 { // on the shared replacing descriptor
		wg.Go(func() {
			buf := make([]byte, 4*n)
			for i := range rounds {
				p := replacingPlan(w*rounds+i, n)
				if k, err := unix.Pwrite(shared, []byte(p), 0); err != nil || k != len(p) {
					t.Errorf("pwrite of the shared descriptor: %d bytes, %v", k, err)
					return
				}
				k, err := unix.Pread(shared, buf, 0)
				if err != nil || !written[string(buf[:k])] {
					t.Errorf("pread of the shared descriptor: %q, %v; want a plan written", buf[:k], err)
				}
				if i%2 == 0 {
					if err := closeDup(shared); err != nil {
						t.Errorf("closing a dup of the shared descriptor: %v", err)
					}
				}
			}
		})
	}
	for w := range 2 { // each on descriptors of its own
		wg.Go(func() {
			for i := range rounds {
				p := replacingPlan(w+i, n)
				var err, want error
				switch i % 6 {
				case 0: // replace
					err = withFile(orderPath, unix.O_WRONLY|unix.O_TRUNC, func(fd int) error { return writeAll(fd, p) })
				case 1: // replace, reading back what this descriptor wrote
					err = withFile(orderPath, unix.O_RDWR, func(fd int) error {
						if _, err := unix.Pwrite(fd, []byte(p), 0); err != nil {
							return err
						}
						buf := make([]byte, 4*n)
						if k, err := unix.Pread(fd, buf, 0); err != nil || string(buf[:k]) != p {
							return fmt.Errorf("read back %q: %w", buf[:k], err)
						}
						return nil
					})
				case 2: // as a shell's `>` does: close the descriptor opened, then write through a dup
					err = asShell(orderPath, p)
				case 3: // empty
					err = withFile(orderPath, unix.O_WRONLY|unix.O_TRUNC, func(int) error { return nil })
				case 4: // refused: not a plan
					err, want = withFile(orderPath, unix.O_WRONLY|unix.O_TRUNC, func(fd int) error { return writeAll(fd, "1 x") }), syscall.EINVAL
				case 5: // refused: longer than any plan
					err = withFile(orderPath, unix.O_WRONLY|unix.O_TRUNC, func(fd int) error {
						if _, err := unix.Pwrite(fd, []byte("1"), order.MaxBytes(n)); !errors.Is(err, syscall.EFBIG) {
							return fmt.Errorf("a write past the limit: %w, want EFBIG", err)
						}
						return nil
					})
					want = syscall.EFBIG
				}
				if !errors.Is(err, want) {
					t.Errorf("round %d of a writer of its own: %v, want %v", i, err, want)
				}
			}
		})
	}
	for range 2 { // readers of the plans and the stats
		wg.Go(func() {
			for range rounds {
				if b, err := os.ReadFile(orderPath); err != nil || !readBack[string(b)] {
					t.Errorf("the order file reads %q, %v; want a plan written", b, err)
				}
				b, err := os.ReadFile(queuePath)
				if err == nil {
					_, err = chunksIn(string(b), base, half)
				}
				if err != nil {
					t.Errorf("the queue reads %d bytes: %v", len(b), err)
				}
				var st wire.Stats
				if b, err := os.ReadFile(filepath.Join(mnt, ".vidfs", "stats")); err != nil || json.Unmarshal(b, &st) != nil {
					t.Errorf("the stats: %v, %q", err, b)
				}
			}
		})
	}
	hdr, S := int64(len(f.lay.NpyHeader())), int64(f.lay.Spec.SampleBytes())
	for w := range 2 { // readers of samples
		wg.Go(func() {
			err := withFile(filepath.Join(mnt, "clips.npy"), unix.O_RDONLY, func(fd int) error {
				buf := make([]byte, S)
				for i := range rounds {
					s := half + (w*7+i*3)%(n-half)
					k, err := unix.Pread(fd, buf, hdr+int64(s)*S)
					for errors.Is(err, syscall.EINTR) {
						// A signal (the Go runtime's preemption, SIGURG) reached this thread while the
						// read waited on the mount: the kernel interrupts the FUSE request. os.File
						// retries such reads; unix.Pread does not.
						k, err = unix.Pread(fd, buf, hdr+int64(s)*S)
					}
					if err != nil || int64(k) != S || string(buf) != string(want(f, s)) {
						t.Errorf("sample %d: %d bytes, %v, or not its bytes", s, k, err)
					}
				}
				return nil
			})
			if err != nil {
				t.Errorf("reading samples: %v", err)
			}
		})
	}
	wg.Wait()

	for _, fd := range []int{shared, sharedQueue} {
		if err := unix.Close(fd); err != nil {
			t.Errorf("closing a shared descriptor: %v", err)
		}
	}
	if b, err := os.ReadFile(orderPath); err != nil || !readBack[string(b)] {
		t.Errorf("at the end the order file reads %q, %v; want a plan written", b, err)
	}
	last := replacingPlan(5, n)
	if err := os.WriteFile(orderPath, []byte(last), 0); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(orderPath); err != nil || string(b) != planText(strings.Fields(last)) {
		t.Errorf("after the last plan written the order file reads %q, %v", b, err)
	}
	b, err := os.ReadFile(queuePath)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := chunksIn(string(b), base, half)
	if err != nil {
		t.Fatalf("at the end the queue reads %d bytes: %v", len(b), err)
	}
	if len(cs) != (sharedAppenders+ownAppenders)*rounds {
		t.Errorf("the queue holds %d chunks, want the %d appended, each once", len(cs), (sharedAppenders+ownAppenders)*rounds)
	}
	for w := range sharedAppenders + ownAppenders {
		var mine []int
		for _, c := range cs {
			if c/rounds == w {
				mine = append(mine, c)
			}
		}
		if !slices.IsSorted(mine) {
			t.Errorf("writer %d's chunks in the queue out of the order it appended them: %v", w, mine)
		}
	}
	if st := f.Stats(); st.Plan.Length != n+len(cs)*3+3 {
		t.Errorf("plans %d long in all, want %d", st.Plan.Length, n+len(cs)*3+3)
	}
}

// TestPendingEmptyComesFirst: a plan opened to be replaced and closed with nothing written,
// while a dup of that descriptor stays open (so that the kernel sends no release yet), is
// emptied before what is written after that close, not after it: a plan written next is the one
// in force, and one appended next is appended to an empty plan.
func TestPendingEmptyComesFirst(t *testing.T) {
	f, _ := fakeFS(t, 40, 1, nil)
	mnt := mountFake(t, f)
	orderPath := filepath.Join(mnt, ".vidfs", "order")
	for _, c := range []struct {
		flag       int
		write, got string
	}{{os.O_TRUNC, "5 6", "5 6\n"}, {os.O_APPEND, "7", "7\n"}} {
		if err := os.WriteFile(orderPath, []byte("1 2 3"), 0); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(orderPath, unix.O_WRONLY|unix.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		held, err := unix.Dup(fd)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Close(fd); err != nil {
			t.Errorf("closing with nothing written: %v", err)
		}
		if err := withFile(orderPath, unix.O_WRONLY|c.flag, func(fd int) error { return writeAll(fd, c.write) }); err != nil {
			t.Errorf("writing %q: %v", c.write, err)
		}
		if b, err := os.ReadFile(orderPath); err != nil || string(b) != c.got {
			t.Errorf("after an emptying close and %q written (flag %#x) the plan reads %q, %v; want %q", c.write, c.flag, b, err, c.got)
		}
		if err := unix.Close(held); err != nil {
			t.Errorf("closing the dup: %v", err)
		}
	}
}

// TestPlansBound: a plan that would take the entries of all plans past the mount's bound
// (Config.PlanMaxEntries) is refused whole, its close failing with ENOSPC, and the plan in
// force stays; a plan within it is taken.
func TestPlansBound(t *testing.T) {
	f, _ := fakeFSWith(t, 30, 1, nil, OnErrorEIO, func(c *Config) { c.PlanMaxEntries = 20 })
	mnt := mountFake(t, f)
	path := func(name string) string { return filepath.Join(mnt, ".vidfs", "plans", name) }
	if err := os.WriteFile(path("a"), []byte(numbers(0, 15)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path("b"), []byte(numbers(0, 10)), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("a plan past the bound: %v; want ENOSPC", err)
	}
	err := withFile(path("a"), os.O_WRONLY|os.O_APPEND, func(fd int) error { return writeAll(fd, numbers(0, 10)) })
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("an append past the bound: %v; want ENOSPC", err)
	}
	if n, _ := f.plans.Len("a"); n != 15 {
		t.Errorf("plan a has %d entries after a refused append, want 15", n)
	}
	if n, _ := f.plans.Len("b"); n != 0 {
		t.Errorf("plan b has %d entries after it was refused, want none", n)
	}
	if err := os.WriteFile(path("b"), []byte(numbers(0, 5)), 0o644); err != nil {
		t.Errorf("a plan within the bound: %v", err)
	}
}

// TestNpySize: a .npy plan's header gives the buffer its size, where the plan could be taken
// (one dimension of integers, not over the plan's bound); anything else gives none.
func TestNpySize(t *testing.T) {
	head := npy.Header{Descr: "<i4", Shape: []int{1000}}.Encode(64)
	head8 := npy.Header{Descr: "<i8", Shape: []int{3}}.Encode(64)
	for _, c := range []struct {
		head   []byte
		maxLen int
		want   int
	}{
		{head, 1 << 20, len(head) + 4000},
		{head, 999, 0},
		{head8, 1 << 20, len(head8) + 24},
		{npy.Header{Descr: "<i4", Shape: []int{5, 1 << 61}}.Encode(64), 1 << 20, 0},
		{npy.Header{Descr: "<i8", Shape: []int{1 << 62}}.Encode(64), 1 << 20, 0},
		{npy.Header{Descr: "<f8", Shape: []int{3}}.Encode(64), 1 << 20, 0},
		{[]byte("1 2 3\n"), 1 << 20, 0},
		{head[:5], 1 << 20, 0},
	} {
		if got := npySize(c.head, c.maxLen); got != c.want {
			t.Errorf("npySize(%q, %d) = %d, want %d", c.head, c.maxLen, got, c.want)
		}
	}
}
