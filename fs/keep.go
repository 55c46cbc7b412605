package fs

// What the disk under --cache-dir keeps (samples or frames), how the training copy fills, and
// the codec each store writes with.

import (
	"fmt"

	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/enum"
	"github.com/vidfs/vidfs/tier"
)

// Keep says what the disk under Config.TierDir keeps of what is decoded.
type Keep int

const (
	// KeepAuto keeps samples when every sample of the layout fits within the bound as it is
	// (their files are mapped and served without a copy: a hit costs what a memory hit does),
	// else frames.
	KeepAuto Keep = iota
	// KeepSamples is the sample tier: each sample's bytes, for the samples read again as they
	// are (the same clips every epoch).
	KeepSamples
	// KeepFrames is the training copy: each frame any sample needs, once, so that any clip of
	// a video whose frames are there is served with no decode (fresh random clips every epoch).
	KeepFrames
)

var keepNames = []string{KeepAuto: "auto", KeepSamples: "samples", KeepFrames: "frames"}

// String is k's name, as --cache-keep takes it.
func (k Keep) String() string { return enum.Name(keepNames, "Keep", k) }

// ParseKeep reads "auto", "samples" or "frames".
func ParseKeep(s string) (Keep, error) { return enum.Parse[Keep](keepNames, "cache-keep", s) }

// Fill says when the training copy takes a video's frames.
type Fill int

const (
	// FillClips keeps the frames of each sample decoded for a reader: no decode beyond what
	// the readers ask for, and the copy fills over the epochs as clips land in each video.
	FillClips Fill = iota
	// FillVideos decodes each video whole, once, the first time one of its samples is loaded,
	// in place of that sample's decode, and serves the sample from the copy: the copy holds
	// every video read once after one epoch. (At load, not in the background, so that the
	// whole videos keep up with the readers: docs/design.md, "The training copy".)
	FillVideos
)

var fillNames = []string{FillClips: "clips", FillVideos: "videos"}

// String is f's name, as --copy-fill takes it.
func (f Fill) String() string { return enum.Name(fillNames, "Fill", f) }

// ParseFill reads "clips" or "videos".
func ParseFill(s string) (Fill, error) { return enum.Parse[Fill](fillNames, "copy-fill", s) }

// copyKeep is what the disk keeps: the one asked for, or when none was, samples if every sample
// of the layout fits within the bound as it is, else frames.
func copyKeep(asked Keep, samples int, sampleBytes, bound int64) (Keep, string) {
	if asked != KeepAuto {
		return asked, "asked for (--cache-keep)"
	}
	need := int64(samples) * (sampleBytes + tier.HeaderSize)
	if need <= bound {
		return KeepSamples, fmt.Sprintf("every sample fits as it is (%d MiB of %d MiB): samples, served mapped", need>>20, bound>>20)
	}
	return KeepFrames, fmt.Sprintf("the samples do not fit as they are (%d MiB, the bound %d MiB): frames, each kept once", need>>20, bound>>20)
}

// frameCodec is the codec the training copy writes with: the one asked for, or when none was,
// none if every frame the samples use fits within the bound as it is (the least CPU in every
// epoch), else huff (the most frames in the room there is, for little CPU a frame read back: a
// frame the copy cannot hold costs a decode, far more; docs/benchmarks.md has the figures).
func (f *FS) frameCodec(asked diskstore.Codec, bound int64) (diskstore.Codec, string) {
	if asked != 0 {
		return asked, "asked for (--cache-disk-codec)"
	}
	// A video's samples, and so the frames they use, follow from its length alone: counted once
	// a length, not once a video (at mount, before anything is served).
	var need []uint64
	byLength := map[int]int{}
	frames := int64(0)
	for v, vid := range f.lay.Videos {
		n, ok := byLength[vid.Frames]
		if !ok {
			need, n = f.needBits(v, need)
			byLength[vid.Frames] = n
		}
		frames += int64(n)
	}
	bytes := frames * int64(f.out.FrameBytes())
	if bytes <= bound {
		return diskstore.None, fmt.Sprintf("every frame the samples use fits as it is (%d frames, %d MiB of %d MiB)", frames, bytes>>20, bound>>20)
	}
	return diskstore.Huff, fmt.Sprintf("the frames the samples use do not fit as they are (%d frames, %d MiB, the bound %d MiB): the smallest lossless", frames, bytes>>20, bound>>20)
}

// tierCodec is the codec the disk tier writes with: the one asked for, or when none was, none
// if every sample of the layout fits within the tier's bound uncompressed (the least CPU, in
// every epoch), else zstd (the most samples in the room there is: a sample the tier cannot
// hold costs a decode, far more than a hit's decompression; docs/benchmarks.md).
func tierCodec(asked diskstore.Codec, samples int, sampleBytes, bound int64) (diskstore.Codec, string) {
	if asked != 0 {
		return asked, "asked for (--cache-disk-codec)"
	}
	need := int64(samples) * (sampleBytes + tier.HeaderSize)
	if need <= bound {
		return diskstore.None, fmt.Sprintf("every sample fits uncompressed (%d MiB of %d MiB)", need>>20, bound>>20)
	}
	return diskstore.Zstd, fmt.Sprintf("the samples do not fit uncompressed (%d MiB, the bound %d MiB): the smallest", need>>20, bound>>20)
}
