package decode

// The frame buffers a Pool's CPU decoders decode into, kept across decoders.
//
// FFmpeg gives each decoder a pool of frame buffers of its own, allocated (and zeroed) as the
// decoder first needs them and freed when it closes. A mount reading samples at random opens a
// decoder for nearly every clip, so every clip allocated its frames anew: at 480p, half a MB a
// frame, which with the 256 KiB FixMmapThreshold fixed then was a mapping of its own, faulted in
// page by page, zeroed, and unmapped at the close. Where page faults are dear (a virtual machine
// that maps guest memory lazily: AMD EPYC under PVM, docs/benchmarks.md, issue 48), clips decoded
// 1.1-1.2x faster per CPU second with buffers kept across decoders.
//
// A framePool hands the Pool's decoders buffers that the decoders before them gave back. What a
// decoder sees is what FFmpeg's own pool would give it: its own buffers back first, newest first,
// as it left them; else a buffer zeroed, as FFmpeg zeroes those it allocates (a buffer that comes
// from another decoder is zeroed). So a damaged stream whose concealment reads pixels nothing
// wrote decodes to the same bytes whichever decoders came before. Buffers given back are kept,
// newest first, up to framePoolIdle bytes, and freed once idle for framePoolStale hand-outs
// (videos of another size came since).

