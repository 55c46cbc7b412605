package decode

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

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
func CheckGPU() error { return CheckGPUs(nil) }

// CheckGPUs reports whether the GPUs named (CUDA device numbers; nil: every GPU the process
// sees, at least one) are usable for NVDEC, and if not, which is not and why.
func CheckGPUs(want []int) error {
	gpus, failed, err := openGPUs(want, 1, openCUDA)
	for _, g := range gpus {
		g.close()
	}
	if err != nil {
		return err
	}
	return errors.Join(failed...)
}

// maxGPUs bounds the CUDA device numbers tried when every GPU is asked for.
const maxGPUs = 64

// ParseGPUs reads a --gpus value: "all" (nil: every GPU the process sees) or a comma-separated
// list of distinct CUDA device numbers, e.g. "0,2". CUDA numbers the devices the process sees
// 0, 1, ... in the order of CUDA_VISIBLE_DEVICES where it is set.
func ParseGPUs(s string) ([]int, error) {
	if s == "all" {
		return nil, nil
	}
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%q: want all or a comma-separated list of GPU numbers, e.g. 0,1", s)
	}
	var gpus []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		switch {
		case err != nil || n < 0:
			return nil, fmt.Errorf("%q: %q is not a GPU number (0, 1, ...); want all or a list such as 0,1", s, f)
		case n >= maxGPUs:
			return nil, fmt.Errorf("%q: GPU %d: at most %d GPUs are used, numbered from 0", s, n, maxGPUs)
		case slices.Contains(gpus, n):
			return nil, fmt.Errorf("%q: GPU %d named twice", s, n)
		}
		gpus = append(gpus, n)
	}
	return gpus, nil
}

