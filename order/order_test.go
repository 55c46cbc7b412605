package order

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vidfs/vidfs/internal/npy"
)

// npyFile is a .npy file of vals stored as integers of size bytes, as np.save writes one.
func npyFile(descr string, vals []int64, size int) []byte {
	var b bytes.Buffer
	b.Write(npy.Header{Descr: descr, Shape: []int{len(vals)}}.Encode(64))
	for _, v := range vals {
		switch size {
		case 4:
			binary.Write(&b, binary.LittleEndian, int32(v))
		case 8:
			binary.Write(&b, binary.LittleEndian, v)
		}
	}
	return b.Bytes()
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{[]byte("3 1 2\n0"), "[3 1 2 0]"},
		{[]byte("  \n"), "[]"},
		{[]byte("4\t4\r\n4"), "[4 4 4]"},
		{npyFile("<i8", []int64{2, 0, 4}, 8), "[2 0 4]"},
		{npyFile("<i4", []int64{1, 3}, 4), "[1 3]"},
		{npyFile("<i4", nil, 4), "[]"},
	} {
		got, err := Parse(tc.in, 5)
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in   []byte
		says string
	}{
		{[]byte("1 2 five"), `entry 2, "five": not an integer`},
		{[]byte("1 5"), "entry 1, 5: out of range [0, 5)"},
		{[]byte("-1"), "out of range"},
		{[]byte("1,2,3"), "not an integer"},
		{[]byte(strings.Repeat("1 ", 1<<20+1)), "more than 1048576"},
		{npyFile("<i8", []int64{1, 7}, 8), "entry 1, 7: out of range"},
		{npyFile("<f8", []int64{1}, 8), "want a 1-D array of integers, got dtype <f8"},
		{npyFile("<i8", []int64{1, 2}, 8)[:140], "bytes of data for 2 entries"},
		{[]byte("\x93NUMPY\x01\x00\xff\xff{"), "header runs past the end"},
	} {
		got, err := Parse(tc.in, 5)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Parse(%.30q) = %v, %v; want an error saying %q", tc.in, got, err, tc.says)
		}
	}
}

// read observes a whole-sample read of sample s (of 100 bytes), through, and says whether it was
// an access.
func read(ps *Plans, s int) bool { return piece(ps, s, 100, time.Now()) }

// piece observes a read of n bytes of sample s (of 100 bytes) at now, through.
func piece(ps *Plans, s int, n int64, now time.Time) bool {
	access, _ := ps.Observe(s, n, 100, now, nil)
	ps.Done(s)
	return access
}

// readAt observes a whole read of sample s at now and says which plan it counted toward.
func readAt(ps *Plans, s int, now time.Time) string {
	_, plan := ps.Observe(s, 100, 100, now, nil)
	ps.Done(s)
	return plan
}

// position is where the plan called name stands, and its length.
func position(ps *Plans, name string) (int, int) {
	for _, p := range ps.Stats().Plans {
		if p.Name == name {
			return p.Position, p.Length
		}
	}
	return -1, -1
}

// one returns Plans holding entries as its default plan.
func one(window, horizon int, entries ...int32) *Plans {
	ps := NewPlans(window, horizon, 0)
	ps.Set(DefaultPlan, entries, false)
	return ps
}