/*
#cgo pkg-config: libavcodec libavutil
#include <libavcodec/avcodec.h>
#include <libavutil/buffer.h>
#include <libavutil/imgutils.h>
#include <libavutil/mem.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

// A buffer's header, in the 64 bytes before the data a frame gets (so the data keeps av_malloc's
// alignment).
typedef struct vidfs_fbuf {
	struct vidfs_fbuf *prev, *next; // in the idle list, while idle
	size_t size;                    // of the data
	uint64_t owner;                 // the decoder it was last handed to
	uint64_t since;                 // the pool's clock when it went idle
} vidfs_fbuf;

#define VIDFS_FBUF_HEAD 64

typedef struct vidfs_fpool {
	pthread_mutex_t mu;
	vidfs_fbuf idle;       // idle buffers, a ring: idle.next the newest, idle.prev the oldest
	size_t idle_bytes, max_idle;
	uint64_t clock, stale; // hand-outs so far; idle longer than stale of them: freed
	uint64_t decoders;     // decoders attached so far (their ids)
	int refs;              // the owner's, each attached decoder's, each buffer out's
	int closed;
	uint64_t reused, made; // buffers handed out from the idle ones, and allocated
} vidfs_fpool;

// What an attached decoder's opaque points to.
typedef struct vidfs_fdec {
	vidfs_fpool *fp;
	uint64_t id;
} vidfs_fdec;

static void vidfs_fbuf_unlink(vidfs_fpool *fp, vidfs_fbuf *b) {
	b->prev->next = b->next;
	b->next->prev = b->prev;
	fp->idle_bytes -= b->size;
}

static void vidfs_fpool_destroy(vidfs_fpool *fp) {
	pthread_mutex_destroy(&fp->mu);
	av_free(fp);
}

// Drops a reference taken with fp->mu held; returns whether fp is to be destroyed.
static int vidfs_fpool_unref_locked(vidfs_fpool *fp) { return --fp->refs == 0; }

static void vidfs_fpool_trim_locked(vidfs_fpool *fp, size_t keep) {
	while (fp->idle.prev != &fp->idle &&
	       (fp->idle_bytes > keep || fp->clock - fp->idle.prev->since > fp->stale)) {
		vidfs_fbuf *b = fp->idle.prev;
		vidfs_fbuf_unlink(fp, b);
		av_free(b);
	}
}

static vidfs_fpool *vidfs_fpool_new(size_t max_idle, uint64_t stale) {
	vidfs_fpool *fp = av_mallocz(sizeof(*fp));
	if (!fp)
		return NULL;
	if (pthread_mutex_init(&fp->mu, NULL) != 0) {
		av_free(fp);
		return NULL;
	}
	fp->idle.next = fp->idle.prev = &fp->idle;
	fp->max_idle = max_idle;
	fp->stale = stale;
	fp->refs = 1;
	return fp;
}

// The owner lets go: idle buffers are freed, and fp itself once no decoder or buffer holds it.
static void vidfs_fpool_close(vidfs_fpool *fp) {
	pthread_mutex_lock(&fp->mu);
	fp->closed = 1;
	vidfs_fpool_trim_locked(fp, 0);
	int last = vidfs_fpool_unref_locked(fp);
	pthread_mutex_unlock(&fp->mu);
	if (last)
		vidfs_fpool_destroy(fp);
}

// A frame's buffer given back (av_buffer_create's free callback).
static void vidfs_fpool_put(void *opaque, uint8_t *data) {
	vidfs_fpool *fp = opaque;
	vidfs_fbuf *b = (vidfs_fbuf *)(data - VIDFS_FBUF_HEAD);
	pthread_mutex_lock(&fp->mu);
	if (fp->closed || b->size > fp->max_idle) {
		av_free(b);
	} else {
		b->since = fp->clock;
		b->next = fp->idle.next;
		b->prev = &fp->idle;
		b->next->prev = b;
		fp->idle.next = b;
		fp->idle_bytes += b->size;
		vidfs_fpool_trim_locked(fp, fp->max_idle);
	}
	int last = vidfs_fpool_unref_locked(fp);
	pthread_mutex_unlock(&fp->mu);
	if (last)
		vidfs_fpool_destroy(fp);
}

// A buffer of size bytes for decoder d: the newest idle one of that size, else a new one.
static AVBufferRef *vidfs_fpool_get(vidfs_fdec *d, size_t size) {
	vidfs_fpool *fp = d->fp;
	vidfs_fbuf *b = NULL;
	pthread_mutex_lock(&fp->mu);
	fp->clock++;
	// The newest of this decoder's own, as FFmpeg's pool would give it; else the newest of any.
	for (vidfs_fbuf *i = fp->idle.next; i != &fp->idle; i = i->next) {
		if (i->size == size && (!b || i->owner == d->id)) {
			b = i;
			if (i->owner == d->id)
				break;
		}
	}
	if (b)
		vidfs_fbuf_unlink(fp, b);
	vidfs_fpool_trim_locked(fp, fp->max_idle);
	fp->refs++;
	if (b)
		fp->reused++;
	else
		fp->made++;
	pthread_mutex_unlock(&fp->mu);
	if (!b) {
		if (!(b = av_malloc(VIDFS_FBUF_HEAD + size)))
			goto fail;
		b->size = size;
		b->owner = 0;
	}
	uint8_t *data = (uint8_t *)b + VIDFS_FBUF_HEAD;
	if (b->owner != d->id) {
		memset(data, 0, size); // as FFmpeg's pool zeroes a buffer it allocates for a decoder
		b->owner = d->id;
	}
	AVBufferRef *ref = av_buffer_create(data, size, vidfs_fpool_put, fp, 0);
	if (ref)
		return ref;
	av_free(b);
fail:
	pthread_mutex_lock(&fp->mu);
	int last = vidfs_fpool_unref_locked(fp);
	pthread_mutex_unlock(&fp->mu);
	if (last)
		vidfs_fpool_destroy(fp);
	return NULL;
}

// The decoder's get_buffer2: FFmpeg's default (avcodec_default_get_buffer2, update_frame_pool),
// with the buffers from the framePool. What the default does not do itself, it is left to.
static int vidfs_get_buffer2(AVCodecContext *s, AVFrame *f, int flags) {
	vidfs_fdec *d = s->opaque;
	if (!d || s->hw_frames_ctx || s->codec_type != AVMEDIA_TYPE_VIDEO || !(s->codec->capabilities & AV_CODEC_CAP_DR1))
		return avcodec_default_get_buffer2(s, f, flags);
	int w = f->width, h = f->height, align[AV_NUM_DATA_POINTERS], linesize[4], unaligned, ret;
	avcodec_align_dimensions2(s, &w, &h, align);
	do {
		// As the default: linesizes are not aligned one by one (some decoders assume
		// linesize[0] == 2 * linesize[1] for 4:2:2); the width grows until all are.
		if ((ret = av_image_fill_linesizes(linesize, f->format, w)) < 0)
			return ret;
		w += w & ~(w - 1);
		unaligned = 0;
		for (int i = 0; i < 4; i++)
			unaligned |= linesize[i] % align[i];
	} while (unaligned);
	ptrdiff_t ls[4];
	size_t size[4];
	for (int i = 0; i < 4; i++)
		ls[i] = linesize[i];
	if ((ret = av_image_fill_plane_sizes(size, f->format, h, ls)) < 0)
		return ret;
	memset(f->data, 0, sizeof(f->data));
	memset(f->linesize, 0, sizeof(f->linesize));
	f->extended_data = f->data;
	for (int i = 0; i < 4 && size[i]; i++) {
		if (size[i] > INT_MAX - (16 + 64 - 1))
			return AVERROR(EINVAL);
		// The default's padding: 16 bytes, and room for the largest STRIDE_ALIGN (64).
		if (!(f->buf[i] = vidfs_fpool_get(d, size[i] + 16 + 64 - 1))) {
			av_frame_unref(f);
			return AVERROR(ENOMEM);
		}
		f->data[i] = f->buf[i]->data;
		f->linesize[i] = linesize[i];
	}
	return 0;
}

static int vidfs_fpool_attach(void *cc, vidfs_fpool *fp) {
	AVCodecContext *c = cc;
	vidfs_fdec *d = av_mallocz(sizeof(*d));
	if (!d)
		return AVERROR(ENOMEM);
	pthread_mutex_lock(&fp->mu);
	fp->refs++;
	d->fp = fp;
	d->id = ++fp->decoders;
	pthread_mutex_unlock(&fp->mu);
	c->opaque = d;
	c->get_buffer2 = vidfs_get_buffer2;
	return 0;
}

// Before the decoder is freed: it takes no more buffers from fp (those it holds go back as they
// are released).
static void vidfs_fpool_detach(void *cc) {
	AVCodecContext *c = cc;
	vidfs_fdec *d = c->opaque;
	if (c->get_buffer2 != vidfs_get_buffer2 || !d)
		return;
	c->get_buffer2 = avcodec_default_get_buffer2;
	c->opaque = NULL;
	vidfs_fpool *fp = d->fp;
	av_free(d);
	pthread_mutex_lock(&fp->mu);
	int last = vidfs_fpool_unref_locked(fp);
	pthread_mutex_unlock(&fp->mu);
	if (last)
		vidfs_fpool_destroy(fp);
}

static void vidfs_fpool_stats(vidfs_fpool *fp, uint64_t *reused, uint64_t *made, size_t *idle) {
	pthread_mutex_lock(&fp->mu);
	*reused = fp->reused;
	*made = fp->made;
	*idle = fp->idle_bytes;
	pthread_mutex_unlock(&fp->mu);
}
*/
import "C"

