package tier

// The on-disk format of an entry: its header, the codecs it may be stored with, and what makes
// an entry damaged.

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"slices"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// Codecs lists the codecs the tier stores samples with (Options.Codec), in the order of their
// numbers: every one but diskstore.Huff, which is for frames.
var Codecs = []diskstore.Codec{diskstore.None, diskstore.LZ4, diskstore.Zstd}

// HeaderSize is the bytes an entry takes on disk beside its stored bytes.
const HeaderSize = 64

// An entry file is a header, then the stored bytes. The header (little-endian):
//
//	0   magic "VIDFSTR2"
//	8   key (32 bytes)
//	40  the sample's length (uint64)
//	48  the stored bytes' length (uint32)
//	52  codec (one byte), then 7 zero bytes
//	60  CRC-32 (IEEE, which Go computes with carry-less multiplication, faster than CRC-32C:
//	    docs/benchmarks.md) of bytes 0-59 and of the stored bytes
//
// Entries written before codecs ("VIDFSTR1", a 56-byte header: magic, key, length, CRC-32C of
// the sample's bytes, stored length; then a zstd frame) are read too.
const (
	magic            = "VIDFSTR2"
	headerSize       = HeaderSize
	legacyMagic      = "VIDFSTR1"
	legacyHeaderSize = 56
)

// header is what an entry's header says.
type header struct {
	codec  diskstore.Codec
	size   int    // of the header
	stored int64  // bytes after it
	sum    uint32 // CRC-32, or with legacy CRC-32C
	legacy bool   // an entry from before codecs: sum is of the sample's bytes
}

// parseHeader reads the header at the start of b (a file of size bytes) of the entry under key,
// for a sample of n bytes, and checks that the file is as long as it says.
func parseHeader(b []byte, size int64, key diskstore.Key, n int) (header, error) {
	var h header
	switch {
	case len(b) >= headerSize && string(b[:8]) == magic:
		h = header{codec: diskstore.Codec(b[52]), size: headerSize, stored: int64(binary.LittleEndian.Uint32(b[48:52])),
			sum: binary.LittleEndian.Uint32(b[60:64])}
		if !slices.Contains(Codecs, h.codec) {
			return h, diskstore.Damaged("unknown codec %d", b[52])
		}
		// A compressed entry that did not shrink is stored as it is: only one stored as it is may
		// be as long as the sample.
		if h.codec == diskstore.None && h.stored != int64(n) || h.codec != diskstore.None && h.stored >= int64(n) {
			return h, diskstore.Damaged("%d bytes stored with %v for a %d-byte sample", h.stored, h.codec, n)
		}
	case len(b) >= legacyHeaderSize && string(b[:8]) == legacyMagic:
		h = header{codec: diskstore.Zstd, size: legacyHeaderSize, stored: int64(binary.LittleEndian.Uint32(b[52:56])),
			sum: binary.LittleEndian.Uint32(b[48:52]), legacy: true}
		if h.stored > int64(n)+int64(n)/8+(1<<16) {
			return h, diskstore.Damaged("%d bytes stored for a %d-byte sample", h.stored, n)
		}
	default:
		return h, diskstore.Damaged("no entry header")
	}
	if !bytes.Equal(b[8:40], key[:]) {
		return h, diskstore.Damaged("the entry holds another key")
	}
	if raw := binary.LittleEndian.Uint64(b[40:48]); raw != uint64(n) {
		return h, diskstore.Damaged("it holds %d bytes, the sample has %d", raw, n)
	}
	if size != int64(h.size)+h.stored {
		return h, diskstore.Damaged("cut short or padded: %d bytes of data, the header says %d", size-int64(h.size), h.stored)
	}
	return h, nil
}

// castagnoli is the CRC of entries written before codecs.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)