func TestPlanInOrder(t *testing.T) {
	ps := one(4, 8, 5, 3, 9, 1, 7, 0)
	if got := ps.Upcoming(nil, 3); fmt.Sprint(got) != "[5 3 9]" {
		t.Errorf("upcoming %v", got)
	}
	// Due in milliseconds at the pace assumed before any read, 100 samples a second.
	if ps.DueInHorizon(9) != 20 || ps.DueInHorizon(8) != -1 {
		t.Errorf("DueInHorizon(9) = %d, DueInHorizon(8) = %d; want 20 and -1", ps.DueInHorizon(9), ps.DueInHorizon(8))
	}
	for _, s := range []int{5, 3} {
		read(ps, s)
	}
	if pos, n := position(ps, DefaultPlan); pos != 2 || n != 6 {
		t.Errorf("position %d of %d, want 2 of 6", pos, n)
	}
	// Readers out of order within the window: 1 before 9.
	read(ps, 1)
	if pos, _ := position(ps, DefaultPlan); pos != 2 {
		t.Errorf("position %d after reading ahead, want 2", pos)
	}
	if got := ps.Upcoming(nil, 10); fmt.Sprint(got) != "[9 7 0]" {
		t.Errorf("upcoming %v, want [9 7 0]", got)
	}
	read(ps, 9)
	if pos, _ := position(ps, DefaultPlan); pos != 4 {
		t.Errorf("position %d, want 4", pos)
	}
	read(ps, 42) // not in the plan
	st := ps.Stats()
	if st.OnPlan != 4 || st.OffPlan != 1 || st.Accesses != 5 || st.Plans[0].OnPlan != 4 {
		t.Errorf("stats %+v", st)
	}
}

func TestPlanPieces(t *testing.T) {
	ps := one(4, 8, 1, 2, 1)
	now := time.Now()
	// Sample 1 read in three pieces, in any order, is one access.
	if !piece(ps, 1, 40, now) || piece(ps, 1, 20, now) || piece(ps, 1, 40, now) {
		t.Error("pieces of one sample counted as several accesses")
	}
	if pos, _ := position(ps, DefaultPlan); pos != 1 {
		t.Errorf("position %d, want 1", pos)
	}
	// While a sample is being read in pieces it is due now, plan or no plan.
	if ps.DueInHorizon(7) != -1 {
		t.Error("sample 7 due before any read")
	}
	piece(ps, 7, 10, time.Now())
	if ps.DueInHorizon(7) != 0 {
		t.Errorf("DueInHorizon of a sample being read = %d, want 0", ps.DueInHorizon(7))
	}
	piece(ps, 7, 90, time.Now())
	if ps.DueInHorizon(7) != -1 {
		t.Errorf("DueInHorizon of a sample read through = %d, want -1", ps.DueInHorizon(7))
	}
	// A new read of sample 1 once it was read through is the next occurrence.
	read(ps, 2)
	if !piece(ps, 1, 50, now) {
		t.Error("second reading of sample 1 not a new access")
	}
	if pos, _ := position(ps, DefaultPlan); pos != 3 {
		t.Errorf("position %d, want 3", pos)
	}
	// A partial read that stops: after the timeout the sample's next read is new.
	ps.Set(DefaultPlan, []int32{4, 4}, false)
	piece(ps, 4, 10, now)
	if !piece(ps, 4, 10, now.Add(3*time.Second)) {
		t.Error("read after the timeout not a new access")
	}
	if pos, _ := position(ps, DefaultPlan); pos != 2 {
		t.Errorf("position %d, want 2", pos)
	}
}

// TestPlanReading: a sample is due now from the read that consumes its plan entry until the
// reader has it, so that nothing evicts it in between.
func TestPlanReading(t *testing.T) {
	ps := one(4, 8, 5, 6)
	if access, plan := ps.Observe(5, 100, 100, time.Now(), nil); !access || plan != DefaultPlan {
		t.Fatalf("first read: access %v, plan %q", access, plan)
	}
	if pos, _ := position(ps, DefaultPlan); pos != 1 || ps.DueInHorizon(5) != 0 {
		t.Errorf("position %d, DueInHorizon(5) = %d while being read; want 1 and 0", pos, ps.DueInHorizon(5))
	}
	ps.Done(5)
	if ps.DueInHorizon(5) != -1 {
		t.Errorf("DueInHorizon(5) = %d once read, want -1", ps.DueInHorizon(5))
	}
}

