package npy

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzDecode: whatever bytes a trainer writes as a plan, Decode neither panics nor reads past
// them: a header it accepts ends within the data, and written again with Encode (where its dtype
// can be written: Encode quotes it with ') reads back the same. The seeds are headers NumPy
// writes, of every version, and near misses.
func FuzzDecode(f *testing.F) {
	for _, h := range []Header{{Descr: "<i8", Shape: []int{3}}, {Descr: "|u1", Shape: []int{2, 3}, Fortran: true}, {Descr: "<f4"}} {
		f.Add(h.Encode(64))
	}
	f.Add(v2(`{"descr": "<u2", "shape": (3,), "fortran_order": False}`))
	f.Add(v2(`{'shape':(2,3),'descr':'>i4','fortran_order':False,}`))
	v3 := v2(`{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }`)
	v3[6] = 3
	f.Add(v3)
	f.Add([]byte("\x93NUMPY\x01\x00\xff\xff{"))
	f.Add([]byte("\x93NUMPY\x02\x00\xff\xff\xff\xff{"))
	f.Add([]byte("1 2 3"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, off, err := Decode(data)
		if err != nil {
			return
		}
		if off < 0 || off > len(data) {
			t.Fatalf("data starts at %d, outside the %d bytes", off, len(data))
		}
		for _, d := range h.Shape {
			if d < 0 {
				t.Fatalf("negative dimension in %v", h.Shape)
			}
		}
		if strings.ContainsAny(h.Descr, "'\n") {
			return
		}
		back, off2, err := Decode(h.Encode(64))
		if err != nil || fmt.Sprint(back) != fmt.Sprint(h) || off2%64 != 0 {
			t.Fatalf("%+v written again reads back as %+v, %d, %v", h, back, off2, err)
		}
	})
}
