// Package order turns the trainer's plan (the sample indices it will read, in order) and the
// reads vidfs observes into what to decode next.
package order

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
)

// MaxLen is the longest plan accepted for n samples: 64 epochs, and never fewer than a million
// entries. Anything longer is taken for a mistake.
func MaxLen(n int) int { return max(64*n, 1<<20) }

// MaxBytes bounds the size of an order file for n samples (text with 20-digit numbers).
func MaxBytes(n int) int64 { return int64(MaxLen(n))*21 + 4096 }

// Parse reads a plan for a dataset of n samples: either text, integers separated by white space,
// or a NumPy .npy file holding a 1-D array of integers. Every index must lie in [0, n) and the
// plan may hold at most MaxLen(n) entries; otherwise the whole plan is refused with an error
// that says why. An empty input is an empty plan.
func Parse(data []byte, n int) ([]int32, error) {
	if bytes.HasPrefix(data, []byte("\x93NUMPY")) {
		return parseNpy(data, n)
	}
	return parseText(data, n)
}

func parseText(data []byte, n int) ([]int32, error) {
	fields := bytes.Fields(data)
	if len(fields) > MaxLen(n) {
		return nil, fmt.Errorf("%d entries: more than %d (64 epochs of %d samples)", len(fields), MaxLen(n), n)
	}
	plan := make([]int32, len(fields))
	for i, f := range fields {
		v, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("entry %d, %q: not an integer", i, truncate(f))
		}
		if v < 0 || v >= int64(n) {
			return nil, fmt.Errorf("entry %d, %d: out of range [0, %d)", i, v, n)
		}
		plan[i] = int32(v)
	}
	return plan, nil
}

var npyDict = regexp.MustCompile(`^\{'descr': '([<>|=])([iu])([1248])', 'fortran_order': False, 'shape': \((\d+),\), \}\s*$`)

func parseNpy(data []byte, n int) ([]int32, error) {
	if len(data) < 10 || data[6] != 1 && data[6] != 2 {
		return nil, fmt.Errorf(".npy: unsupported format version")
	}
	hlen, start := int(binary.LittleEndian.Uint16(data[8:10])), 10
	if data[6] == 2 {
		if len(data) < 12 {
			return nil, fmt.Errorf(".npy: short header")
		}
		hlen, start = int(binary.LittleEndian.Uint32(data[8:12])), 12
	}
	if start+hlen > len(data) {
		return nil, fmt.Errorf(".npy: header runs past the end of the file")
	}
	m := npyDict.FindSubmatch(data[start : start+hlen])
	if m == nil {
		return nil, fmt.Errorf(".npy: want a 1-D array of integers, got %s", truncate(bytes.TrimSpace(data[start:start+hlen])))
	}
	order, kind, size := m[1][0], m[2][0], int(m[3][0]-'0')
	count, err := strconv.Atoi(string(m[4]))
	if err != nil || count > MaxLen(n) {
		return nil, fmt.Errorf(".npy: %s entries: more than %d (64 epochs of %d samples)", m[4], MaxLen(n), n)
	}
	if order == '>' && size > 1 {
		return nil, fmt.Errorf(".npy: big-endian integers are not supported")
	}
	body := data[start+hlen:]
	if len(body) != count*size {
		return nil, fmt.Errorf(".npy: %d bytes of data for %d entries of %d bytes", len(body), count, size)
	}
	plan := make([]int32, count)
	for i := range plan {
		var v int64
		b := body[i*size : (i+1)*size]
		switch {
		case size == 1 && kind == 'i':
			v = int64(int8(b[0]))
		case size == 1:
			v = int64(b[0])
		case size == 2 && kind == 'i':
			v = int64(int16(binary.LittleEndian.Uint16(b)))
		case size == 2:
			v = int64(binary.LittleEndian.Uint16(b))
		case size == 4 && kind == 'i':
			v = int64(int32(binary.LittleEndian.Uint32(b)))
		case size == 4:
			v = int64(binary.LittleEndian.Uint32(b))
		case kind == 'i':
			v = int64(binary.LittleEndian.Uint64(b))
		default:
			u := binary.LittleEndian.Uint64(b)
			if u > 1<<62 {
				return nil, fmt.Errorf(".npy: entry %d, %d: out of range [0, %d)", i, u, n)
			}
			v = int64(u)
		}
		if v < 0 || v >= int64(n) {
			return nil, fmt.Errorf(".npy: entry %d, %d: out of range [0, %d)", i, v, n)
		}
		plan[i] = int32(v)
	}
	return plan, nil
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}
