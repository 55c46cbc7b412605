package layout

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// NpyHeader returns the header of a NumPy .npy file (format 1.0) holding a C-ordered uint8
// array of the given shape. Its length is a multiple of 64, so the data that follows is aligned
// for memory mapping, as NumPy itself writes it.
func NpyHeader(shape ...int) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	dict := fmt.Sprintf("{'descr': '|u1', 'fortran_order': False, 'shape': (%s), }", tuple)
	const prefix = 10 // magic (6), version (2), header length (2)
	total := (prefix + len(dict) + 1 + 63) / 64 * 64
	h := make([]byte, total)
	copy(h, "\x93NUMPY\x01\x00")
	binary.LittleEndian.PutUint16(h[8:], uint16(total-prefix))
	n := copy(h[prefix:], dict)
	for i := prefix + n; i < total-1; i++ {
		h[i] = ' '
	}
	h[total-1] = '\n'
	return h
}
