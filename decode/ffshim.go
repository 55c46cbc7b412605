package decode

// A few FFmpeg fields and calls that go-astiav v0.38 does not expose. Each helper takes the
// pointer that go-astiav's UnsafePointer methods return.

/*
#cgo pkg-config: libavcodec libavutil
#include <libavcodec/avcodec.h>
#include <libavutil/frame.h>
#include <libavutil/avutil.h>
#include <libavutil/hwcontext.h>
#include <malloc.h>

// The frames whose in-loop filter fast decoding skips (see Output.Fast).
#define VIDFS_FAST_LOOP_FILTER AVDISCARD_ALL

static void vidfs_flush(void *cc) { avcodec_flush_buffers((AVCodecContext *)cc); }
static void vidfs_skip_pixels(void *cc) {
	((AVCodecContext *)cc)->skip_idct = AVDISCARD_ALL;
	((AVCodecContext *)cc)->skip_loop_filter = AVDISCARD_ALL;
}
static void vidfs_set_fast(void *cc, int on) {
	AVCodecContext *c = (AVCodecContext *)cc;
	c->skip_loop_filter = on ? VIDFS_FAST_LOOP_FILTER : AVDISCARD_DEFAULT;
	if (on)
		c->flags2 |= AV_CODEC_FLAG2_FAST;
	else
		c->flags2 &= ~AV_CODEC_FLAG2_FAST;
}
static void vidfs_set_skip_frame(void *cc, int d) { ((AVCodecContext *)cc)->skip_frame = (enum AVDiscard)d; }
static int vidfs_copy_props(void *dst, void *src) { return av_frame_copy_props((AVFrame *)dst, (const AVFrame *)src); }
static int64_t vidfs_best_effort_ts(void *f) { return ((AVFrame *)f)->best_effort_timestamp; }
static int64_t vidfs_packet_pts(void *pkt) { return ((AVPacket *)pkt)->pts; }
static void vidfs_set_packet_opaque(void *pkt, int64_t v) { ((AVPacket *)pkt)->opaque = (void *)(intptr_t)v; }
static int64_t vidfs_frame_opaque(void *f) { return (int64_t)(intptr_t)((AVFrame *)f)->opaque; }
static int vidfs_reorder_delay(void *cc) { return ((AVCodecContext *)cc)->has_b_frames; }
static void vidfs_set_reorder_delay(void *cc, int d) { ((AVCodecContext *)cc)->has_b_frames = d; }
static void vidfs_copy_opaque(void *cc) { ((AVCodecContext *)cc)->flags |= AV_CODEC_FLAG_COPY_OPAQUE; }
// Downloads the GPU frame src into dst, into dst's own buffer when it has one of src's size and
// software format that nothing else holds; else into a new one.
static int vidfs_download(void *dstp, void *srcp) {
	AVFrame *dst = (AVFrame *)dstp, *src = (AVFrame *)srcp;
	if (dst->buf[0]) {
		const AVHWFramesContext *fc = src->hw_frames_ctx ? (const AVHWFramesContext *)src->hw_frames_ctx->data : NULL;
		if (!fc || dst->width != src->width || dst->height != src->height || dst->format != fc->sw_format || !av_frame_is_writable(dst)) {
			av_frame_unref(dst);
		} else {
			// What the last frame's props left (av_frame_copy_props adds, it does not replace).
			av_frame_side_data_free(&dst->side_data, &dst->nb_side_data);
			av_dict_free(&dst->metadata);
		}
	}
	return av_hwframe_transfer_data(dst, src, 0);
}
static int vidfs_frame_damaged(void *f) {
	AVFrame *fr = (AVFrame *)f;
	return (fr->flags & AV_FRAME_FLAG_CORRUPT) != 0 || fr->decode_error_flags != 0;
}
*/
import "C"

import (
	"unsafe"

	"github.com/asticode/go-astiav"
)

// TuneMalloc caps glibc malloc's arenas, where FFmpeg's allocations live, at arenas, so that it
// hands memory back: by default glibc gives every thread that calls malloc an arena of its own,
// up to eight per core; decoders run on many threads in turn, so memory freed in one arena is
// not reused by the next and resident memory creeps up (measured: 131 MiB peak with the default,
// 91 MiB with 2, for a 24 MiB cache). It is process-wide; call it once, early, from main.
func TuneMalloc(arenas int) {
	C.mallopt(C.M_ARENA_MAX, C.int(arenas))
}

// FixMmapThreshold fixes the size from which a malloc is a mapping of its own, returned to the
// system when freed, at 1 MiB, and keeps up to 4 MiB free at the top of each malloc arena rather
// than trimming it: glibc raises that size, up to 32 MiB, each time a mapped block is freed, so
// once a decoder has closed, frame buffers come from the arenas and their holes stay resident
// (the soak, bench/soak.py, 180 s twice in turns, with the size fixed at 256 KiB: FFmpeg's memory
// at the peak 67 MiB against 93-98 MiB, 133-134 MiB above the cache against 162-166). It costs each large malloc a mapping
// faulted in page by page: a mount calls it once its probe is done, as a probe opens a decoder a
// video (probing with it fixed ran at 184 videos a second on 2 cores against 735 without).
// Process-wide.
//
// 1 MiB rather than 256 KiB: what a decoder allocates each time one opens, above all an H.264
// decoder's context (some 400 KB, zeroed), was a fresh mapping each time, faulted in and unmapped
// at the close; a mount reading at random opens a decoder for nearly every clip. Frame buffers,
// the large ones, no longer churn (framepool.go). With both, a 480p clip took 100-160 page faults
// fewer, about a tenth of its CPU where faults are dear (a virtual machine: docs/benchmarks.md,
// issue 48). The trim threshold would otherwise stay at 128 KiB, handing the top of an arena back
// as each decoder closes, to fault it in again at the next open.
func FixMmapThreshold() {
	C.mallopt(C.M_MMAP_THRESHOLD, 1<<20)
	C.mallopt(C.M_TRIM_THRESHOLD, 4<<20)
}

