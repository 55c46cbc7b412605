package decode

import (
	"strings"
	"testing"
)

func TestParseHWAccel(t *testing.T) {
	for s, want := range map[string]HWAccel{"auto": HWAuto, "cuda": HWCUDA, "none": HWNone} {
		if got, err := ParseHWAccel(s); err != nil || got != want || got.String() != s {
			t.Errorf("ParseHWAccel(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseHWAccel("vaapi"); err == nil {
		t.Error("vaapi accepted")
	}
}

// TestChooseDecoder: which videos go to NVDEC, through which decoder, and why not.
func TestChooseDecoder(t *testing.T) {
	capable := func(d string) bool {
		return map[string]bool{"h264": true, "hevc": true, "vp9": true, "av1": true, "mpeg4": true}[d]
	}
	for _, tc := range []struct {
		sw                 string
		slot, failedBefore bool
		dec                string
		onGPU              bool
		reason             string
	}{
		{"h264", true, false, "h264", true, "NVDEC"},
		{"libdav1d", true, false, "av1", true, "NVDEC"}, // dav1d has no hwaccel; FFmpeg's own av1 does
		{"theora", true, false, "theora", false, "codec theora has no NVDEC decoder"},
		{"h264", false, false, "h264", false, "all 8 GPU decoders are in use"},
		{"vp9", true, true, "vp9", false, "NVDEC failed on this video before"},
	} {
		dec, onGPU, reason := chooseDecoder(tc.sw, 320, 240, capable, tc.slot, tc.failedBefore, 8)
		if dec != tc.dec || onGPU != tc.onGPU || reason != tc.reason {
			t.Errorf("%+v: got %s %v %q", tc, dec, onGPU, reason)
		}
	}
	for _, size := range [][2]int{{321, 241}, {321, 240}, {320, 241}} {
		if _, onGPU, reason := chooseDecoder("vp9", size[0], size[1], capable, true, false, 8); onGPU || !strings.Contains(reason, "odd picture size") {
			t.Errorf("%dx%d: on the GPU %v, %q", size[0], size[1], onGPU, reason)
		}
	}
	// What this FFmpeg build offers NVDEC for.
	for _, d := range []string{"h264", "hevc", "vp9", "av1", "mpeg4", "vp8", "mjpeg", "mpeg2video", "vc1"} {
		if !hasCUDA(d) {
			t.Errorf("decoder %s has no CUDA hwaccel in this build; scripts/ffmpeg.sh should enable NVDEC", d)
		}
	}
	for _, d := range []string{"libdav1d", "theora", "flv", "nope"} {
		if hasCUDA(d) {
			t.Errorf("decoder %s claims a CUDA hwaccel", d)
		}
	}
}

// gpuOrReason opens the GPU, or says why there is none.
func gpuOrReason() (*gpu, string) {
	dev, err := openCUDA(0)
	if err != nil {
		return nil, err.Error()
	}
	return &gpu{dev: dev}, ""
}

// TestHWAccelWithoutGPU: on a machine without a usable GPU, cuda fails at once with a clear
// message and auto decodes on the CPU. (On one with a GPU, both open it.)
func TestHWAccelWithoutGPU(t *testing.T) {
	g, why := gpuOrReason()
	if g != nil {
		g.close()
	}
	p, err := NewPool(PoolOptions{HWAccel: HWCUDA})
	switch {
	case g == nil && (err == nil || !strings.Contains(err.Error(), "--hwaccel cuda: no usable NVIDIA GPU")):
		t.Errorf("cuda without a GPU (%s): got %v, want a clear error", why, err)
	case g != nil && err != nil:
		t.Errorf("cuda with a GPU: %v", err)
	case err == nil:
		p.Close()
	}
	p, err = NewPool(PoolOptions{HWAccel: HWAuto})
	if err != nil {
		t.Fatalf("auto: %v", err)
	}
	defer p.Close()
	if (len(p.gpus) > 0) != (g != nil) {
		t.Errorf("auto: GPU in use %v, GPU present %v", len(p.gpus) > 0, g != nil)
	}
}
