package copystore

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// TestHuff: the image codec gives back every frame byte for byte: smooth pictures (which it
// shrinks), noise (stored as it is), flat colour (one byte repeated), widths that do not divide
// the frame (one row), and frames larger than a chunk; damaged bytes are damage, never a frame.
func TestHuff(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	smooth := func(w, h int) []byte {
		b := make([]byte, w*h*3)
		for y := range h {
			for x := range w {
				for c := range 3 {
					b[3*(y*w+x)+c] = byte(x*(c+1)/3 + y/2 + r.IntN(4))
				}
			}
		}
		return b
	}
	noise := make([]byte, 64*64*3)
	for i := range noise {
		noise[i] = byte(r.IntN(256))
	}
	for _, tc := range []struct {
		name   string
		width  int
		frame  []byte
		shrink bool
	}{
		{"smooth", 224, smooth(224, 224), true},
		{"large", 640, smooth(640, 480), true},
		{"noise", 64, noise, false},
		{"flat", 32, bytes.Repeat([]byte{9, 200, 31}, 32*32), true},
		{"one row", 0, smooth(50, 30), true},
		{"odd width", 7, smooth(50, 30), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &huffCodec{width: tc.width}
			packed, err := h.pack(nil, tc.frame)
			if err != nil {
				t.Fatal(err)
			}
			if tc.shrink && len(packed) >= len(tc.frame)/2 {
				t.Errorf("%d bytes packed to %d", len(tc.frame), len(packed))
			}
			got := make([]byte, len(tc.frame))
			if err := (&huffCodec{width: tc.width}).unpack(got, packed); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.frame) {
				t.Fatal("unpacked to other bytes")
			}
			for _, bad := range [][]byte{packed[:len(packed)-1], append(slices.Clone(packed), 0), packed[:3]} {
				if err := (&huffCodec{width: tc.width}).unpack(got, bad); !errors.Is(err, diskstore.ErrDamaged) {
					t.Errorf("damaged input (%d bytes of %d): %v, want damage", len(bad), len(packed), err)
				}
			}
		})
	}
}
