package decode

// What FFmpeg was built with, for `vidfs version`: what go-astiav v0.38 does not expose.

/*
#cgo pkg-config: libavcodec libavutil
#include <libavcodec/avcodec.h>
#include <libavutil/hwcontext.h>
#include <gnu/libc-version.h>

static int vidfs_is_video_decoder(const AVCodec *c) {
	return av_codec_is_decoder(c) && c->type == AVMEDIA_TYPE_VIDEO;
}
// vidfs_has_hwaccel: whether decoder c can decode on a device of type t.
static int vidfs_has_hwaccel(const AVCodec *c, enum AVHWDeviceType t) {
	for (int i = 0;; i++) {
		const AVCodecHWConfig *h = avcodec_get_hw_config(c, i);
		if (!h)
			return 0;
		if (h->device_type == t && (h->methods & AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX))
			return 1;
	}
}
*/
import "C"

import (
	"sort"
	"unsafe"
)

// FFmpegConfiguration is the configure command line FFmpeg was built with, as FFmpeg records it.
func FFmpegConfiguration() string { return C.GoString(C.avcodec_configuration()) }

// FFmpegLicense is the licence of the FFmpeg build, as FFmpeg states it ("LGPL version 2.1 or
// later" unless it was configured with --enable-gpl or --enable-nonfree).
func FFmpegLicense() string { return C.GoString(C.avcodec_license()) }

// LibcVersion is the version of the C library vidfs runs on (glibc's, at run time).
func LibcVersion() string { return C.GoString(C.gnu_get_libc_version()) }

// VideoDecoders are the names of FFmpeg's video decoders built in, sorted.
func VideoDecoders() []string {
	var names []string
	var it unsafe.Pointer
	for c := C.av_codec_iterate(&it); c != nil; c = C.av_codec_iterate(&it) {
		if C.vidfs_is_video_decoder(c) != 0 {
			names = append(names, C.GoString(c.name))
		}
	}
	sort.Strings(names)
	return names
}

// HWAccels maps each hardware device type FFmpeg was built with (cuda for NVDEC) to the video
// decoders that can decode on it.
func HWAccels() map[string][]string {
	out := map[string][]string{}
	for t := C.av_hwdevice_iterate_types(C.AV_HWDEVICE_TYPE_NONE); t != C.AV_HWDEVICE_TYPE_NONE; t = C.av_hwdevice_iterate_types(t) {
		var names []string
		var it unsafe.Pointer
		for c := C.av_codec_iterate(&it); c != nil; c = C.av_codec_iterate(&it) {
			if C.vidfs_is_video_decoder(c) != 0 && C.vidfs_has_hwaccel(c, t) != 0 {
				names = append(names, C.GoString(c.name))
			}
		}
		sort.Strings(names)
		out[C.GoString(C.av_hwdevice_get_type_name(t))] = names
	}
	return out
}