// download copies the GPU frame src into host memory in dst, reusing dst's buffer from the last
// frame where it fits. A new buffer per frame is a mapping of its own (3 MB at 1080p, over
// FixMmapThreshold's threshold), faulted in page by page: measured in a mount on an H100, 2.8 ms of CPU
// a frame against 0.2 ms in a process without it.
func download(dst, src *astiav.Frame) error {
	if ret := C.vidfs_download(dst.UnsafePointer(), src.UnsafePointer()); ret < 0 {
		return astiav.Error(ret)
	}
	return nil
}

// FFmpegVersion is the version of the FFmpeg libraries vidfs runs on, as FFmpeg states it.
func FFmpegVersion() string { return C.GoString(C.av_version_info()) }

// flushDecoder drops every frame and packet buffered in the decoder, as after a seek.
func flushDecoder(cc *astiav.CodecContext) { C.vidfs_flush(cc.UnsafePointer()) }

// setFast turns the decoder's non-bit-exact shortcuts (Output.Fast) on or off. Both settings are
// read as each frame is decoded, so this may change between clips.
func setFast(cc *astiav.CodecContext, on bool) {
	v := 0
	if on {
		v = 1
	}
	C.vidfs_set_fast(cc.UnsafePointer(), C.int(v))
}

// discard levels for skipFrames (AVDiscard).
const (
	discardDefault = C.AVDISCARD_DEFAULT
	discardNonRef  = C.AVDISCARD_NONREF
)

// skipPixels makes the decoder skip the inverse transform and the loop filter: frames come out as
// they would, with pixels that mean nothing. For finding out which frames come out.
func skipPixels(cc *astiav.CodecContext) { C.vidfs_skip_pixels(cc.UnsafePointer()) }

// skipFrames sets which frames the decoder may skip decoding altogether.
func skipFrames(cc *astiav.CodecContext, level int) {
	C.vidfs_set_skip_frame(cc.UnsafePointer(), C.int(level))
}

// copyFrameProps copies a frame's properties (timestamps, colour, flags) but not its data, as
// after downloading a GPU frame.
func copyFrameProps(dst, src *astiav.Frame) {
	C.vidfs_copy_props(dst.UnsafePointer(), src.UnsafePointer())
}

// bestEffortTimestamp is the frame's timestamp as FFmpeg best guesses it (stream time base).
func bestEffortTimestamp(f *astiav.Frame) int64 {
	return int64(C.vidfs_best_effort_ts(f.UnsafePointer()))
}

// copyOpaque makes the decoder pass each packet's opaque value on to the frame decoded from it.
func copyOpaque(cc *astiav.CodecContext) { C.vidfs_copy_opaque(cc.UnsafePointer()) }

// setPacketOpaque tags a packet with v, which the frame decoded from it carries (copyOpaque).
func setPacketOpaque(p *astiav.Packet, v int64) {
	C.vidfs_set_packet_opaque(packetPointer(p), C.int64_t(v))
}

// packetPointer returns the AVPacket behind p. go-astiav v0.38 has no accessor for it; its Packet
// holds that pointer as its only field. TestPacketPointer checks this against the library.
func packetPointer(p *astiav.Packet) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(p)) }

// packetPts reads a packet's pts through packetPointer, for TestPacketPointer.
func packetPts(p *astiav.Packet) int64 { return int64(C.vidfs_packet_pts(packetPointer(p))) }

// frameOpaque is the opaque value of the packet the frame was decoded from.
func frameOpaque(f *astiav.Frame) int64 { return int64(C.vidfs_frame_opaque(f.UnsafePointer())) }

// frameDamaged reports whether the decoder flagged the frame as corrupt or concealed errors in it.
func frameDamaged(f *astiav.Frame) bool { return C.vidfs_frame_damaged(f.UnsafePointer()) != 0 }

// reorderDelay is the reordering delay (in frames) st's parameters give a decoder: the
// has_b_frames avformat_find_stream_info found. ok is false when it cannot be read.
func reorderDelay(st *astiav.Stream) (d int, ok bool) {
	cc := astiav.AllocCodecContext(nil)
	if cc == nil {
		return 0, false
	}
	defer cc.Free()
	if err := st.CodecParameters().ToCodecContext(cc); err != nil {
		return 0, false
	}
	return decoderDelay(cc), true
}

// decoderDelay is how many frames the decoder cc holds back for reordering (has_b_frames).
func decoderDelay(cc *astiav.CodecContext) int { return int(C.vidfs_reorder_delay(cc.UnsafePointer())) }

// setReorderDelay gives a decoder, before it opens, the reordering delay it starts from.
func setReorderDelay(cc *astiav.CodecContext, d int) {
	C.vidfs_set_reorder_delay(cc.UnsafePointer(), C.int(d))
}
