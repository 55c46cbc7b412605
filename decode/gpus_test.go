package decode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/asticode/go-astiav"

	"github.com/vidfs/vidfs/internal/testvideo"
)

// standIns is a deviceOpener of n stand-in GPUs (numbered 0..n-1; others fail, as CUDA's do past
// its last device), which counts the devices asked for.
type standIns struct {
	n      int
	mu     sync.Mutex // guards asked
	asked  []int
	refuse map[int]bool // GPUs that fail to open although numbered below n
}

func (s *standIns) open(i int) (*astiav.HardwareDeviceContext, error) {
	s.mu.Lock()
	s.asked = append(s.asked, i)
	s.mu.Unlock()
	if i >= s.n || s.refuse[i] {
		return nil, fmt.Errorf("stand-in: no GPU %d", i)
	}
	return nil, nil
}

func (s *standIns) askedFor() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.asked)
}

// TestParseGPUs: --gpus takes all or distinct GPU numbers, and says what is wrong with anything else.
func TestParseGPUs(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"all", "all", ""},
		{"0", "0", ""},
		{"0,2", "0,2", ""},
		{" 3, 1 ", "3,1", ""},
		{"", "", `want all or a comma-separated list of GPU numbers`},
		{" ", "", `want all or a comma-separated list of GPU numbers`},
		{"x", "", `"x" is not a GPU number`},
		{"-1", "", `"-1" is not a GPU number`},
		{"0,", "", `"" is not a GPU number`},
		{"0,0", "", `GPU 0 named twice`},
		{"1,2,1", "", `GPU 1 named twice`},
		{"64", "", `at most 64 GPUs`},
		{"All", "", `"All" is not a GPU number`},
	} {
		gpus, err := ParseGPUs(c.in)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("ParseGPUs(%q): %v", c.in, err)
		case c.err == "" && FormatGPUs(gpus) != c.want:
			t.Errorf("ParseGPUs(%q) = %s, want %s", c.in, FormatGPUs(gpus), c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseGPUs(%q) = %v, %v; want an error saying %q", c.in, gpus, err, c.err)
		}
	}
}

// TestGPUsDefault: without --gpus, every GPU the process sees is opened: devices 0, 1, ... until
// one fails, no more than CUDA_VISIBLE_DEVICES lists, and none at all, without asking the driver,
// where it is set and empty.
func TestGPUsDefault(t *testing.T) {
	for _, c := range []struct {
		env           *string
		opened, asked string
		err           string
	}{
		{env: nil, opened: "[0 1 2]", asked: "[0 1 2 3]"},
		{env: ptr(""), opened: "[]", asked: "[]", err: "CUDA_VISIBLE_DEVICES is set and empty"},
		{env: ptr("2,3"), opened: "[0 1]", asked: "[0 1]"},
		{env: ptr("GPU-5f0c,GPU-77aa,GPU-0000,GPU-1111,GPU-2222"), opened: "[0 1 2]", asked: "[0 1 2 3]"},
	} {
		if c.env == nil {
			t.Setenv("CUDA_VISIBLE_DEVICES", "") // restored after the test
			os.Unsetenv("CUDA_VISIBLE_DEVICES")
		} else {
			t.Setenv("CUDA_VISIBLE_DEVICES", *c.env)
		}
		dev := &standIns{n: 3}
		gpus, failed, err := openGPUs(nil, 2, dev.open)
		var opened []int
		for _, g := range gpus {
			opened = append(opened, g.index)
			if cap(g.slots) != 2 {
				t.Errorf("GPU %d: %d decoder slots, want 2", g.index, cap(g.slots))
			}
		}
		env := "unset"
		if c.env != nil {
			env = fmt.Sprintf("%q", *c.env)
		}
		if got := fmt.Sprint(opened); got != c.opened {
			t.Errorf("CUDA_VISIBLE_DEVICES %s: opened GPUs %s, want %s", env, got, c.opened)
		}
		if got := dev.askedFor(); got != c.asked {
			t.Errorf("CUDA_VISIBLE_DEVICES %s: asked for devices %s, want %s", env, got, c.asked)
		}
		if len(failed) > 0 {
			t.Errorf("CUDA_VISIBLE_DEVICES %s: failures %v for all GPUs (the end of the devices is no failure)", env, failed)
		}
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("CUDA_VISIBLE_DEVICES %s: error %v, want %q", env, err, c.err)
		}
	}

	// No GPU at all (device 0 fails): auto decodes on the CPU, cuda fails, saying why.
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	os.Unsetenv("CUDA_VISIBLE_DEVICES")
	none := &standIns{n: 0}
	if _, err := NewPool(PoolOptions{HWAccel: HWCUDA, openDevice: none.open}); err == nil || !strings.Contains(err.Error(), "--hwaccel cuda: no usable NVIDIA GPU: stand-in: no GPU 0") {
		t.Errorf("cuda without a GPU: %v", err)
	}
	p, err := NewPool(PoolOptions{HWAccel: HWAuto, openDevice: none.open})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.gpus) != 0 {
		t.Errorf("auto without a GPU: %d GPUs in use", len(p.gpus))
	}
	p.Close()
}