func TestPlanSkipsAndEpochs(t *testing.T) {
	ps := one(2, 4, 0, 1, 2, 3, 4, 5, 6, 7)
	// Entry 0 is never read; reads move on past the window and give it up.
	for _, s := range []int{1, 2, 3, 4} {
		read(ps, s)
	}
	if pos, _ := position(ps, DefaultPlan); pos != 5 {
		t.Errorf("position %d, want 5 (entry 0 given up)", pos)
	}
	if ps.Stats().Plans[0].Skipped != 1 {
		t.Errorf("skipped %d, want 1", ps.Stats().Plans[0].Skipped)
	}
	// The next epoch queued behind: Upcoming runs on into it.
	ps.Set(DefaultPlan, []int32{7, 6, 5}, true)
	if got := ps.Upcoming(nil, 10); fmt.Sprint(got) != "[5 6 7]" {
		t.Errorf("upcoming %v, want [5 6 7] (each once)", got)
	}
	for _, s := range []int{5, 6, 7, 7, 6, 5} {
		read(ps, s)
	}
	if pos, n := position(ps, DefaultPlan); pos != n {
		t.Errorf("position %d of %d, want the end", pos, n)
	}
	// Replacing starts over.
	ps.Set(DefaultPlan, []int32{2}, false)
	if pos, n := position(ps, DefaultPlan); pos != 0 || n != 1 || ps.DueInHorizon(2) != 0 || ps.Stats().Plans[0].Writes != 3 {
		t.Errorf("after a new plan: %d of %d, DueInHorizon %d, %d writes", pos, n, ps.DueInHorizon(2), ps.Stats().Plans[0].Writes)
	}
}

// TestPlansShare: two plans; a sample is due as soon as either wants it, a read counts toward the
// plan that has it due soonest, and a sample both want comes up once.
func TestPlansShare(t *testing.T) {
	ps := NewPlans(8, 16, 0)
	ps.Set("rank0", []int32{1, 2, 3, 4}, false)
	ps.Set("rank1", []int32{9, 8, 3, 7}, false)
	if got := ps.Upcoming(nil, 10); fmt.Sprint(got) != "[1 9 2 8 3 4 7]" {
		t.Errorf("upcoming %v, want the plans merged, 3 once", got)
	}
	if ps.DueInHorizon(3) != 20 || ps.DueInHorizon(8) != 10 {
		t.Errorf("DueInHorizon(3) = %d, DueInHorizon(8) = %d; want 20 and 10", ps.DueInHorizon(3), ps.DueInHorizon(8))
	}
	now := time.Now()
	for _, s := range []int{1, 9, 8} {
		readAt(ps, s, now)
	}
	// 3 is next in rank1 (its position is at 3) and second in rank0: rank1's.
	if plan := readAt(ps, 3, now); plan != "rank1" {
		t.Errorf("read of 3 counted toward %q, want rank1", plan)
	}
	if plan := readAt(ps, 3, now); plan != "rank0" {
		t.Errorf("second read of 3 counted toward %q, want rank0", plan)
	}
	if plan := readAt(ps, 42, now); plan != "" {
		t.Errorf("read of a sample no plan has counted toward %q", plan)
	}
	if !ps.Remove("rank1") || ps.Remove("rank1") || fmt.Sprint(ps.Names()) != "[rank0]" {
		t.Errorf("after removing rank1: %v", ps.Names())
	}
	if ps.DueInHorizon(7) != -1 {
		t.Errorf("a removed plan's sample is due in %d ms", ps.DueInHorizon(7))
	}
}

