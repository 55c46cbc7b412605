package copystore

// The on-disk format of a video's file (the package's doc draws it): its header, the slots of
// its index, and what makes either damaged.

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"slices"

	"github.com/vidfs/vidfs/internal/diskstore"
)

const (
	magic      = "VIDFSCP1"
	headerSize = 64
	slotSize   = 16
	version    = "v1"
	align      = 4096
	// offsetBits is how many bits of a slot's first word hold the offset; the codec takes the rest.
	offsetBits = 56
)

// header is what a copy's header says.
type header struct {
	key        diskstore.Key
	frameBytes int
	units      int
}

func (h header) marshal() []byte {
	b := make([]byte, headerSize)
	copy(b, magic)
	copy(b[8:40], h.key[:])
	binary.LittleEndian.PutUint32(b[40:], uint32(h.frameBytes))
	binary.LittleEndian.PutUint32(b[44:], uint32(h.units))
	binary.LittleEndian.PutUint32(b[60:], crc32.ChecksumIEEE(b[:60]))
	return b
}

// parseHeader checks the header b of the copy named key, for frames of frameBytes.
func parseHeader(b []byte, key diskstore.Key, frameBytes int) (header, error) {
	switch {
	case len(b) < headerSize:
		return header{}, diskstore.Damaged("copy cut short in its header")
	case string(b[:8]) != magic:
		return header{}, diskstore.Damaged("no copy header")
	case crc32.ChecksumIEEE(b[:60]) != binary.LittleEndian.Uint32(b[60:]):
		return header{}, diskstore.Damaged("copy header checksum mismatch")
	case !bytes.Equal(b[8:40], key[:]):
		return header{}, diskstore.Damaged("the copy holds another video's frames")
	}
	h := header{key: key, frameBytes: int(binary.LittleEndian.Uint32(b[40:])), units: int(binary.LittleEndian.Uint32(b[44:]))}
	if h.frameBytes != frameBytes {
		return h, diskstore.Damaged("the copy holds frames of %d bytes, want %d", h.frameBytes, frameBytes)
	}
	return h, nil
}

// framesStart is where a copy of units slots keeps its first frame.
func framesStart(units int) int64 {
	end := int64(headerSize + units*slotSize)
	return (end + align - 1) / align * align
}

// slotAt is where slot u lies in a copy's file.
func slotAt(u int) int64 { return int64(headerSize + u*slotSize) }

// frameSlot is one slot of the index, decoded.
type frameSlot struct {
	off    int64
	codec  diskstore.Codec
	stored int
	sum    uint32
}

func (s frameSlot) present() bool { return s.off != 0 }

func parseSlot(b []byte) frameSlot {
	w := binary.LittleEndian.Uint64(b)
	return frameSlot{off: int64(w & (1<<offsetBits - 1)), codec: diskstore.Codec(w >> offsetBits),
		stored: int(binary.LittleEndian.Uint32(b[8:])), sum: binary.LittleEndian.Uint32(b[12:])}
}

// marshalSlot writes slot s of unit u, whose stored bytes are data, into b (16 bytes).
func marshalSlot(b []byte, u int, s frameSlot, data []byte) {
	binary.LittleEndian.PutUint64(b, uint64(s.off)|uint64(s.codec)<<offsetBits)
	binary.LittleEndian.PutUint32(b[8:], uint32(s.stored))
	binary.LittleEndian.PutUint32(b[12:], slotSum(b, u, data))
}

// slotSum is the CRC a slot (b, its first 12 bytes) of unit u carries for its stored bytes.
func slotSum(b []byte, u int, data []byte) uint32 {
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(u))
	c := crc32.ChecksumIEEE(b[:12])
	c = crc32.Update(c, crc32.IEEETable, n[:])
	return crc32.Update(c, crc32.IEEETable, data)
}

// check says what is wrong, if anything, with slot s of unit u in a file of size bytes whose
// frames are frameBytes long, before its bytes are read.
func (s frameSlot) check(u int, size int64, units, frameBytes int) error {
	switch {
	case !validCodec(s.codec):
		return diskstore.Damaged("frame %d: unknown codec %d", u, s.codec)
	case s.off < framesStart(units) || s.off+int64(s.stored) > size:
		return diskstore.Damaged("frame %d: its slot points outside the file (%d+%d of %d bytes)", u, s.off, s.stored, size)
	case s.codec == diskstore.None && s.stored != frameBytes || s.codec != diskstore.None && (s.stored >= frameBytes || s.stored == 0):
		return diskstore.Damaged("frame %d: %d bytes stored with %v for a %d-byte frame", u, s.stored, s.codec, frameBytes)
	}
	return nil
}

// validCodec tells whether frames may be stored with c: any of diskstore.Codecs.
func validCodec(c diskstore.Codec) bool { return slices.Contains(diskstore.Codecs, c) }
