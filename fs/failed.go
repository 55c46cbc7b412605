package fs

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/enum"
)

// OnError says what a read of a sample that cannot be decoded gets.
type OnError int

const (
	// OnErrorEIO fails the read with EIO (a memory-mapped read of it raises SIGBUS).
	OnErrorEIO OnError = iota
	// OnErrorSubstitute serves a good sample of the same video instead, or if it has none, one of
	// the same class, or if there is none, zeros.
	OnErrorSubstitute
	// OnErrorZeros serves zeros.
	OnErrorZeros
)

var onErrorNames = []string{OnErrorEIO: "eio", OnErrorSubstitute: "substitute", OnErrorZeros: "zeros"}

// String is o's name, as --on-error takes it.
func (o OnError) String() string { return enum.Name(onErrorNames, "OnError", o) }

// ParseOnError reads "eio", "substitute" or "zeros".
func ParseOnError(s string) (OnError, error) { return enum.Parse[OnError](onErrorNames, "on-error", s) }

// maxCandidates bounds the samples tried in place of one that failed.
const maxCandidates = 16

// Served in place of a failed sample, beside another sample's index.
const servedZeros = -1

// failures is what reads of failed samples get instead: another sample or zeros, chosen once per
// sample and kept; and the accesses so served. Which samples failed, and why, is the cache's
// record (cache.Failures), not this one's.
type failures struct {
	mu                 sync.Mutex  // guards the fields below; taken with no other lock held
	served             map[int]int // failed sample -> the sample served in its place, or servedZeros
	substitute, zeroed int64       // accesses served with another sample, with zeros
}

// servedFor returns what is served for a failed sample, and whether it was decided.
func (fl *failures) servedFor(sample int) (int, bool) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	with, ok := fl.served[sample]
	return with, ok
}

// serve records what a failed sample's reads get, and counts one such read.
func (fl *failures) serve(sample, with int) (first bool) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.served == nil {
		fl.served = map[int]int{}
	}
	_, known := fl.served[sample]
	fl.served[sample] = with
	if with == servedZeros {
		fl.zeroed++
	} else {
		fl.substitute++
	}
	return !known
}

// counts returns the accesses served with another sample and with zeros.
func (fl *failures) counts() (substitute, zeroed int64) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.substitute, fl.zeroed
}

// failedCSV is .vidfs/failed: sample, file, frame, reason, served (a sample's index, "zeros" or
// "EIO": nothing was served yet, or the mount fails its reads), one row per sample the cache
// holds failed, in sample order.
func (f *FS) failedCSV() []byte {
	failed := f.cache.Failures()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"sample", "file", "frame", "reason", "served"})
	for _, k := range slices.Sorted(maps.Keys(failed)) {
		p := ProblemOf(f.sampleFile(k), k, failed[k]) // the reason apart from the file and frame
		frame, served := "", "EIO"
		if p.Frame != nil {
			frame = strconv.Itoa(*p.Frame)
		}
		if with, ok := f.failed.servedFor(k); ok && with == servedZeros {
			served = "zeros"
		} else if ok {
			served = strconv.Itoa(with)
		}
		w.Write([]string{strconv.Itoa(k), p.File, frame, p.Reason, served})
	}
	w.Flush()
	return b.Bytes()
}

// insteadOf returns what is served for sample, whose decode failed, under the mount's policy: a
// pinned good sample, or nil for zeros. The choice is made once and kept, so that every read of
// the sample gets the same bytes.
func (f *FS) insteadOf(ctx context.Context, sample int) (*cache.Handle, error) {
	cause := f.cache.Failed(sample)
	if cause == nil {
		return nil, fmt.Errorf("sample %d: nothing is served in place of a sample that has not failed", sample)
	}
	if with, ok := f.failed.servedFor(sample); ok {
		f.failed.serve(sample, with)
		if with == servedZeros {
			return nil, nil
		}
		h, _, err := f.cache.Get(ctx, with)
		return h, err
	}
	if f.cfg.OnError == OnErrorSubstitute {
		for _, c := range f.candidates(sample, wholeFile(cause)) {
			if f.cache.Failed(c) != nil {
				continue
			}
			h, _, err := f.cache.Get(ctx, c)
			if err == nil {
				if f.failed.serve(sample, c) {
					f.log.Warn("sample failed; serving another in its place", "sample", sample, "file", f.sampleFile(sample),
						"instead", c, "instead_file", f.sampleFile(c))
				}
				return h, nil
			}
			if !f.failedLoad(c, err) { // the cache closed, or the reader gave up: no zeros for that
				return nil, err
			}
		}
	}
	if f.failed.serve(sample, servedZeros) {
		f.log.Warn("sample failed; serving zeros in its place", "sample", sample, "file", f.sampleFile(sample))
	}
	return nil, nil
}

// sampleFile is the source video of sample i.
func (f *FS) sampleFile(i int) string { return f.lay.Videos[f.lay.Sample(i).Video].Path }

// wholeFile tells whether err concerns a whole video file rather than some of its data, so that
// none of its samples can stand in for another.
func wholeFile(err error) bool {
	for _, k := range []error{decode.ErrUnreadable, decode.ErrNotVideo, decode.ErrNoVideo, decode.ErrUnsupportedCodec, decode.ErrChanged, decode.ErrCrashed} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// candidates lists the samples to try in place of sample i: the other samples of its video,
// nearest first (unless otherVideos), then those of the other videos of its class, nearest in
// clips.npy first; at most maxCandidates.
func (f *FS) candidates(i int, otherVideos bool) []int {
	lay := f.lay
	v := lay.Sample(i).Video
	var cs []int
	first, end := lay.VideoSamples(v)
	if otherVideos {
		first, end = i, i+1
	}
	for d := 1; len(cs) < maxCandidates && (i-d >= first || i+d < end); d++ {
		for _, j := range []int{i - d, i + d} {
			if j >= first && j < end && len(cs) < maxCandidates {
				cs = append(cs, j)
			}
		}
	}
	label := lay.Label(v)
	if label < 0 {
		return cs
	}
	for d := 1; len(cs) < maxCandidates && (v-d >= 0 || v+d < len(lay.Videos)); d++ {
		for _, w := range []int{v - d, v + d} {
			if w < 0 || w >= len(lay.Videos) || lay.Label(w) != label {
				continue
			}
			wf, we := lay.VideoSamples(w)
			for k := range we - wf {
				if len(cs) == maxCandidates {
					break
				}
				if w < v {
					cs = append(cs, we-1-k) // a video before: from its end
				} else {
					cs = append(cs, wf+k)
				}
			}
		}
	}
	return cs
}