// TestPlansPace: a plan read four times as fast as another gets about four times its share of
// what is due next.
func TestPlansPace(t *testing.T) {
	ps := NewPlans(8, 1000, 0)
	fast, slow := make([]int32, 200), make([]int32, 200)
	for i := range fast {
		fast[i], slow[i] = int32(i), int32(1000+i)
	}
	ps.Set("fast", fast, false)
	ps.Set("slow", slow, false)
	share := func(ps *Plans, when string, want int) {
		t.Helper()
		n := map[bool]int{}
		for _, s := range ps.Upcoming(nil, 50) {
			n[s < 1000]++
		}
		if n[true] < want-5 || n[true] > want+5 {
			t.Errorf("%s: of the next 50 samples, %d are the fast plan's and %d the slow one's; want about %d and %d", when, n[true], n[false], want, 50-want)
		}
	}
	// The burst of a DataLoader's first batches does not pass for a pace.
	ps2 := NewPlans(8, 1000, 0)
	ps2.Set("fast", fast, false)
	ps2.Set("slow", slow, false)
	t0 := time.Now()
	for i := range 20 {
		readAt(ps2, i, t0.Add(time.Duration(i)*time.Millisecond))
	}
	share(ps2, "a burst", 25)
	for i := range 30 { // over 3 s: a pace is not trusted sooner
		for j := range 4 {
			readAt(ps, 4*i+j, t0.Add(time.Duration(4*i+j)*25*time.Millisecond)) // 40 a second
		}
		readAt(ps, 1000+i, t0.Add(time.Duration(i)*100*time.Millisecond)) // 10 a second
	}
	share(ps, "reading", 40)
	// A pause (an epoch's end, a validation pass) does not make a reader look slow, and a burst
	// of a few reads as DataLoader workers start does not make it look fast.
	t1 := t0.Add(time.Minute)
	for i := range 8 {
		readAt(ps, 120+i, t1.Add(time.Duration(i)*25*time.Millisecond))
		readAt(ps, 1030+i, t1.Add(time.Duration(i)*time.Millisecond))
	}
	share(ps, "after a pause and a burst", 40)
}

// TestPlansOwnReads: a read by a reader whose own plan has the sample due counts toward that
// plan, even when another plan (another rank's next epoch) has it due sooner.
func TestPlansOwnReads(t *testing.T) {
	ps := NewPlans(4, 100, 0)
	ps.Set("rank0", []int32{1, 2, 3, 4, 5, 6, 7, 8}, false)
	ps.Set("rank1", []int32{8, 9, 10}, false)
	if _, plan := ps.Observe(8, 100, 100, time.Now(), []string{"rank0"}); plan != "rank0" {
		t.Errorf("rank0's read of sample 8 counted toward %q", plan)
	}
	ps.Done(8)
	if _, plan := ps.Observe(9, 100, 100, time.Now(), []string{"rank0"}); plan != "rank1" {
		t.Errorf("rank0's read of sample 9, which only rank1 has, counted toward %q", plan)
	}
	ps.Done(9)
	if _, plan := ps.Observe(8, 100, 100, time.Now(), nil); plan != "rank1" {
		t.Errorf("an unknown reader's read of sample 8 counted toward %q, not the plan with it due soonest", plan)
	}
	ps.Done(8)
}

// TestPlansIdle: a plan nobody reads or writes for the idle time expires: it stops being due,
// its entries are let go (reads of its samples count toward no plan), and it is followed again
// once written again.
func TestPlansIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := NewPlans(8, 16, 10*time.Minute)
		ps.Set("job", []int32{1, 2, 3}, false)
		readAt(ps, 1, time.Now())
		time.Sleep(11 * time.Minute)
		if st := ps.Stats().Plans[0]; ps.DueInHorizon(2) != -1 || len(ps.Upcoming(nil, 5)) != 0 || st.Active || !st.Expired || st.Length != 0 {
			t.Errorf("an idle plan: DueInHorizon(2) = %d, upcoming %v, stats %+v", ps.DueInHorizon(2), ps.Upcoming(nil, 5), st)
		}
		if e, ok := ps.Entries("job"); !ok || len(e) != 0 {
			t.Errorf("an expired plan's entries: %v, %v; want none, and the plan still named", e, ok)
		}
		if plan := readAt(ps, 2, time.Now()); plan != "" {
			t.Errorf("read of an expired plan's sample counted toward %q", plan)
		}
		ps.Set("job", []int32{2, 3}, true) // appended to: the plan anew
		if plan := readAt(ps, 2, time.Now()); plan != "job" || ps.DueInHorizon(3) < 0 || ps.Stats().Plans[0].Expired {
			t.Errorf("read of a rewritten expired plan's sample counted toward %q; DueInHorizon(3) = %d", plan, ps.DueInHorizon(3))
		}
	})
}

