package decode

import (
	"log/slog"
	"sort"
	"sync"
)

// videoState is what decoding a video has taught about it, shared by the decoders open on it
// (through the Pool): the keyframes not to start from, and the groups of pictures whose damage
// decoding from the start of the file confirmed. Safe for concurrent use.
type videoState struct {
	log *slog.Logger
	// users counts the decoders open on the video with this state. Guarded by Pool.mu.
	users int

	mu         sync.Mutex
	unusable   map[int]bool // keyframes (indexes in Info.Keyframes)
	realDamage map[int]bool // groups of pictures (the index of their keyframe)
	marked     []int        // frames of the keyframes marked unusable since the state was made
}

// newVideoState starts from what the probe table says: its keyframes marked unusable.
func newVideoState(info *Info, log *slog.Logger) *videoState {
	s := &videoState{log: log, unusable: map[int]bool{}, realDamage: map[int]bool{}}
	for i, k := range info.Keyframes {
		if k.Unusable && i > 0 {
			s.unusable[i] = true
		}
	}
	return s
}

// usableAtOrBefore returns the last keyframe at or before frame that decoding may start from.
// Keyframe 0, the start of the file, always may.
func (s *videoState) usableAtOrBefore(info *Info, frame int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := info.KeyframeAtOrBefore(frame)
	for k > 0 && s.unusable[k] {
		k--
	}
	return k
}

// markUnusable records that starting from each of the keyframes failed gave damage that starting
// from keyframe good did not.
func (s *videoState) markUnusable(info *Info, failed []int, good int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range failed {
		if k <= good || s.unusable[k] {
			continue
		}
		s.unusable[k] = true
		s.marked = append(s.marked, info.Keyframes[k].Frame)
		if s.log != nil {
			s.log.Info("a keyframe is no clean starting point: decoding from it damages frames that decoding from earlier does not; clips will start earlier",
				"file", info.Path, "keyframe", info.Keyframes[k].Frame, "starting_from", info.Keyframes[good].Frame)
		}
	}
}

// confirm records that the damage at frame was seen decoding from the start of the file.
func (s *videoState) confirm(info *Info, frame int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.realDamage[info.KeyframeAtOrBefore(frame)] = true
}

// confirmed tells whether damage in frame's group of pictures was seen decoding from the start.
func (s *videoState) confirmed(info *Info, frame int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.realDamage[info.KeyframeAtOrBefore(frame)]
}

// markedFrames returns the frames of the keyframes marked unusable since the state was made.
func (s *videoState) markedFrames() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := append([]int(nil), s.marked...)
	sort.Ints(m)
	return m
}

// learned tells whether decoding taught anything the probe table does not hold: keyframes found
// unusable, or damage confirmed.
func (s *videoState) learned() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.marked) > 0 || len(s.realDamage) > 0
}
