package tier

// The on-disk format of an entry: its header, its codecs, and what makes an entry damaged.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
)

// Codec is how an entry's bytes are stored. Each entry records its own, and Get reads any of
// them whatever the tier's Options.Codec, which says how new entries are written.
type Codec uint8

// The codecs, by the number an entry's header records. Measured on decoded 16x224x224 clips of
// real footage, one core (docs/benchmarks.md has the table): zstd makes entries 2.2x smaller and
// costs about 3.2 ms to read back; LZ4 1.3x and 1.4 ms; none is a copy and a checksum (0.34 ms)
// and 2.4 MB on disk.
const (
	None Codec = 1 // the bytes as they are: the least CPU, the most disk
	LZ4  Codec = 2 // LZ4's block format (github.com/pierrec/lz4/v4), LZ4_compress_fast's algorithm
	Zstd Codec = 3 // zstd at its fastest level without entropy coding (github.com/klauspost/compress)
	// Huff is a lossless image codec, for the training copy's frames alone: colours decorrelated,
	// pixels predicted from their neighbours, residuals Huffman-coded (copyhuff.go).
	Huff Codec = 4
)

// Codecs lists every codec of samples, in the order of their numbers.
var Codecs = []Codec{None, LZ4, Zstd}

// FrameCodecs lists every codec of the training copy's frames.
var FrameCodecs = []Codec{None, LZ4, Zstd, Huff}

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
	for _, c := range FrameCodecs {
		if c.String() == name {
			return c, nil
		}
	}
	names := make([]string, len(FrameCodecs))
	for i, c := range FrameCodecs {
		names[i] = c.String()
	}
	return 0, fmt.Errorf("unknown codec %q (want %s)", name, strings.Join(names, ", "))
}

// HeaderSize is the bytes an entry takes on disk beside its stored bytes.
const HeaderSize = 64

// An entry file is a header, then the stored bytes. The header (little-endian):
//
//	0   magic "VIDFSTR2"
//	8   key (32 bytes)
//	40  the sample's length (uint64)
//	48  the stored bytes' length (uint32)
//	52  codec (one byte), then 7 zero bytes
//	60  CRC-32 (IEEE, which Go computes with carry-less multiplication: 1.8x CRC-32C's speed
//	    here, 0.2 ms for 2.4 MB) of bytes 0-59 and of the stored bytes
//
// Entries written before codecs ("VIDFSTR1", a 56-byte header: magic, key, length, CRC-32C of
// the sample's bytes, stored length; then a zstd frame) are read too.
const (
	magic            = "VIDFSTR2"
	headerSize       = HeaderSize
	legacyMagic      = "VIDFSTR1"
	legacyHeaderSize = 56
	version          = "v1"
)

// errDamaged marks what read finds wrong with the bytes of an entry's file: the entry is damaged,
// and is dropped. Read's other errors are the system's (EMFILE, EIO): they say nothing of the
// entry, which is kept.
var errDamaged = errors.New("damaged entry")

// damaged is an error of kind errDamaged.
func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errDamaged, fmt.Sprintf(format, args...))
}

// header is what an entry's header says.
type header struct {
	codec  Codec
	size   int    // of the header
	stored int64  // bytes after it
	sum    uint32 // CRC-32, or with legacy CRC-32C
	legacy bool   // an entry from before codecs: sum is of the sample's bytes
}

// parseHeader reads the header at the start of b (a file of size bytes) of the entry under key,
// for a sample of n bytes, and checks that the file is as long as it says.
func parseHeader(b []byte, size int64, key Key, n int) (header, error) {
	var h header
	switch {
	case len(b) >= headerSize && string(b[:8]) == magic:
		h = header{codec: Codec(b[52]), size: headerSize, stored: int64(binary.LittleEndian.Uint32(b[48:52])),
			sum: binary.LittleEndian.Uint32(b[60:64])}
		if !slices.Contains(Codecs, h.codec) {
			return h, damaged("unknown codec %d", b[52])
		}
		// A compressed entry that did not shrink is stored as it is: only None may be as long as
		// the sample.
		if h.codec == None && h.stored != int64(n) || h.codec != None && h.stored >= int64(n) {
			return h, damaged("%d bytes stored with %v for a %d-byte sample", h.stored, h.codec, n)
		}
	case len(b) >= legacyHeaderSize && string(b[:8]) == legacyMagic:
		h = header{codec: Zstd, size: legacyHeaderSize, stored: int64(binary.LittleEndian.Uint32(b[52:56])),
			sum: binary.LittleEndian.Uint32(b[48:52]), legacy: true}
		if h.stored > int64(n)+int64(n)/8+(1<<16) {
			return h, damaged("%d bytes stored for a %d-byte sample", h.stored, n)
		}
	default:
		return h, damaged("no entry header")
	}
	if !bytes.Equal(b[8:40], key[:]) {
		return h, damaged("the entry holds another key")
	}
	if raw := binary.LittleEndian.Uint64(b[40:48]); raw != uint64(n) {
		return h, damaged("it holds %d bytes, the sample has %d", raw, n)
	}
	if size != int64(h.size)+h.stored {
		return h, damaged("cut short or padded: %d bytes of data, the header says %d", size-int64(h.size), h.stored)
	}
	return h, nil
}

// castagnoli is the CRC of entries written before codecs.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)
