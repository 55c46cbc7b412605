package order

import (
	"bytes"
	"slices"
	"strconv"
	"testing"

	"github.com/vidfs/vidfs/internal/npy"
)

// FuzzParse feeds Parse what users may write to a plan file: it never panics, and what it
// accepts is a plan of the dataset (every entry in [0, n), at most MaxLen(n) of them) that reads
// back the same written as text (what reading a plan file gives).
func FuzzParse(f *testing.F) {
	hdr := func(dict string) []byte { // a version 1 header holding dict as it is
		b := []byte("\x93NUMPY\x01\x00")
		b = append(b, byte(len(dict)+1), byte((len(dict)+1)>>8))
		return append(append(b, dict...), '\n')
	}
	for _, seed := range [][]byte{
		nil,
		[]byte("0 1 2 3\n"),
		[]byte("  4\t3\n\n2 1 0  "),
		[]byte("0 1 x"),
		[]byte("-1 5 99999999999999999999"),
		[]byte("+3 007 1e3 0x1"),
		npyFile("<i4", []int64{0, 1, 2, 3, 4}, 4),
		npyFile("<i8", []int64{4, 3, 2, 1, 0}, 8),
		npyFile("<i8", []int64{0, -1, 1 << 40}, 8),
		npyFile("<u8", []int64{-1}, 8),
		npyFile("|u1", nil, 1),
		npyFile(">i4", []int64{1}, 4),
		npy.Header{Descr: "<i4", Shape: []int{2, 2}}.Encode(64),
		append(npy.Header{Descr: "<i4", Fortran: true, Shape: []int{1}}.Encode(64), 1, 0, 0, 0),
		append(hdr("{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }"), 1, 0, 2, 0, 3, 0),
		append(hdr("{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,), }"), 1, 0, 0, 0),
		append(hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }"), 0, 0, 0x80, 0x3f),
		hdr("{'descr': '<i4', 'shape': (1,)"),
		hdr("{'descr': '<i4', 'fortran_order': maybe, 'shape': (), }"),
		[]byte("\x93NUMPY\x02\x00\xff\xff\xff\xff{"),
		[]byte("\x93NUMPY\x01"),
		[]byte("\x93NUMPY\x09\x00\x00\x00"),
	} {
		f.Add(seed, 5)
	}
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		n = 1 + n&0xffff // a dataset of 1 to 65,536 samples
		plan, err := Parse(data, n)
		if err != nil {
			if plan != nil {
				t.Errorf("Parse refused the plan (%v) yet returned %d entries", err, len(plan))
			}
			return
		}
		if len(plan) > MaxLen(n) {
			t.Fatalf("Parse accepted %d entries, more than MaxLen(%d) = %d", len(plan), n, MaxLen(n))
		}
		var text bytes.Buffer
		for _, v := range plan {
			if v < 0 || int(v) >= n {
				t.Fatalf("Parse accepted entry %d, out of [0, %d)", v, n)
			}
			text.WriteString(strconv.Itoa(int(v)) + " ")
		}
		again, err := Parse(text.Bytes(), n)
		if err != nil || !slices.Equal(again, plan) {
			t.Fatalf("the plan accepted, written as text, reads back as %v, %v", again, err)
		}
	})
}
