package isolate

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/decode"
)

// Limits a helper runs under, beside its sandbox, so that a video that takes one over cannot
// take the machine's memory or threads with it: the kernel ends it (or its allocations fail), and
// the mount sees a crash that costs its clips, as any other.
//
//   - Its data (RLIMIT_DATA: the private writable memory it maps: the Go heap, malloc's, FFmpeg's
//     frames; not its windows, which are shared) is bounded from the pictures it may be given: a
//     base for the runtime, and for each decoder it may hold open (its clips at once, and as many
//     idle), dataPerDecoder of its picture measure. A helper sets it on itself, soft and hard, as
//     it starts, from its command line (it cannot raise it after: raising a hard limit takes
//     CAP_SYS_RESOURCE, which it has not, and which a mount in a container often lacks too, so
//     the mount cannot raise it either). Its measure is 4K until Fit says what the videos need;
//     a request whose picture is larger than a helper's measure goes to one started for it, and
//     the smaller helpers are replaced as they go idle (Decoders.grow).
//   - Its threads are bounded by the Go runtime (debug.SetMaxThreads: past it, the runtime ends
//     the process); a helper's threads are all the runtime's, as FFmpeg decodes on the thread
//     that calls it (one thread a decoder). Code a hostile video runs could make threads of its
//     own (clone with CLONE_THREAD is allowed): those only the kernel's limits bound (RLIMIT_NPROC
//     counts a user's threads, all helpers' together and any other process of nobody's, so it
//     cannot bound one helper).
//   - Its oom_score_adj is 1000 (sandbox.go): if the machine runs out of memory all the same,
//     the kernel kills a helper first, not the trainer or the mount.

// dataBase is a helper's data beside its decoders: the Go runtime, its heap, malloc's arenas
// (about 160 MiB at 480p measured in /proc/HELPER/status, VmData), with room to spare. A build
// with the race detector needs more (raceBase).
const dataBase = 512 << 20

// probePicture is the picture a probe is bounded for, before its video's size is known: 4K.
const probePicture = 4096 * 2304

// dataPerDecoder is the data a decoder of pictures of pixels pixels may take: its reference and
// reordered frames (up to 16 in H.264 and HEVC, fewer in the others), at 3 bytes a pixel (10
// bits, 4:2:0; 8-bit frames take half), and 32 MiB for its context, packets and converter.
// Generous: 132 MiB for a decoder of 1080p, where one takes 20-60.
func dataPerDecoder(pixels int64) int64 {
	return 16*3*pixels + 32<<20
}

// picture is the measure of a video's pictures (Picture).
func picture(info *decode.Info) int64 { return Picture(info.Width, info.Height) }

// dataLimit is the data a helper holding decoders decoders open (its clips at once and its idle
// ones) may take, having met pictures of at most pixels.
func dataLimit(decoders int, pixels int64) int64 {
	return dataBase + raceBase + int64(decoders)*dataPerDecoder(pixels)
}

// maxThreads bounds a helper's threads: a few the runtime keeps (its monitor, the garbage
// collector's, one reading the socket), and for each clip at once, the one decoding it and one
// reading its source, with room to spare.
func maxThreads(each int) int { return 32 + 4*each }

// maxPicture bounds the pictures a helper's limit is sized for (8K).
const maxPicture = 8192 * 4352

// Picture is the measure of a video's coded pictures of width x height, in pixels, rounded up to
// a macroblock's 16 a side (at least 64x64), as Fit takes it.
func Picture(width, height int) int64 {
	w, h := int64(max(width, 64)+15)/16*16, int64(max(height, 64)+15)/16*16
	return min(w*h, maxPicture)
}

// setData sets this process's data limit, soft and hard, to n bytes.
func setData(n int64) error {
	lim := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
	if err := unix.Setrlimit(unix.RLIMIT_DATA, &lim); err != nil {
		return fmt.Errorf("limiting its data to %d bytes: %w", n, err)
	}
	return nil
}
