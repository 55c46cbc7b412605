// Package copystore is the training copy: decoded frames of videos on local disk, across
// mounts, each frame once however many samples use it, so that any clip of a video whose frames
// are there is read with no decode (the workload of video models: fresh random clips every
// epoch). It knows nothing of decoding or plans: a video is the caller's number and the key
// (diskstore.Key) the caller derives from everything that makes its frames; a frame is the
// caller's number for it in that video (a unit, counted as the layout counts frames). The store
// is bounded in bytes and evicts a video at a time: files a last mount left that no video named
// first, then, of a few videos chosen at random, one no reader wants soon (Options.Due), least
// recently used, or else the one due last. (The sample tier, which keeps samples instead, is
// package tier; what the two share is package internal/diskstore.)
//
// Files by job: store.go (the Store, Open, Stats, Close), read.go (Get, from the queue or the
// files), write.go (Put and appending frames), evict.go (making room), count.go (which file is
// which video, and the frames each holds), format.go (a file's header and slots), huff.go (the
// image codec).
//
// # Format
//
// One file per video, named by the video's key, under DIR/frames/v1/ab/ (ab: the key's first
// byte in hex, so that 240,000 videos spread over 256 directories). A file has three parts, in
// this order:
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
//  3. The frames, from the first 4 KiB boundary after the index, each stored on its own
//     (diskstore.Codec: none, lz4, zstd or huff), appended as they are decoded, in no
//     particular order.
//
// A frame is appended before its slot is written, so a reader that finds a slot finds its bytes
// (a crash between the two leaves bytes no slot points at, which cost room until the file is
// evicted). Nothing is synced: after a power cut a slot may point at bytes that never reached the
// disk, which the slot's CRC catches, and the frame is decoded again. Slots are read a sample's
// span at a time, and nothing of them is kept in memory.
//
// # Concurrency
//
// A Store is safe for concurrent use. Readers (Get) read the files straight, without the store's
// lock, each frame checked; Put compresses frames on its caller's goroutine and queues them, and
// one goroutine (diskstore.Writer), at a low priority, appends them, behind a backlog bounded in
// bytes: with the backlog full, Put waits as long as its caller says, and then skips the frames,
// counted. Frames still queued are served from the queue, beside those in the file. The store's lock guards its memory of
// the videos (56 bytes each, nothing per frame) and its counts, and is let go for file I/O; it is
// taken after any lock of the caller's and before the writer's.
package copystore