// FormatGPUs writes a list of GPUs as ParseGPUs reads it ("all" for nil).
func FormatGPUs(gpus []int) string {
	if gpus == nil {
		return "all"
	}
	s := make([]string, len(gpus))
	for i, n := range gpus {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// deviceOpener opens CUDA device number index (among those the process sees). Tests give one
// that makes stand-in devices: a nil context and no error.
type deviceOpener func(index int) (*astiav.HardwareDeviceContext, error)

// openCUDA creates a CUDA device context (the driver is loaded at run time; no CUDA toolkit
// needed). FFmpeg reads the device string as CUDA's device number.
func openCUDA(index int) (*astiav.HardwareDeviceContext, error) {
	dev, err := astiav.CreateHardwareDeviceContext(astiav.HardwareDeviceTypeCUDA, strconv.Itoa(index), nil, 0)
	if err != nil {
		why := "the NVIDIA driver's libcuda.so.1 could not be loaded or found no such GPU"
		if _, statErr := os.Stat("/dev/nvidiactl"); statErr != nil {
			why = "no NVIDIA GPU device (/dev/nvidiactl is missing)"
		}
		return nil, fmt.Errorf("%s (FFmpeg: %w)", why, err)
	}
	return dev, nil
}

// visibleGPUs bounds how many GPUs CUDA shows the process, from CUDA_VISIBLE_DEVICES: unset,
// maxGPUs (the devices are then found by opening them in turn); set, the number of entries it
// lists (CUDA stops at the first it cannot match, so some may still fail to open); set and empty,
// none, which is said why.
func visibleGPUs() (int, string) {
	v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	if !ok {
		return maxGPUs, ""
	}
	if strings.TrimSpace(v) == "" {
		return 0, "CUDA_VISIBLE_DEVICES is set and empty: the process sees no GPU"
	}
	return min(len(strings.Split(v, ",")), maxGPUs), ""
}

// openGPUs opens one device context per GPU wanted, each with room for maxDecoders decoders.
// want nil asks for every GPU the process sees: CUDA devices 0, 1, ... are opened until one
// fails (CUDA_VISIBLE_DEVICES respected, as CUDA numbers the devices it lets through from 0),
// and err says why when not even device 0 opens. An explicit list opens each GPU named; those
// that fail are in failed, each error naming its GPU, and err is set when none opens.
func openGPUs(want []int, maxDecoders int, open deviceOpener) (gpus []*gpu, failed []error, err error) {
	newGPU := func(i int, dev *astiav.HardwareDeviceContext) *gpu {
		return &gpu{index: i, dev: dev, slots: make(chan struct{}, max(maxDecoders, 1))}
	}
	if want == nil {
		n, why := visibleGPUs()
		if n == 0 {
			return nil, nil, fmt.Errorf("no usable NVIDIA GPU: %s", why)
		}
		for i := range n {
			dev, err := open(i)
			if err != nil {
				if i == 0 {
					return nil, nil, fmt.Errorf("no usable NVIDIA GPU: %w", err)
				}
				break // the end of the devices CUDA shows
			}
			gpus = append(gpus, newGPU(i, dev))
		}
		return gpus, nil, nil
	}
	for _, i := range want {
		dev, err := open(i)
		if err != nil {
			failed = append(failed, fmt.Errorf("GPU %d is not usable: %w", i, err))
			continue
		}
		gpus = append(gpus, newGPU(i, dev))
	}
	if len(gpus) == 0 {
		return nil, failed, fmt.Errorf("no usable NVIDIA GPU among %s: %w", FormatGPUs(want), errors.Join(failed...))
	}
	return gpus, failed, nil
}

// gpu is a CUDA device shared by a pool's decoders.
type gpu struct {
	index int                           // the CUDA device number, among those the process sees
	dev   *astiav.HardwareDeviceContext // nil: a stand-in (tests), whose decoders decode on the CPU
	// slots bounds the decoders open on the GPU at once, and with them its memory: each holds
	// its reference frames and output surfaces there.
	slots chan struct{}
	clips atomic.Int64 // clips NVDEC decoded here
	// memory is the estimated GPU memory of the decoders open here (nvdecBytes of each).
	memory atomic.Int64
}

func (g *gpu) close() {
	if g.dev != nil {
		g.dev.Free()
	}
}

// take reserves a GPU decoder slot without waiting.
func (g *gpu) take() bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// release gives back a slot taken and not used for a decoder (or one whose decoder never opened).
func (g *gpu) release() { <-g.slots }

// opened counts a decoder of the video opening in a slot taken here.
func (g *gpu) opened(info *Info) { g.memory.Add(nvdecBytes(info)) }

// closed gives back the slot of a decoder of the video that opened here (opened), and its memory.
// A decoder adopted by another video was of the same codec and size: the same estimate.
func (g *gpu) closed(info *Info) {
	g.memory.Add(-nvdecBytes(info))
	g.release()
}

// GPUStats is one GPU's part of a pool's work.
type GPUStats struct {
	Index       int   // the CUDA device number, among the devices the process sees
	Decoders    int   // decoders open on it, busy or idle
	MaxDecoders int   // PoolOptions.GPUDecoders: the bound on Decoders
	Clips       int64 // clips NVDEC decoded on it
	// MemoryBytes estimates the GPU memory of the decoders open on it (see nvdecBytes), beside
	// which the CUDA context of the device takes its own (a few hundred MB, once per GPU).
	MemoryBytes int64
}

func (g *gpu) stats() GPUStats {
	return GPUStats{Index: g.index, Decoders: len(g.slots), MaxDecoders: cap(g.slots), Clips: g.clips.Load(), MemoryBytes: g.memory.Load()}
}

// nvdecSurfaces is how many decode surfaces FFmpeg 7.1 has NVDEC allocate for a decoder of the
// codec, at most: the decoded picture buffer its nvdec_CODEC.c asks for (H.264 and HEVC at most
// 16 pictures, VP9 8, AV1 8 twice over for film grain, VP8 3, MPEG-1/2/4 and VC-1 2, MJPEG 1),
// the 2 FFmpeg adds, and the one output surface.
func nvdecSurfaces(codec string) int {
	dpb := 2
	switch codec {
	case "h264", "hevc", "av1", "libdav1d":
		dpb = 16
	case "vp9", "libvpx-vp9":
		dpb = 8
	case "vp8", "libvpx":
		dpb = 3
	case "mjpeg":
		dpb = 1
	}
	return dpb + 2 + 1
}

// nvdecBytes estimates the GPU memory of an NVDEC decoder of the video: its surfaces, NV12 (1.5
// bytes a pixel) of the coded size rounded up to 16 (a macroblock), times nvdecSurfaces. 57 MiB
// for 1080p H.264. It leaves out the driver's own state, and counts 8-bit surfaces: those of a
// 10-bit stream take twice as much.
func nvdecBytes(info *Info) int64 {
	w, h := int64(info.Width+15)&^15, int64(info.Height+15)&^15
	return w * h * 3 / 2 * int64(nvdecSurfaces(info.Codec))
}

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
	if g.dev == nil {
		return // a stand-in (tests): the decoder decodes on the CPU, holding g's slot
	}
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
