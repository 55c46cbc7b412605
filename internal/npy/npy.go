// Package npy writes and reads the header of NumPy's .npy format: the magic string, the format
// version, and the Python dict literal that gives the array's dtype, memory order and shape.
// vidfs writes headers for the tensor files it serves and reads them from the plans trainers
// write with np.save. Array data is not this package's business.
package npy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

const magic = "\x93NUMPY"

// Header describes an array stored in a .npy file.
type Header struct {
	Descr   string // dtype in NumPy's array-protocol form, e.g. "|u1" or "<i8"
	Fortran bool   // column-major data
	Shape   []int
}

// Encode returns h as a version 1.0 header padded with spaces to a multiple of align bytes
// (NumPy itself aligns to 64), so that the data after it is aligned as memory maps and direct
// I/O like. align must be at least 64 and the header at most 65535 bytes.
func (h Header) Encode(align int) []byte {
	dims := make([]string, len(h.Shape))
	for i, d := range h.Shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(h.Shape) == 1 {
		tuple += ","
	}
	order := "False"
	if h.Fortran {
		order = "True"
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }", h.Descr, order, tuple)
	const prefix = len(magic) + 4 // magic, version (2 bytes), header length (2 bytes)
	total := (prefix + len(dict) + 1 + align - 1) / align * align
	b := make([]byte, total)
	copy(b, magic+"\x01\x00")
	binary.LittleEndian.PutUint16(b[len(magic)+2:], uint16(total-prefix))
	n := copy(b[prefix:], dict)
	for i := prefix + n; i < total-1; i++ {
		b[i] = ' '
	}
	b[total-1] = '\n'
	return b
}

// IsNpy reports whether data starts with the .npy magic string.
func IsNpy(data []byte) bool {
	return strings.HasPrefix(string(data[:min(len(data), len(magic))]), magic)
}

// Decode parses the header at the start of data (format versions 1, 2 and 3) and returns it
// with the offset at which the array's data starts.
func Decode(data []byte) (Header, int, error) {
	var h Header
	if !IsNpy(data) {
		return h, 0, errors.New(".npy: no NUMPY magic string")
	}
	if len(data) < len(magic)+4 {
		return h, 0, errors.New(".npy: short header")
	}
	major := data[len(magic)]
	var hlen, start int
	switch major {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(data[len(magic)+2:])), len(magic)+4
	case 2, 3:
		if len(data) < len(magic)+6 {
			return h, 0, errors.New(".npy: short header")
		}
		hlen, start = int(binary.LittleEndian.Uint32(data[len(magic)+2:])), len(magic)+6
	default:
		return h, 0, fmt.Errorf(".npy: unsupported format version %d", major)
	}
	if hlen > len(data)-start {
		return h, 0, errors.New(".npy: header runs past the end of the file")
	}
	dict := strings.TrimRight(string(data[start:start+hlen]), " \n\x00")
	p := &parser{s: dict}
	if err := p.dict(&h); err != nil {
		return h, 0, fmt.Errorf(".npy: header %s: %w", truncate(dict), err)
	}
	return h, start + hlen, nil
}

// parser reads the Python dict literal of a header: string keys; string, boolean and
// tuple-of-integers values.
type parser struct {
	s   string
	pos int
}

func (p *parser) skipSpace() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

// accept consumes tok (after white space) if it comes next.
func (p *parser) accept(tok string) bool {
	p.skipSpace()
	if strings.HasPrefix(p.s[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func (p *parser) expect(tok string) error {
	if !p.accept(tok) {
		return fmt.Errorf("want %q at byte %d", tok, p.pos)
	}
	return nil
}

func (p *parser) str() (string, error) {
	p.skipSpace()
	if p.pos >= len(p.s) || (p.s[p.pos] != '\'' && p.s[p.pos] != '"') {
		return "", fmt.Errorf("want a string at byte %d", p.pos)
	}
	q := p.s[p.pos]
	end := strings.IndexByte(p.s[p.pos+1:], q)
	if end < 0 {
		return "", errors.New("unterminated string")
	}
	v := p.s[p.pos+1 : p.pos+1+end]
	p.pos += end + 2
	return v, nil
}

func (p *parser) tuple() ([]int, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var dims []int
	for !p.accept(")") {
		p.skipSpace()
		end := p.pos
		for end < len(p.s) && p.s[end] >= '0' && p.s[end] <= '9' {
			end++
		}
		d, err := strconv.Atoi(p.s[p.pos:end])
		if err != nil {
			return nil, fmt.Errorf("want a dimension at byte %d", p.pos)
		}
		p.pos = end
		dims = append(dims, d)
		if !p.accept(",") {
			if err := p.expect(")"); err != nil {
				return nil, err
			}
			break
		}
	}
	return dims, nil
}

func (p *parser) dict(h *Header) error {
	if err := p.expect("{"); err != nil {
		return err
	}
	seen := map[string]bool{}
	for !p.accept("}") {
		key, err := p.str()
		if err != nil {
			return err
		}
		if err := p.expect(":"); err != nil {
			return err
		}
		switch key {
		case "descr":
			h.Descr, err = p.str()
		case "fortran_order":
			switch {
			case p.accept("True"):
				h.Fortran = true
			case p.accept("False"):
				h.Fortran = false
			default:
				err = errors.New("fortran_order: want True or False")
			}
		case "shape":
			h.Shape, err = p.tuple()
		default:
			err = fmt.Errorf("unknown key %q", key)
		}
		if err != nil {
			return err
		}
		seen[key] = true
		if !p.accept(",") {
			if err := p.expect("}"); err != nil {
				return err
			}
			break
		}
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return fmt.Errorf("no %q", k)
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
