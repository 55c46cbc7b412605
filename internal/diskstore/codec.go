package diskstore

import (
	"fmt"
	"strings"
)

// Codec is how a store keeps a sample's or a frame's bytes. Each entry or frame records its own,
// so a store reopened with another codec reads what the last one wrote.
type Codec uint8

// The codecs, by the number an entry's header or a frame's slot records. docs/benchmarks.md
// measures each.
const (
	None Codec = 1 // the bytes as they are: the least CPU, the most disk
	LZ4  Codec = 2 // LZ4's block format (github.com/pierrec/lz4/v4), LZ4_compress_fast's algorithm
	Zstd Codec = 3 // zstd at its fastest level (github.com/klauspost/compress)
	// Huff is a lossless image codec, for the training copy's frames alone (package copystore):
	// colours decorrelated, pixels predicted from their neighbours, residuals Huffman-coded.
	Huff Codec = 4
)

// Codecs lists every codec, in the order of their numbers: the training copy stores frames with
// any of them, the sample tier samples with those of tier.Codecs.
var Codecs = []Codec{None, LZ4, Zstd, Huff}

// String is the codec's name, as --cache-disk-codec takes it.
func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	case Huff:
		return "huff"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// ParseCodec is the codec called name (none, lz4, zstd or huff: huff for frames alone).
func ParseCodec(name string) (Codec, error) {
	for _, c := range Codecs {
		if c.String() == name {
			return c, nil
		}
	}
	names := make([]string, len(Codecs))
	for i, c := range Codecs {
		names[i] = c.String()
	}
	return 0, fmt.Errorf("unknown codec %q (want %s)", name, strings.Join(names, ", "))
}
