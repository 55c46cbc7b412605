package npy

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// v2 builds a version 2 header around dict, as NumPy writes one when the dict is long.
func v2(dict string) []byte {
	b := []byte("\x93NUMPY\x02\x00\x00\x00\x00\x00" + dict + "\n")
	binary.LittleEndian.PutUint32(b[8:], uint32(len(dict)+1))
	return b
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{v2(`{"descr": "<u2", "shape": (3,), "fortran_order": False}`), "{<u2 false [3]} 68"},
		{v2(`{'shape':(2,3),'descr':'>i4','fortran_order':False,}`), "{>i4 false [2 3]} 65"},
	} {
		h, off, err := Decode(tc.in)
		if got := fmt.Sprint(h, " ", off); err != nil || got != tc.want {
			t.Errorf("Decode(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	// Each bad header, and what the error must say.
	bad := map[string][]byte{
		"no NUMPY magic":               []byte("1 2 3"),
		"short header":                 []byte("\x93NUMPY\x01"),
		"unsupported format version 9": []byte("\x93NUMPY\x09\x00\x10\x00"),
		"runs past the end":            []byte("\x93NUMPY\x01\x00\xff\xff{"),
		`no "fortran_order"`:           v2(`{'descr': '<i8', 'shape': (3,), }`),
		"want True or False":           v2(`{'descr': '<i8', 'fortran_order': Maybe, 'shape': (3,), }`),
		"want a dimension":             v2(`{'descr': '<i8', 'fortran_order': False, 'shape': (x,), }`),
		`unknown key "extra"`:          v2(`{'descr': '<i8', 'fortran_order': False, 'shape': (3,), 'extra': 1}`),
		"unterminated string":          v2(`{'descr': '<i8`),
		`want "{"`:                     v2(`['descr']`),
	}
	for says, in := range bad {
		if _, _, err := Decode(in); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("Decode(%q): %v, want an error saying %q", in, err, says)
		}
	}
}

func TestEncode(t *testing.T) {
	for _, tc := range []struct {
		h     Header
		align int
		size  int
		dict  string
	}{
		{Header{Descr: "|u1", Shape: []int{7}}, 64, 128, "{'descr': '|u1', 'fortran_order': False, 'shape': (7,), }"},
		{Header{Descr: "|u1", Shape: []int{4, 8, 6, 3}}, 64, 128, "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 8, 6, 3), }"},
		{Header{Descr: "<i8", Shape: []int{11, 2}, Fortran: true}, 4096, 4096, "{'descr': '<i8', 'fortran_order': True, 'shape': (11, 2), }"},
		{Header{Descr: "<f4"}, 64, 128, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }"},
	} {
		b := tc.h.Encode(tc.align)
		if len(b) != tc.size || string(b[:8]) != "\x93NUMPY\x01\x00" || int(binary.LittleEndian.Uint16(b[8:]))+10 != len(b) || b[len(b)-1] != '\n' {
			t.Errorf("Encode(%+v, %d): bad framing, %d bytes, want %d: %q", tc.h, tc.align, len(b), tc.size, b)
		}
		if got := strings.TrimRight(string(b[10:]), " \n"); got != tc.dict {
			t.Errorf("Encode(%+v) dict %q, want %q", tc.h, got, tc.dict)
		}
		back, off, err := Decode(append(b, 1, 2, 3))
		if err != nil || off != len(b) || fmt.Sprint(back) != fmt.Sprint(tc.h) {
			t.Errorf("Decode(Encode(%+v)) = %+v, %d, %v", tc.h, back, off, err)
		}
	}
}