func ptr[T any](v T) *T { return &v }

// TestGPUsNamed: a GPU named in --gpus that cannot be opened fails the pool under --hwaccel cuda,
// naming it, and is logged and left out under auto.
func TestGPUsNamed(t *testing.T) {
	dev := &standIns{n: 4, refuse: map[int]bool{1: true}}
	_, err := NewPool(PoolOptions{HWAccel: HWCUDA, GPUs: []int{0, 1, 3}, openDevice: dev.open})
	if err == nil || !strings.Contains(err.Error(), "--hwaccel cuda: GPU 1 is not usable: stand-in: no GPU 1") {
		t.Errorf("cuda with GPU 1 unusable: %v", err)
	}
	_, err = NewPool(PoolOptions{HWAccel: HWCUDA, GPUs: []int{5}, openDevice: dev.open})
	if err == nil || !strings.Contains(err.Error(), "no usable NVIDIA GPU among 5: GPU 5 is not usable") {
		t.Errorf("cuda with GPU 5 missing: %v", err)
	}

	var log bytes.Buffer
	p, err := NewPool(PoolOptions{HWAccel: HWAuto, GPUs: []int{3, 1, 0}, GPUDecoders: 5, openDevice: dev.open,
		Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var got []string
	for _, g := range p.Stats().GPUs {
		got = append(got, fmt.Sprintf("%d:%d", g.Index, g.MaxDecoders))
	}
	if fmt.Sprint(got) != "[3:5 0:5]" {
		t.Errorf("GPUs in use (number:decoders): %v, want [3:5 0:5]", got)
	}
	for _, want := range []string{"leaving out a GPU", "GPU 1 is not usable", "gpus=3,0 gpu_decoders_each=5"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

// alike makes n videos encoded alike (links to one file), probed.
func alike(t *testing.T, n int) []*Info {
	t.Helper()
	dir := t.TempDir()
	var infos []*Info
	for i := range n {
		path := filepath.Join(dir, fmt.Sprintf("v%d.mp4", i))
		if err := os.Symlink(testvideo.Path("h264_gop16.mp4"), path); err != nil {
			t.Fatal(err)
		}
		info, err := Probe(path)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	return infos
}

// gpuOf names the stand-in GPU a decoder holds a slot of, or "cpu".
func gpuOf(v *video) string {
	if v.g == nil {
		return "cpu"
	}
	return fmt.Sprint(v.g.index)
}

// perGPU gives each GPU's decoders open and estimated memory in decoders' worth of info.
func perGPU(p *Pool, info *Info) string {
	var s []string
	for _, g := range p.Stats().GPUs {
		s = append(s, fmt.Sprintf("%d:%d/%.0f", g.Index, g.Decoders, float64(g.MemoryBytes)/float64(nvdecBytes(info))))
	}
	return fmt.Sprint(s)
}

// TestGPUSpread, with two stand-in GPUs of two decoders each (their decoders decode on the CPU but
// hold GPU slots as NVDEC decoders do): new GPU decoders go to the GPU with the fewest open, the
// rest to the CPU; a decoder that closes frees its own GPU's slot, which the next video takes; an
// idle one is reclaimed from its own GPU; the bound and the memory estimate hold per GPU.
func TestGPUSpread(t *testing.T) {
	dev := &standIns{n: 2}
	p, err := NewPool(PoolOptions{Concurrency: 8, HWAccel: HWCUDA, GPUDecoders: 2, openDevice: dev.open})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	DisableAdoption(p)
	infos := alike(t, 10)
	if nvdecBytes(infos[0]) != 320*240*3/2*19 {
		t.Fatalf("estimate for 320x240 H.264: %d bytes, want 19 NV12 surfaces", nvdecBytes(infos[0]))
	}
	var open []*video
	var where []string
	for _, info := range infos[:8] {
		v, err := p.take(info, 0)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, v)
		where = append(where, gpuOf(v))
	}
	if got, want := fmt.Sprint(where), "[0 1 0 1 cpu cpu cpu cpu]"; got != want {
		t.Errorf("8 videos over 2 GPUs of 2 decoders: opened on %s, want %s", got, want)
	}
	if got, want := perGPU(p, infos[0]), "[0:2/2 1:2/2]"; got != want {
		t.Errorf("GPU:decoders/memory in decoders: %s, want %s", got, want)
	}

	// A decoder of GPU 1 finishes and closes: its slot is GPU 1's, and the next video takes it.
	p.mu.Lock()
	p.closeLocked(open[3])
	p.mu.Unlock()
	if got, want := perGPU(p, infos[0]), "[0:2/2 1:1/1]"; got != want {
		t.Errorf("after closing a decoder of GPU 1: %s, want %s", got, want)
	}
	v, err := p.take(infos[8], 0)
	if err != nil {
		t.Fatal(err)
	}
	if gpuOf(v) != "1" {
		t.Errorf("the next video opened on %s, want GPU 1, whose slot was freed", gpuOf(v))
	}
	open[3] = v

	// A decoder of GPU 0 goes idle: a new video, finding every GPU full, reclaims it.
	p.put(open[0])
	v, err = p.take(infos[9], 0)
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); gpuOf(v) != "0" || st.GPUReclaims != 1 {
		t.Errorf("with GPU 0's decoder idle: opened on %s, %d reclaims; want GPU 0, 1", gpuOf(v), st.GPUReclaims)
	}
	open[0] = v
	if got, want := perGPU(p, infos[0]), "[0:2/2 1:2/2]"; got != want {
		t.Errorf("after the reclaim: %s, want %s", got, want)
	}
	for _, v := range open {
		p.put(v)
	}

	// Clips decoded at once, 8 at a time over 10 videos: right, and never more than 2 decoders a GPU.
	o := Output{Width: 32, Height: 32, Resize: Stretch}
	c := Clip{Start: 20, Frames: 4, Stride: 2}
	want := make([]byte, c.Frames*o.FrameBytes())
	if _, err := DecodeClip(context.Background(), infos[0], c, o, want, 1); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			got := make([]byte, len(want))
			if _, err := p.DecodeClip(context.Background(), infos[i%len(infos)], c, o, got); err != nil {
				errs <- err
			} else if !bytes.Equal(got, want) {
				errs <- errors.New("frames differ from the CPU's")
			}
			for _, g := range p.Stats().GPUs {
				if g.Decoders > 2 {
					errs <- fmt.Errorf("GPU %d: %d decoders open, bound 2", g.Index, g.Decoders)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	p.Close()
	if got, want := perGPU(p, infos[0]), "[0:0/0 1:0/0]"; got != want {
		t.Errorf("after Close: %s, want %s", got, want)
	}
}

// TestGPUAdoptionStays: an idle GPU decoder adopted by another video stays on its own GPU, with
// its slot and memory there.
func TestGPUAdoptionStays(t *testing.T) {
	dev := &standIns{n: 2}
	p, err := NewPool(PoolOptions{Concurrency: 4, HWAccel: HWCUDA, GPUDecoders: 2, openDevice: dev.open})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	infos := alike(t, 3)
	a, err := p.take(infos[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.take(infos[1], 0)
	if err != nil {
		t.Fatal(err)
	}
	if gpuOf(a) != "0" || gpuOf(b) != "1" {
		t.Fatalf("two videos opened on %s and %s, want 0 and 1", gpuOf(a), gpuOf(b))
	}
	p.put(b)
	c, err := p.take(infos[2], 0)
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); c != b || gpuOf(c) != "1" || st.Adoptions != 1 {
		t.Errorf("a third video alike, GPU 1's decoder idle: got a decoder on %s (adopted: %v), %d adoptions; want GPU 1's, 1",
			gpuOf(c), c == b, st.Adoptions)
	}
	if got, want := perGPU(p, infos[0]), "[0:1/1 1:1/1]"; got != want {
		t.Errorf("after the adoption: %s, want %s", got, want)
	}
	p.put(a)
	p.put(c)
}

// TestNVDECPerGPU, where there are GPUs: every GPU the process sees opens, clips NVDEC decoded
// are counted on the GPU that decoded them (adding up to ClipsGPU), and each GPU's memory
// estimate is its open decoders' (one size of video here).
func TestNVDECPerGPU(t *testing.T) {
	p, err := NewPool(PoolOptions{Concurrency: 8, HWAccel: HWCUDA, GPUDecoders: 2})
	if err != nil {
		t.Skipf("NVDEC test not run: %v. It runs on machines with an NVIDIA GPU and driver.", err)
	}
	defer p.Close()
	DisableAdoption(p)
	infos := alike(t, 8)
	o := Output{Width: 32, Height: 32, Resize: Stretch}
	c := Clip{Start: 20, Frames: 4, Stride: 2}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Go(func() {
			if _, err := p.DecodeClip(context.Background(), infos[i%len(infos)], c, o, make([]byte, c.Frames*o.FrameBytes())); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := p.Stats()
	var clips int64
	for _, g := range st.GPUs {
		t.Logf("GPU %d: %d of %d decoders open, %d bytes estimated, %d clips", g.Index, g.Decoders, g.MaxDecoders, g.MemoryBytes, g.Clips)
		clips += g.Clips
		if g.MemoryBytes != int64(g.Decoders)*nvdecBytes(infos[0]) {
			t.Errorf("GPU %d: %d bytes estimated for %d decoders, want %d each", g.Index, g.MemoryBytes, g.Decoders, nvdecBytes(infos[0]))
		}
	}
	if clips != st.ClipsGPU || st.ClipsGPU == 0 {
		t.Errorf("clips on the GPUs: %d in all, ClipsGPU %d; want equal, and some", clips, st.ClipsGPU)
	}
}
