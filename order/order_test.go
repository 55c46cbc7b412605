package order

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
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

// read observes a whole-sample read of sample s (of 100 bytes), through.
func read(tr *Tracker, s int) bool { return piece(tr, s, 100, time.Now()) }

// piece observes a read of n bytes of sample s (of 100 bytes) at now, through.
func piece(tr *Tracker, s int, n int64, now time.Time) bool {
	access := tr.Observe(s, n, 100, now)
	tr.Done(s)
	return access
}

func TestTrackerInOrder(t *testing.T) {
	tr := NewTracker(4, 8)
	tr.Replace([]int32{5, 3, 9, 1, 7, 0})
	if got := tr.Upcoming(nil, 3); fmt.Sprint(got) != "[5 3 9]" {
		t.Errorf("upcoming %v", got)
	}
	if tr.NextUse(9) != 2 || tr.NextUse(8) != -1 {
		t.Errorf("NextUse(9) = %d, NextUse(8) = %d", tr.NextUse(9), tr.NextUse(8))
	}
	for _, s := range []int{5, 3} {
		read(tr, s)
	}
	if pos, n := tr.Position(); pos != 2 || n != 6 {
		t.Errorf("position %d of %d, want 2 of 6", pos, n)
	}
	// Readers out of order within the window: 1 before 9.
	read(tr, 1)
	if pos, _ := tr.Position(); pos != 2 {
		t.Errorf("position %d after reading ahead, want 2", pos)
	}
	if got := tr.Upcoming(nil, 10); fmt.Sprint(got) != "[9 7 0]" {
		t.Errorf("upcoming %v, want [9 7 0]", got)
	}
	read(tr, 9)
	if pos, _ := tr.Position(); pos != 4 {
		t.Errorf("position %d, want 4", pos)
	}
	read(tr, 42) // not in the plan
	st := tr.Stats()
	if st.OnPlan != 4 || st.OffPlan != 1 || st.Accesses != 5 {
		t.Errorf("stats %+v", st)
	}
}

func TestTrackerPieces(t *testing.T) {
	tr := NewTracker(4, 8)
	tr.Replace([]int32{1, 2, 1})
	now := time.Now()
	// Sample 1 read in three pieces, in any order, is one access.
	if !piece(tr, 1, 40, now) || piece(tr, 1, 20, now) || piece(tr, 1, 40, now) {
		t.Error("pieces of one sample counted as several accesses")
	}
	if pos, _ := tr.Position(); pos != 1 {
		t.Errorf("position %d, want 1", pos)
	}
	// While a sample is being read in pieces it is due now, plan or no plan.
	if tr.NextUse(7) != -1 {
		t.Error("sample 7 due before any read")
	}
	piece(tr, 7, 10, time.Now())
	if tr.NextUse(7) != 0 {
		t.Errorf("NextUse of a sample being read = %d, want 0", tr.NextUse(7))
	}
	piece(tr, 7, 90, time.Now())
	if tr.NextUse(7) != -1 {
		t.Errorf("NextUse of a sample read through = %d, want -1", tr.NextUse(7))
	}
	// A new read of sample 1 once it was read through is the next occurrence.
	read(tr, 2)
	if !piece(tr, 1, 50, now) {
		t.Error("second reading of sample 1 not a new access")
	}
	if pos, _ := tr.Position(); pos != 3 {
		t.Errorf("position %d, want 3", pos)
	}
	// A partial read that stops: after the timeout the sample's next read is new.
	tr.Replace([]int32{4, 4})
	piece(tr, 4, 10, now)
	if !piece(tr, 4, 10, now.Add(3*time.Second)) {
		t.Error("read after the timeout not a new access")
	}
	if pos, _ := tr.Position(); pos != 2 {
		t.Errorf("position %d, want 2", pos)
	}
}

// TestTrackerReading: a sample is due now from the read that consumes its plan entry until the
// reader has it, so that nothing evicts it in between.
func TestTrackerReading(t *testing.T) {
	tr := NewTracker(4, 8)
	tr.Replace([]int32{5, 6})
	if !tr.Observe(5, 100, 100, time.Now()) {
		t.Fatal("first read not an access")
	}
	if pos, _ := tr.Position(); pos != 1 || tr.NextUse(5) != 0 {
		t.Errorf("position %d, NextUse(5) = %d while being read; want 1 and 0", pos, tr.NextUse(5))
	}
	tr.Done(5)
	if tr.NextUse(5) != -1 {
		t.Errorf("NextUse(5) = %d once read, want -1", tr.NextUse(5))
	}
}

func TestTrackerSkipsAndEpochs(t *testing.T) {
	tr := NewTracker(2, 4)
	tr.Replace([]int32{0, 1, 2, 3, 4, 5, 6, 7})
	// Entry 0 is never read; reads move on past the window and give it up.
	for _, s := range []int{1, 2, 3, 4} {
		read(tr, s)
	}
	if pos, _ := tr.Position(); pos != 5 {
		t.Errorf("position %d, want 5 (entry 0 given up)", pos)
	}
	if tr.Stats().Skipped != 1 {
		t.Errorf("skipped %d, want 1", tr.Stats().Skipped)
	}
	// The next epoch queued behind: Upcoming runs on into it.
	tr.Append([]int32{7, 6, 5})
	if got := tr.Upcoming(nil, 10); fmt.Sprint(got) != "[5 6 7]" {
		t.Errorf("upcoming %v, want [5 6 7] (each once)", got)
	}
	for _, s := range []int{5, 6, 7, 7, 6, 5} {
		read(tr, s)
	}
	if pos, n := tr.Position(); pos != n {
		t.Errorf("position %d of %d, want the end", pos, n)
	}
	// Replacing starts over.
	tr.Replace([]int32{2})
	if pos, n := tr.Position(); pos != 0 || n != 1 || tr.NextUse(2) != 0 {
		t.Errorf("after Replace: %d of %d, NextUse %d", pos, n, tr.NextUse(2))
	}
}
