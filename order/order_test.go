package order

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"
)

func npy(descr string, vals []int64, size int) []byte {
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }", descr, len(vals))
	total := (10 + len(dict) + 1 + 63) / 64 * 64
	h := make([]byte, total)
	copy(h, "\x93NUMPY\x01\x00")
	binary.LittleEndian.PutUint16(h[8:], uint16(total-10))
	copy(h[10:], dict)
	for i := 10 + len(dict); i < total-1; i++ {
		h[i] = ' '
	}
	h[total-1] = '\n'
	var b bytes.Buffer
	b.Write(h)
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
		{npy("<i8", []int64{2, 0, 4}, 8), "[2 0 4]"},
		{npy("<i4", []int64{1, 3}, 4), "[1 3]"},
		{npy("<i4", nil, 4), "[]"},
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
		{npy("<i8", []int64{1, 7}, 8), "entry 1, 7: out of range"},
		{npy("<f8", []int64{1}, 8), "want a 1-D array of integers"},
		{npy("<i8", []int64{1, 2}, 8)[:140], "bytes of data for 2 entries"},
		{[]byte("\x93NUMPY\x01\x00\xff\xff{"), "header runs past the end"},
	} {
		got, err := Parse(tc.in, 5)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Parse(%.30q) = %v, %v; want an error saying %q", tc.in, got, err, tc.says)
		}
	}
}

// read observes a whole-sample read of sample s (of 100 bytes).
func read(tr *Tracker, s int) bool { return tr.Observe(s, 0, 100, 100, time.Now()) }

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
	if !tr.Observe(1, 0, 40, 100, now) || tr.Observe(1, 80, 20, 100, now) || tr.Observe(1, 40, 40, 100, now) {
		t.Error("pieces of one sample counted as several accesses")
	}
	if pos, _ := tr.Position(); pos != 1 {
		t.Errorf("position %d, want 1", pos)
	}
	// While a sample is being read in pieces it is due now, plan or no plan.
	if tr.NextUse(7) != -1 {
		t.Error("sample 7 due before any read")
	}
	tr.Observe(7, 0, 10, 100, time.Now())
	if tr.NextUse(7) != 0 {
		t.Errorf("NextUse of a sample being read = %d, want 0", tr.NextUse(7))
	}
	tr.Observe(7, 10, 90, 100, time.Now())
	if tr.NextUse(7) != -1 {
		t.Errorf("NextUse of a sample read through = %d, want -1", tr.NextUse(7))
	}
	// A new read of sample 1 once it was read through is the next occurrence.
	read(tr, 2)
	if !tr.Observe(1, 0, 50, 100, now) {
		t.Error("second reading of sample 1 not a new access")
	}
	if pos, _ := tr.Position(); pos != 3 {
		t.Errorf("position %d, want 3", pos)
	}
	// A partial read that stops: after the timeout the sample's next read is new.
	tr.Replace([]int32{4, 4})
	tr.Observe(4, 0, 10, 100, now)
	if !tr.Observe(4, 0, 10, 100, now.Add(3*time.Second)) {
		t.Error("read after the timeout not a new access")
	}
	if pos, _ := tr.Position(); pos != 2 {
		t.Errorf("position %d, want 2", pos)
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
