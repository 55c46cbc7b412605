package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/wire"
)

// TestGPUsFlag: mount, verify and clip take --gpus (all, or GPU numbers), refuse anything else on
// the command line (exit 2) saying what is wrong, and under --hwaccel cuda fail before probing
// when a GPU named, or every GPU, cannot be used, naming it.
func TestGPUsFlag(t *testing.T) {
	src, mnt := t.TempDir(), t.TempDir()
	for _, c := range []struct{ value, want string }{
		{"x", `"x" is not a GPU number`},
		{"-1", `"-1" is not a GPU number`},
		{"0,0", "GPU 0 named twice"},
		{"", "want all or a comma-separated list of GPU numbers"},
	} {
		for _, args := range [][]string{{"mount", src, mnt}, {"verify", src}, {"clip", src, "-o", "-"}} {
			code, _, errs := vidfs(t, append(args, "--gpus="+c.value)...)
			if code != 2 || !strings.Contains(errs, c.want) {
				t.Errorf("%s --gpus=%q: exit %d, %q; want 2 and %q", args[0], c.value, code, errs, c.want)
			}
		}
	}

	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	code, _, errs := vidfs(t, "mount", src, mnt, "--hwaccel", "cuda", "--probe-cache", "")
	if code != 1 || !strings.Contains(errs, "--hwaccel cuda: no usable NVIDIA GPU: CUDA_VISIBLE_DEVICES is set and empty") {
		t.Errorf("mount --hwaccel cuda, CUDA_VISIBLE_DEVICES empty: exit %d, %q", code, errs)
	}
	t.Setenv("CUDA_VISIBLE_DEVICES", "0")
	if decode.CheckGPUs([]int{1}) == nil {
		t.Skip("GPU 1 is usable here though CUDA_VISIBLE_DEVICES shows one GPU")
	}
	code, _, errs = vidfs(t, "mount", src, mnt, "--hwaccel", "cuda", "--gpus", "1", "--probe-cache", "")
	if code != 1 || !strings.Contains(errs, "--hwaccel cuda: no usable NVIDIA GPU among 1: GPU 1 is not usable") {
		t.Errorf("mount --hwaccel cuda --gpus 1 with one GPU visible at most: exit %d, %q", code, errs)
	}
}

// TestStatsGPUs: vidfs stats shows each GPU's decoders, their estimated memory and its clips.
func TestStatsGPUs(t *testing.T) {
	st := wire.Stats{Decode: wire.DecodeStats{ByDecoder: wire.DecoderClips{NVDEC: 30}, GPUs: []wire.GPUStats{
		{Index: 0, Decoders: 8, MaxDecoders: 8, Clips: 20, DecoderMemoryBytes: 8 * 59_535_360},
		{Index: 1, Decoders: 2, MaxDecoders: 8, Clips: 10, DecoderMemoryBytes: 2 * 59_535_360},
	}}}
	var b bytes.Buffer
	printStats(&b, "/mnt", wire.Dataset{}, st)
	for _, want := range []string{
		"GPU 0: 8 of 8 decoders open, about 454.2MiB of their surfaces (estimated); 20 clips on NVDEC\n",
		"GPU 1: 2 of 8 decoders open, about 113.6MiB of their surfaces (estimated); 10 clips on NVDEC\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("vidfs stats lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	printStats(&b, "/mnt", wire.Dataset{}, wire.Stats{})
	if strings.Contains(b.String(), "of their surfaces") {
		t.Errorf("vidfs stats of a mount without GPUs shows one:\n%s", b.String())
	}
}
