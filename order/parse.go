// Package order turns the trainer's plan (the sample indices it will read, in order) and the
// reads vidfs observes into what to decode next.
package order

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/vidfs/vidfs/internal/npy"
)

// MaxLen is the longest plan accepted for n samples: 64 epochs, and never fewer than a million
// entries. Anything longer is taken for a mistake.
func MaxLen(n int) int { return max(64*n, 1<<20) }

// MaxEntries is the default bound on the entries all plans of a mount of n samples hold together
// (Plans.SetMaxEntries): twice the longest plan accepted, 8 bytes an entry (16 MiB for up to
// 16,384 samples; 4 GiB for Kinetics-400's 4 million).
func MaxEntries(n int) int { return 2 * MaxLen(n) }

// MaxBytes bounds the size of an order file for n samples (text with 20-digit numbers).
func MaxBytes(n int) int64 { return int64(MaxLen(n))*21 + 4096 }

// Parse reads a plan for a dataset of n samples: either text, integers separated by white space,
// or a NumPy .npy file holding a 1-D array of integers. Every index must lie in [0, n) and the
// plan may hold at most MaxLen(n) entries; otherwise the whole plan is refused with an error
// that says why. An empty input is an empty plan.
func Parse(data []byte, n int) ([]int32, error) {
	if npy.IsNpy(data) {
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
		yieldAt(i)
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

func parseNpy(data []byte, n int) ([]int32, error) {
	h, off, err := npy.Decode(data)
	if err != nil {
		return nil, err
	}
	d := h.Descr
	if len(d) != 3 || !strings.ContainsRune("<>|=", rune(d[0])) || !strings.ContainsRune("iu", rune(d[1])) || !strings.ContainsRune("1248", rune(d[2])) ||
		h.Fortran || len(h.Shape) != 1 {
		return nil, fmt.Errorf(".npy: want a 1-D array of integers, got dtype %s, shape %v", d, h.Shape)
	}
	kind, size, count := d[1], int(d[2]-'0'), h.Shape[0]
	if d[0] == '>' && size > 1 {
		return nil, fmt.Errorf(".npy: big-endian integers are not supported")
	}
	if count > MaxLen(n) {
		return nil, fmt.Errorf(".npy: %d entries: more than %d (64 epochs of %d samples)", count, MaxLen(n), n)
	}
	body := data[off:]
	if len(body) != count*size {
		return nil, fmt.Errorf(".npy: %d bytes of data for %d entries of %d bytes", len(body), count, size)
	}
	plan := make([]int32, count)
	for i := range plan {
		yieldAt(i)
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
