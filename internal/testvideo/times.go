package testvideo

import (
	"encoding/json"
	"math/big"
	"os/exec"
	"testing"
)

// Times is how a video's frames are timed, read with the ffprobe CLI (Debian's), apart from
// vidfs's own probe: each frame's presentation timestamp, in the order ffprobe lists the decoded
// frames (frame k is the k-th), or, where a frame has none or they do not increase (AVI), the
// stream's average frame rate. Expected and Count give the frames a clip at a target rate must
// hold, by the rule docs/design.md states, worked out in exact fractions.
type Times struct {
	Frames int
	// PTS holds every frame's timestamp in TimeBase units; nil when the frames are timed by Rate.
	PTS      []int64
	TimeBase *big.Rat
	Rate     *big.Rat // the stream's average frame rate
}

// ProbeTimes reads path's frame times with ffprobe -show_frames.
func ProbeTimes(tb testing.TB, path string) Times {
	tb.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-threads", "1", "-select_streams", "v:0",
		"-show_entries", "frame=pts:stream=time_base,avg_frame_rate", "-of", "json", path).Output()
	if err != nil {
		tb.Fatalf("ffprobe -show_frames %s (Debian's ffmpeg): %v", path, err)
	}
	var r struct {
		Frames []struct {
			PTS *int64 `json:"pts"`
		} `json:"frames"`
		Streams []struct {
			TimeBase     string `json:"time_base"`
			AvgFrameRate string `json:"avg_frame_rate"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Streams) != 1 || len(r.Frames) == 0 {
		tb.Fatalf("ffprobe on %s printed %.300q: %v", path, out, err)
	}
	t := Times{Frames: len(r.Frames)}
	var ok1, ok2 bool
	t.TimeBase, ok1 = new(big.Rat).SetString(r.Streams[0].TimeBase)
	t.Rate, ok2 = new(big.Rat).SetString(r.Streams[0].AvgFrameRate)
	if !ok1 || !ok2 {
		tb.Fatalf("ffprobe on %s: time base %q, frame rate %q", path, r.Streams[0].TimeBase, r.Streams[0].AvgFrameRate)
	}
	for k, f := range r.Frames {
		if f.PTS == nil || (k > 0 && *f.PTS <= t.PTS[k-1]) {
			t.PTS = nil
			break
		}
		t.PTS = append(t.PTS, *f.PTS)
	}
	return t
}

// ByPTS tells whether the frames are timed by their timestamps (else by the average rate).
func (t Times) ByPTS() bool { return t.PTS != nil }

// time is frame k's presentation time from frame 0, in seconds.
func (t Times) time(k int) *big.Rat {
	if t.PTS == nil {
		return new(big.Rat).Quo(big.NewRat(int64(k), 1), t.Rate)
	}
	return new(big.Rat).Mul(big.NewRat(t.PTS[k]-t.PTS[0], 1), t.TimeBase)
}

// Duration is how long the video lasts: its last frame's time plus an average frame, less the
// half tick by which a timestamp may be late where the clock rounds (see slack).
func (t Times) Duration() *big.Rat {
	n := t.Frames
	if t.PTS == nil || n == 1 {
		return new(big.Rat).Quo(big.NewRat(int64(n), 1), t.Rate)
	}
	d := new(big.Rat).Mul(t.time(n-1), big.NewRat(int64(n), int64(n-1)))
	return d.Sub(d, t.slack())
}

// slack is half a tick of the container's clock where its ticks round the frames' times: where a
// frame at the average rate is not a whole number of ticks (Matroska's milliseconds at 30
// frames/s), a frame shown at an instant may be stamped up to half a tick after it. Where it is
// (an AVI's clock, which ticks once a frame; an MP4 track's timescale at a multiple of the rate),
// the times are exact, and the frame shown at an instant is the one whose interval holds it, the
// earlier of two at an instant halfway between them: zero. Zero without timestamps too.
func (t Times) slack() *big.Rat {
	if t.PTS == nil {
		return new(big.Rat)
	}
	if t.Rate.Sign() > 0 && new(big.Rat).Quo(new(big.Rat).Inv(t.Rate), t.TimeBase).IsInt() {
		return new(big.Rat)
	}
	return new(big.Rat).Mul(t.TimeBase, big.NewRat(1, 2))
}

// Count is the number of instants m/fps (m = 0, 1, ...) before the video's end.
func (t Times) Count(fps *big.Rat) int {
	d := new(big.Rat).Mul(t.Duration(), fps)
	q := new(big.Int).Quo(d.Num(), d.Denom())
	if new(big.Rat).SetInt(q).Cmp(d) != 0 {
		q.Add(q, big.NewInt(1))
	}
	return int(q.Int64())
}

// Expected is the frame shown at instant m/fps: the last whose time is at or before it, to
// within half a tick of the container's clock where it rounds (slack).
func (t Times) Expected(m int, fps *big.Rat) int {
	at := new(big.Rat).Quo(big.NewRat(int64(m), 1), fps)
	at.Add(at, t.slack())
	k := 0
	for k+1 < t.Frames && t.time(k+1).Cmp(at) <= 0 {
		k++
	}
	return k
}