import "github.com/asticode/go-astiav"

const (
	// framePoolIdle bounds the bytes of frame buffers a Pool keeps idle between decoders: a
	// decoder's reference frames at 1080p (about 8 of 3.1 MB), or several decoders' at 480p.
	framePoolIdle = 32 << 20
	// framePoolStale: a buffer idle for this many hand-outs since is freed (a decoder of a
	// 16-frame clip takes about 3 a frame decoded: about 50 clips).
	framePoolStale = 4096
)

// framePool is the frame buffers shared by a Pool's CPU decoders (see the top of this file).
type framePool struct{ p *C.vidfs_fpool }

// newFramePool returns a framePool, or nil if it could not be made (decoders then use FFmpeg's
// own buffers).
func newFramePool() *framePool {
	p := C.vidfs_fpool_new(framePoolIdle, framePoolStale)
	if p == nil {
		return nil
	}
	return &framePool{p}
}

// attach has decoder cc, open and not yet decoding, take its frame buffers from the pool. A
// nil pool, or a failure, leaves it with FFmpeg's own.
func (fp *framePool) attach(cc *astiav.CodecContext) {
	if fp != nil {
		C.vidfs_fpool_attach(cc.UnsafePointer(), fp.p)
	}
}

// detachFrames makes cc, about to be freed, take no more buffers from its framePool, if it has one.
func detachFrames(cc *astiav.CodecContext) {
	if cc != nil {
		C.vidfs_fpool_detach(cc.UnsafePointer())
	}
}

// close gives up the pool: decoders attached keep using it until they are detached.
func (fp *framePool) close() {
	if fp != nil {
		C.vidfs_fpool_close(fp.p)
	}
}

// framePoolStats is what a framePool did: buffers handed out again, buffers allocated, bytes idle.
type framePoolStats struct {
	Reused, Made uint64
	Idle         int64
}

func (fp *framePool) stats() framePoolStats {
	if fp == nil {
		return framePoolStats{}
	}
	var reused, made C.uint64_t
	var idle C.size_t
	C.vidfs_fpool_stats(fp.p, &reused, &made, &idle)
	return framePoolStats{uint64(reused), uint64(made), int64(idle)}
}