// TestPlansExpiredDropped: past maxExpired expired plans, the oldest are dropped whole.
func TestPlansExpiredDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := NewPlans(8, 16, time.Second)
		for i := range maxExpired + 10 {
			ps.Set(fmt.Sprint("job-", i), []int32{1, 2}, false)
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if names := ps.Names(); len(names) != maxExpired || slices.Contains(names, "job-9") || !slices.Contains(names, "job-10") {
			t.Errorf("%d plans named after %d expired; want the last %d", len(names), maxExpired+10, maxExpired)
		}
	})
}

// TestPlansMaxEntries: a plan that would take the plans' entries past the bound is refused
// whole, the plan in force staying; expired plans' entries do not count.
func TestPlansMaxEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := NewPlans(8, 16, time.Minute)
		ps.SetMaxEntries(10)
		if err := ps.Set("a", inOrder(6), false); err != nil {
			t.Fatal(err)
		}
		if err := ps.Set("b", inOrder(5), false); !errors.Is(err, ErrTooManyEntries) || !strings.Contains(err.Error(), "10") {
			t.Errorf("a plan past the bound: %v; want ErrTooManyEntries, naming the bound", err)
		}
		if err := ps.Set("a", inOrder(5), true); !errors.Is(err, ErrTooManyEntries) {
			t.Errorf("an append past the bound: %v; want ErrTooManyEntries", err)
		}
		if _, ok := ps.Len("b"); ok {
			t.Error("a refused plan was made")
		}
		if n, _ := ps.Len("a"); n != 6 {
			t.Errorf("the plan in force has %d entries after a refused append, want 6", n)
		}
		if err := ps.Set("a", inOrder(10), false); err != nil { // replaces its own 6
			t.Errorf("a plan replacing one within the bound: %v", err)
		}
		time.Sleep(2 * time.Minute) // a expires
		synctest.Wait()
		if err := ps.Set("b", inOrder(10), false); err != nil {
			t.Errorf("a plan within the bound once the other expired: %v", err)
		}
	})
}

func TestValidName(t *testing.T) {
	for _, n := range []string{"rank0", "job-7.rank3", "default", "_x"} {
		if err := ValidName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for _, n := range []string{"", ".hidden", "-x", "a/b", strings.Repeat("x", 65), "sp ace"} {
		if ValidName(n) == nil {
			t.Errorf("%q accepted", n)
		}
	}
}

// TestPlansDue: Due looks past the prefetch horizon, over the whole plan, in plan order;
// consumed entries and samples no plan holds are not due.
func TestPlansDue(t *testing.T) {
	ps := NewPlans(4, 16, 0)
	entries := make([]int32, 1000)
	for i := range entries {
		entries[i] = int32(999 - i)
	}
	ps.Set("p", entries, false)
	if ps.DueInHorizon(10) != -1 || ps.Due(10) <= ps.Due(500) || ps.Due(500) <= ps.Due(990) {
		t.Errorf("DueInHorizon(10) %d; Due 10, 500, 990: %d, %d, %d; want -1 and decreasing",
			ps.DueInHorizon(10), ps.Due(10), ps.Due(500), ps.Due(990))
	}
	readAt(ps, 999, time.Now())
	if ps.Due(999) != -1 {
		t.Errorf("a consumed sample due in %d ms", ps.Due(999))
	}
	ps.Set("p", []int32{2000, 2001}, true) // appended behind the rest
	if ps.Due(2000) <= ps.Due(0) || ps.Due(5000) != -1 {
		t.Errorf("Due 2000 (appended) %d, 0 (last of the first) %d, 5000 (nowhere) %d", ps.Due(2000), ps.Due(0), ps.Due(5000))
	}
}
