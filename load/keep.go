package load

// What the disk under --cache-dir keeps (samples, or the training copy of frames), how the training copy fills, and
// the codec each store writes with.

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/enum"
	"github.com/vidfs/vidfs/tier"
)

// Keep says what the disk under Disk.Dir keeps of what is decoded.
type Keep int

const (
	// KeepAuto keeps what the directory holds from earlier mounts; in an empty one, frames where
	// the samples share frames or do not fit as they are, else samples (copyKeep).
	KeepAuto Keep = iota
	// KeepSamples is the sample tier: each sample's bytes, for the samples read again as they
	// are (the same clips every epoch).
	KeepSamples
	// KeepCopy is the training copy: each frame any sample needs, once, so that any clip of a
	// video whose frames are there is served with no decode (fresh random clips every epoch).
	KeepCopy
)

var keepNames = []string{KeepAuto: "auto", KeepSamples: "samples", KeepCopy: "copy"}

// String is k's name, as --cache-keep takes it.
func (k Keep) String() string { return enum.Name(keepNames, "Keep", k) }

// ParseKeep reads "auto", "samples" or "copy" (or "frames", copy's name before: still taken).
func ParseKeep(s string) (Keep, error) {
	if s == "frames" {
		return KeepCopy, nil
	}
	return enum.Parse[Keep](keepNames, "cache-keep", s)
}

// Fill says when the training copy takes a video's frames.
type Fill int

const (
	// FillAuto is FillClips, and more: a video the plans read again (another of its samples is
	// due) is decoded whole when one of its samples is loaded, or while the decoders are idle,
	// within a budget of CPU (budgetShare of each clip served beyond what the copy saves), so
	// that the copy comes to hold the videos read over the epochs at little more than the cost
	// of decoding their clips.
	FillAuto Fill = iota
	// FillClips keeps the frames of each sample decoded for a reader: no decode beyond what
	// the readers ask for, and the copy fills over the epochs as clips land in each video.
	FillClips
	// FillVideos decodes each video whole, once, the first time one of its samples is loaded,
	// from that sample on, whatever it costs: the copy holds every video read once after one
	// epoch. The load waits for the sample's frames only (docs/design.md, "The training copy").
	FillVideos
)

var fillNames = []string{FillAuto: "auto", FillClips: "clips", FillVideos: "videos"}

// String is f's name, as --copy-fill takes it.
func (f Fill) String() string { return enum.Name(fillNames, "Fill", f) }

// ParseFill reads "auto", "clips" or "videos".
func ParseFill(s string) (Fill, error) { return enum.Parse[Fill](fillNames, "copy-fill", s) }

// held is what a directory given as --cache-dir holds from earlier mounts: a sample tier's
// entries, a training copy's frames (of this format or an earlier one).
type held struct{ samples, frames bool }

// diskHolds looks in dir for what earlier mounts kept there.
func diskHolds(dir string) held {
	h := held{samples: diskstore.HoldsKeys(filepath.Join(dir, diskstore.SamplesDir))}
	if names, err := os.ReadDir(filepath.Join(dir, diskstore.FramesDir)); err == nil {
		for _, n := range names {
			if n.IsDir() && diskstore.HoldsKeys(filepath.Join(dir, diskstore.FramesDir, n.Name())) {
				h.frames = true
			}
		}
	}
	return h
}

// copyKeep is what the disk keeps. Asked for one kind where the directory holds the other (and
// not this one), it fails rather than leave what took hours to make unused (nothing a mount
// keeps is removed for a changed flag). Not asked, it keeps what the directory holds; in an empty
// one, frames where the samples share frames (the frames they use take less room than the
// samples) or the samples do not fit within the bound as they are, and samples only where each
// sample has frames of its own and every sample fits.
func copyKeep(asked Keep, dir string, h held, samples int, sampleBytes, framesBytes, bound int64) (Keep, string, error) {
	need := int64(samples) * (sampleBytes + tier.HeaderSize)
	switch {
	case asked == KeepSamples && h.frames && !h.samples:
		return 0, "", fmt.Errorf("--cache-keep samples: %s holds a training copy (frames, in %s) that earlier mounts made, which a mount keeping samples would not use: keep the copy (--cache-keep copy, or leave --cache-keep out), give another --cache-dir, or remove %s yourself to start over",
			dir, filepath.Join(dir, diskstore.FramesDir), filepath.Join(dir, diskstore.FramesDir))
	case asked == KeepCopy && h.samples && !h.frames:
		return 0, "", fmt.Errorf("--cache-keep copy: %s holds a disk tier of samples (in %s) that earlier mounts made, which a mount keeping a training copy would not use: keep samples (--cache-keep samples, or leave --cache-keep out), give another --cache-dir, or remove %s yourself to start over",
			dir, filepath.Join(dir, diskstore.SamplesDir), filepath.Join(dir, diskstore.SamplesDir))
	case asked != KeepAuto:
		return asked, "asked for (--cache-keep)", nil
	case h.frames:
		return KeepCopy, "the directory holds a training copy an earlier mount made", nil
	case h.samples:
		return KeepSamples, "the directory holds samples an earlier mount kept", nil
	case framesBytes < int64(samples)*sampleBytes:
		return KeepCopy, fmt.Sprintf("the samples share frames: the frames they use take %d MiB, the samples %d MiB (the bound %d MiB): a training copy, each frame kept once, so that fresh clips are served too",
			framesBytes>>20, need>>20, bound>>20), nil
	case need > bound:
		return KeepCopy, fmt.Sprintf("the samples do not fit as they are (%d MiB, the bound %d MiB): a training copy, each frame kept once", need>>20, bound>>20), nil
	}
	return KeepSamples, fmt.Sprintf("each sample has frames of its own and every sample fits as it is (%d MiB of %d MiB): samples, served mapped", need>>20, bound>>20), nil
}

// framesUsed counts the frames the samples use, over every video. A video's samples, and so
// the frames they use, follow from its length alone: counted once a length, not once a video
// (at mount, before anything is served).
func (l *Loader) framesUsed() int64 {
	var need []uint64
	byLength := map[int]int{}
	frames := int64(0)
	for v, vid := range l.lay.Videos {
		n, ok := byLength[vid.Frames]
		if !ok {
			need, n = l.needBits(v, need)
			byLength[vid.Frames] = n
		}
		frames += int64(n)
	}
	return frames
}

// frameCodec is the codec the training copy writes with: the one asked for, or when none was,
// none if every frame the samples use fits within the bound as it is (the least CPU in every
// epoch), else huff (the most frames in the room there is, for little CPU a frame read back: a
// frame the copy cannot hold costs a decode, far more; docs/benchmarks.md has the figures).
func (l *Loader) frameCodec(asked diskstore.Codec, bound int64) (diskstore.Codec, string) {
	if asked != 0 {
		return asked, "asked for (--cache-disk-codec)"
	}
	frames := l.framesUsed()
	bytes := frames * int64(l.out.FrameBytes())
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
