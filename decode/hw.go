package decode

import (
	"fmt"
	"os"

	"github.com/asticode/go-astiav"

	"github.com/vidfs/vidfs/internal/enum"
)

// HWAccel says where videos are decoded.
type HWAccel int

const (
	// HWNone decodes every video on the CPU.
	HWNone HWAccel = iota
	// HWAuto decodes on an NVIDIA GPU (NVDEC, through FFmpeg's CUDA hwaccel) the videos whose
	// codec it supports, when there is a usable GPU and driver, and on the CPU the rest.
	HWAuto
	// HWCUDA is HWAuto that fails at once when no usable GPU or driver is found. Videos NVDEC
	// cannot decode (codec, profile) still go to the CPU, with the reason logged.
	HWCUDA
)

var hwNames = []string{HWNone: "none", HWAuto: "auto", HWCUDA: "cuda"}

func (h HWAccel) String() string { return enum.Name(hwNames, "HWAccel", h) }

// ParseHWAccel reads "none", "auto" or "cuda".
func ParseHWAccel(s string) (HWAccel, error) { return enum.Parse[HWAccel](hwNames, "hwaccel", s) }

// CheckGPU reports whether an NVIDIA GPU and driver are usable for NVDEC, and if not, why.
func CheckGPU() error {
	g, err := openGPU(1)
	if err != nil {
		return err
	}
	g.close()
	return nil
}

// gpu is a CUDA device shared by a pool's decoders.
type gpu struct {
	dev *astiav.HardwareDeviceContext
	// slots bounds the decoders open on the GPU at once, and with them its memory: each holds
	// its reference frames and output surfaces there.
	slots chan struct{}
}

// openGPU creates the CUDA device (the driver is loaded at run time; no CUDA toolkit needed).
func openGPU(maxDecoders int) (*gpu, error) {
	dev, err := astiav.CreateHardwareDeviceContext(astiav.HardwareDeviceTypeCUDA, "", nil, 0)
	if err != nil {
		why := "the NVIDIA driver's libcuda.so.1 could not be loaded or found no GPU"
		if _, statErr := os.Stat("/dev/nvidiactl"); statErr != nil {
			why = "no NVIDIA GPU device (/dev/nvidiactl is missing)"
		}
		return nil, fmt.Errorf("no usable NVIDIA GPU: %s (FFmpeg: %w)", why, err)
	}
	return &gpu{dev: dev, slots: make(chan struct{}, max(maxDecoders, 1))}, nil
}

func (g *gpu) close() { g.dev.Free() }

// take reserves a GPU decoder slot without waiting.
func (g *gpu) take() bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (g *gpu) release() { <-g.slots }

// nvdecDecoder is the FFmpeg decoder that drives NVDEC for a video whose software decoder is
// sw: the same one, except AV1, whose software decoder (libdav1d) has no hwaccel while
// FFmpeg's native "av1" decoder does.
func nvdecDecoder(sw string) string {
	if sw == "libdav1d" {
		return "av1"
	}
	return sw
}

// chooseDecoder decides, when a video is opened in a pool that has a GPU, whether it decodes on
// the GPU, with which decoder, and why. hwCapable says whether a decoder has a CUDA hwaccel in
// this build; width and height are the video's coded picture size.
func chooseDecoder(sw string, width, height int, hwCapable func(decoder string) bool, slotFree, failedBefore bool, maxGPU int) (decoder string, onGPU bool, reason string) {
	switch hw := nvdecDecoder(sw); {
	case failedBefore:
		return sw, false, "NVDEC failed on this video before"
	case !hwCapable(hw):
		return sw, false, fmt.Sprintf("codec %s has no NVDEC decoder", sw)
	case width%2 != 0 || height%2 != 0:
		// Seen on an H100 (driver 580): a 321x241 VP9 video came out of NVDEC at 26 dB from the
		// CPU's decode of the same frames, where even sizes give over 35.
		return sw, false, "odd picture size: NVDEC's pictures differ from the CPU's"
	case !slotFree:
		return sw, false, fmt.Sprintf("all %d GPU decoders are in use", maxGPU)
	default:
		return hw, true, "NVDEC"
	}
}

// hasCUDA says whether the named decoder can use a CUDA device context.
func hasCUDA(decoder string) bool {
	c := astiav.FindDecoderByName(decoder)
	if c == nil {
		return false
	}
	for _, hc := range c.HardwareConfigs() {
		if hc.HardwareDeviceType() == astiav.HardwareDeviceTypeCUDA && hc.MethodFlags().Has(astiav.CodecHardwareConfigMethodFlagHwDeviceCtx) {
			return true
		}
	}
	return false
}

// useGPU sets a decoder context (not yet opened) to decode on the GPU: frames then come out in
// GPU memory (AV_PIX_FMT_CUDA). Should the GPU refuse the stream (a profile NVDEC lacks), FFmpeg
// asks again without the hardware format and the callback picks a software one: decoding goes
// on, on the CPU, in the same context.
func useGPU(cc *astiav.CodecContext, g *gpu) {
	cc.SetHardwareDeviceContext(g.dev)
	cc.SetPixelFormatCallback(func(pfs []astiav.PixelFormat) astiav.PixelFormat {
		for _, pf := range pfs {
			if pf == astiav.PixelFormatCuda {
				return pf
			}
		}
		for _, pf := range pfs {
			if d := pf.Descriptor(); d != nil && !d.Flags().Has(astiav.PixelFormatDescriptorFlagHwAccel) {
				return pf
			}
		}
		return astiav.PixelFormatNone
	})
}
