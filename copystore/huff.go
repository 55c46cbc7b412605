package copystore

// Huff (diskstore.Huff), the training copy's lossless image codec: a frame (RGB, W pixels a
// row) has its colours decorrelated (green, red less green, blue less green, each mod 256) into
// three planes, each pixel of a plane predicted from the one to its left (the first of a row from
// the one above), and the residuals, which cluster near 0, Huffman-coded
// (github.com/klauspost/compress/huff0) in chunks of at most huffChunk bytes. The left predictor
// over the median one of JPEG-LS and FFV1, which stores a little less but reads several times
// slower (docs/benchmarks.md, "Per-frame codecs for the training copy"). Stored bytes: for each
// chunk of the planes, in order, a uint32 (little-endian) whose top two bits say how it is stored
// (0: Huffman-coded, 1: as it is, 2: one byte repeated) and whose rest is its length, then the
// bytes.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/huff0"

	"github.com/vidfs/vidfs/internal/diskstore"
)

const (
	huffChunk = 64 << 10
	huffCoded = 0
	huffRaw   = 1
	huffRLE   = 2
)

// huffCodec holds what packing and unpacking frames of one width reuse; it is not safe for
// concurrent use.
type huffCodec struct {
	width  int    // pixels a row; 0: the frame is one row
	planes []byte // the three planes, one after another
	s      huff0.Scratch
}

// geometry is the frame's pixels and its row length, and the planes' buffer.
func (h *huffCodec) geometry(frame []byte) (n, w int, planes []byte) {
	n = len(frame) / 3
	w = h.width
	if w <= 0 || n%w != 0 {
		w = n
	}
	if cap(h.planes) < 3*n {
		h.planes = make([]byte, 3*n)
	}
	return n, w, h.planes[:3*n]
}

// pack appends frame, packed, to dst.
func (h *huffCodec) pack(dst, frame []byte) ([]byte, error) {
	if len(frame)%3 != 0 || len(frame) == 0 {
		return nil, fmt.Errorf("huff: a frame of %d bytes is not RGB", len(frame))
	}
	n, w, planes := h.geometry(frame)
	g, r, b := planes[:n], planes[n:2*n], planes[2*n:]
	for i := range n {
		p := frame[3*i : 3*i+3]
		g[i], r[i], b[i] = p[1], p[0]-p[1], p[2]-p[1]
	}
	for _, p := range [][]byte{g, r, b} {
		// Residuals in place, from the last pixel back, so that each prediction reads pixels
		// not yet replaced.
		for y := n/w - 1; y >= 0; y-- {
			row := p[y*w : (y+1)*w]
			for x := w - 1; x > 0; x-- {
				row[x] -= row[x-1]
			}
			if y > 0 {
				row[0] -= p[(y-1)*w]
			}
		}
	}
	h.s.Reuse = huff0.ReusePolicyNone
	for off := 0; off < len(planes); off += huffChunk {
		chunk := planes[off:min(len(planes), off+huffChunk)]
		out, _, err := huff0.Compress4X(chunk, &h.s)
		kind := huffCoded
		switch {
		case errors.Is(err, huff0.ErrUseRLE):
			kind, out = huffRLE, chunk[:1]
		case errors.Is(err, huff0.ErrIncompressible), errors.Is(err, huff0.ErrTooBig):
			kind, out = huffRaw, chunk
		case err != nil:
			return nil, fmt.Errorf("huff: %w", err)
		}
		dst = binary.LittleEndian.AppendUint32(dst, uint32(kind)<<30|uint32(len(out)))
		dst = append(dst, out...)
	}
	return dst, nil
}

// unpack fills frame from src, as pack packed it.
func (h *huffCodec) unpack(frame, src []byte) error {
	if len(frame)%3 != 0 || len(frame) == 0 {
		return fmt.Errorf("huff: a frame of %d bytes is not RGB", len(frame))
	}
	n, w, planes := h.geometry(frame)
	for off := 0; off < len(planes); off += huffChunk {
		want := min(len(planes), off+huffChunk) - off
		if len(src) < 4 {
			return diskstore.Damaged("huff: cut short")
		}
		head := binary.LittleEndian.Uint32(src)
		kind, size := int(head>>30), int(head&(1<<30-1))
		src = src[4:]
		if size > len(src) {
			return diskstore.Damaged("huff: a chunk of %d bytes, %d left", size, len(src))
		}
		chunk := planes[off : off+want]
		switch kind {
		case huffRaw:
			if size != want {
				return diskstore.Damaged("huff: a raw chunk of %d bytes, want %d", size, want)
			}
			copy(chunk, src[:size])
		case huffRLE:
			if size != 1 {
				return diskstore.Damaged("huff: a repeated chunk of %d bytes", size)
			}
			for i := range chunk {
				chunk[i] = src[0]
			}
		case huffCoded:
			s, rest, err := huff0.ReadTable(src[:size], &h.s)
			if err != nil {
				return fmt.Errorf("%w: huff: %w", diskstore.ErrDamaged, err)
			}
			out, err := s.Decoder().Decompress4X(chunk[:0:want], rest) // it fills cap(dst)
			if err != nil {
				return fmt.Errorf("%w: huff: %w", diskstore.ErrDamaged, err)
			}
			if len(out) != want {
				return diskstore.Damaged("huff: a chunk decoded to %d bytes, want %d", len(out), want)
			}
		default:
			return diskstore.Damaged("huff: chunk kind %d", kind)
		}
		src = src[size:]
	}
	if len(src) != 0 {
		return diskstore.Damaged("huff: %d bytes past the frame", len(src))
	}
	g, r, b := planes[:n], planes[n:2*n], planes[2*n:]
	for _, p := range [][]byte{g, r, b} {
		for y := 0; y < n/w; y++ {
			row := p[y*w : (y+1)*w]
			if y > 0 {
				row[0] += p[(y-1)*w]
			}
			for x := 1; x < w; x++ {
				row[x] += row[x-1]
			}
		}
	}
	for i := range n {
		p := frame[3*i : 3*i+3]
		p[0], p[1], p[2] = r[i]+g[i], g[i], b[i]+g[i]
	}
	return nil
}
