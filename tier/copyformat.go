package tier

// The training copy's on-disk format: one file per video, named by the video's Key, under
// DIR/frames/v1/ab/ (ab: the key's first byte in hex, so that 240,000 videos spread over 256
// directories). A file has three parts, in this order:
//
//  1. The header, 64 bytes (little-endian):
//
//     0   magic "VIDFSCP1"
//     8   key (32 bytes): the video's, as the file is named
//     40  frame bytes (uint32): one frame at the output size, as served (H x W x 3)
//     44  units (uint32): how many frame slots the index has
//     48  12 zero bytes
//     60  CRC-32 (IEEE) of bytes 0-59
//
//  2. The index, units x 16 bytes from byte 64: slot u says where frame u is, u counting frames
//     the way the layout's samples do (the video's own frames, or with --fps frames at that
//     rate). Each slot (little-endian):
//
//     0   offset of the stored frame in the file (uint64; its top byte is the codec; 0: no frame)
//     8   stored length (uint32)
//     12  CRC-32 (IEEE) of bytes 0-11 of the slot, the unit's number (uint32) and the stored
//     bytes: a frame torn, cut short, flipped, or found under another slot fails it
//
//  3. The frames, from the first 4 KiB boundary after the index, each stored on its own (Codec:
//     none, lz4, zstd or huff), appended as they are decoded, in no particular order.
//
// A frame is appended before its slot is written, so a reader that finds a slot finds its bytes
// (a crash between the two leaves bytes no slot points at, which cost room until the file is
// evicted). Nothing is synced: after a power cut a slot may point at bytes that never reached the
// disk, which the slot's CRC catches, and the frame is decoded again. Slots are read a sample's
// span at a time, and nothing of them is kept in memory.

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"slices"
)

const (
	copyMagic      = "VIDFSCP1"
	copyHeaderSize = 64
	copySlotSize   = 16
	copyVersion    = "v1"
	copyAlign      = 4096
	// offsetBits is how many bits of a slot's first word hold the offset; the codec takes the rest.
	offsetBits = 56
)

// copyHeader is what a copy's header says.
type copyHeader struct {
	key        Key
	frameBytes int
	units      int
}

func (h copyHeader) marshal() []byte {
	b := make([]byte, copyHeaderSize)
	copy(b, copyMagic)
	copy(b[8:40], h.key[:])
	binary.LittleEndian.PutUint32(b[40:], uint32(h.frameBytes))
	binary.LittleEndian.PutUint32(b[44:], uint32(h.units))
	binary.LittleEndian.PutUint32(b[60:], crc32.ChecksumIEEE(b[:60]))
	return b
}

// parseCopyHeader checks the header b of the copy named key, for frames of frameBytes.
func parseCopyHeader(b []byte, key Key, frameBytes int) (copyHeader, error) {
	switch {
	case len(b) < copyHeaderSize:
		return copyHeader{}, damaged("copy cut short in its header")
	case string(b[:8]) != copyMagic:
		return copyHeader{}, damaged("no copy header")
	case crc32.ChecksumIEEE(b[:60]) != binary.LittleEndian.Uint32(b[60:]):
		return copyHeader{}, damaged("copy header checksum mismatch")
	case !bytes.Equal(b[8:40], key[:]):
		return copyHeader{}, damaged("the copy holds another video's frames")
	}
	h := copyHeader{key: key, frameBytes: int(binary.LittleEndian.Uint32(b[40:])), units: int(binary.LittleEndian.Uint32(b[44:]))}
	if h.frameBytes != frameBytes {
		return h, damaged("the copy holds frames of %d bytes, want %d", h.frameBytes, frameBytes)
	}
	return h, nil
}

// framesStart is where a copy of units slots keeps its first frame.
func framesStart(units int) int64 {
	end := int64(copyHeaderSize + units*copySlotSize)
	return (end + copyAlign - 1) / copyAlign * copyAlign
}

// slotAt is where slot u lies in a copy's file.
func slotAt(u int) int64 { return int64(copyHeaderSize + u*copySlotSize) }

// frameSlot is one slot of the index, decoded.
type frameSlot struct {
	off    int64
	codec  Codec
	stored int
	sum    uint32
}

func (s frameSlot) present() bool { return s.off != 0 }

func parseSlot(b []byte) frameSlot {
	w := binary.LittleEndian.Uint64(b)
	return frameSlot{off: int64(w & (1<<offsetBits - 1)), codec: Codec(w >> offsetBits),
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
		return damaged("frame %d: unknown codec %d", u, s.codec)
	case s.off < framesStart(units) || s.off+int64(s.stored) > size:
		return damaged("frame %d: its slot points outside the file (%d+%d of %d bytes)", u, s.off, s.stored, size)
	case s.codec == None && s.stored != frameBytes || s.codec != None && (s.stored >= frameBytes || s.stored == 0):
		return damaged("frame %d: %d bytes stored with %v for a %d-byte frame", u, s.stored, s.codec, frameBytes)
	}
	return nil
}

func validCodec(c Codec) bool { return slices.Contains(FrameCodecs, c) }
