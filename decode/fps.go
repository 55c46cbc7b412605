package decode

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Clips at a target frame rate (Clip.FPS): which frame is shown at an instant, and how many
// instants of a rate a video holds.
//
// Time is measured from the video's first displayed frame, frame 0, so that a video whose first
// timestamp is not 0 (an edit list, a cut transport stream) starts at 0 too. Frame k is shown from
// its presentation time t_k until t_(k+1), and the last frame for the video's average frame
// duration: the video lasts Info.Duration, (t_(n-1) - t_0) * n / (n-1). At rate F the video holds
// the instants m/F, m = 0, 1, ..., that come before its end (FramesAt), and instant m shows the
// frame whose display interval holds m/F, the last whose presentation time is at or before it
// (FrameAt; torchcodec's get_frames_played_at): a 60 fps video at 15 skips three frames in four,
// a 24 fps video at 30 shows some frames twice, as torchvision's and torchcodec's resampling do,
// and at an instant halfway between two frames (0.5 s of a 25 fps video) the earlier is shown.
//
// Times are exact where a frame lasts a whole number of the clock's ticks at the average frame
// rate (exactTicks: an AVI's clock, which ticks once a frame; an MP4 track's timescale at a
// multiple of the rate; Matroska's milliseconds at 25 fps). Where it does not (Matroska's
// milliseconds at 30 or 29.97 fps), the container rounds each frame's time to the nearest tick,
// so a frame truly at an instant may be stamped up to half a tick after it: there a frame is
// taken to be shown at an instant up to half a tick before its stamp.
//
// A frame's time is its own timestamp where the probe table has one (TimingPTS), so variable frame
// rate footage gives evenly timed clips. Where it has not (TimingDecoded: AVI, which has no
// presentation timestamps; MPEG program streams, which stamp some frames only; repeated or
// missing timestamps), or where they disagree with the stream's average frame rate by more than
// a factor of 8 (a jump in a transport stream's clock: frames in order, their times not), frame k
// is taken to start at k over the stream's rate (TimingRate: the rate its clock ticks at where
// the decoder's timestamps advance one tick a frame, as an AVI's do, else its average frame
// rate), and TimedByPTS says so.
//
// Nothing is kept per video for this: the instants of a clip are looked up in the probe table's
// timestamps (Info.PTS) when the clip is decoded, and a video's length at a rate is arithmetic on
// its first and last timestamps.

// rateForm is what ParseRate takes: digits with an optional decimal part, or digits/digits.
var rateForm = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?|[0-9]+/[0-9]+)$`)

// ParseRate reads a frame rate: an integer ("15"), a decimal ("29.97") or a fraction
// ("30000/1001"), nothing else (no exponents, signs, hexadecimal or underscores). It must be at
// least 0.1 and at most 10,000 frames a second.
func ParseRate(s string) (Rational, error) {
	bad := func(err error) (Rational, error) {
		if err != nil {
			return Rational{}, fmt.Errorf("frame rate %q: want a positive number such as 15, 29.97 or 30000/1001: %w", s, err)
		}
		return Rational{}, fmt.Errorf("frame rate %q: want a positive number such as 15, 29.97 or 30000/1001", s)
	}
	t := strings.TrimSpace(s)
	if !rateForm.MatchString(t) {
		return bad(nil)
	}
	r, ok := new(big.Rat).SetString(t)
	if !ok {
		return bad(nil)
	}
	if r.Cmp(big.NewRat(1, 10)) < 0 || r.Cmp(big.NewRat(10000, 1)) > 0 {
		return bad(nil)
	}
	if !r.Num().IsInt64() || !r.Denom().IsInt64() || r.Denom().Int64() > math.MaxInt32 {
		return bad(fmt.Errorf("too precise"))
	}
	return Rational{int(r.Num().Int64()), int(r.Denom().Int64())}, nil
}

// Valid tells whether the fraction is a positive rate or time base.
func (r Rational) Valid() bool { return r.Num > 0 && r.Den > 0 }

// FPSString writes a rate as people write it: "15", "29.97", or "30000/1001" where a short
// decimal would round it.
func (r Rational) FPSString() string {
	if !r.Valid() {
		return "0"
	}
	if r.Num%r.Den == 0 {
		return strconv.Itoa(r.Num / r.Den)
	}
	for _, d := range []int{10, 100, 1000} {
		if d%r.Den == 0 {
			return strconv.FormatFloat(r.Float64(), 'f', -1, 64)
		}
	}
	return r.String()
}

// TimedByPTS tells whether frames are timed by their own timestamps (TimingPTS, and timestamps
// that agree with the average frame rate within a factor of 8); otherwise by the stream's average
// frame rate, TimingRate.
func (in *Info) TimedByPTS() bool {
	n, _, _ := in.ptsEnds()
	return in.Timing == TimingPTS && n == in.Frames && in.Frames > 0 && in.TimeBase.Valid() && in.ratesAgree()
}

// maxRateDisagreement is how far apart the mean frame interval by timestamps and the one by the
// average frame rate may be (as a ratio) before the timestamps are taken to be broken.
const maxRateDisagreement = 8

// ratesAgree tells whether the mean interval between frames by their timestamps is within
// maxRateDisagreement of the one the average frame rate gives (true where either is unknown).
func (in *Info) ratesAgree() bool {
	n, first, last := in.ptsEnds()
	if n < 2 || !in.AvgFrameRate.Valid() {
		return true
	}
	byPTS := float64(last-first) * in.TimeBase.Float64() / float64(n-1)
	byRate := 1 / in.AvgFrameRate.Float64()
	return byPTS <= maxRateDisagreement*byRate && byPTS*maxRateDisagreement >= byRate
}

// TimingRate is the rate that times the frames of a video that TimedByPTS says is not timed by
// its timestamps: the rate the stream's clock ticks at where the decoder's timestamps for its
// frames advance one tick a frame (an AVI's clock, which is what FFmpeg shows its frames by,
// whatever average frame rate it guessed); else the stream's average frame rate; where the
// container gives none, the one its timestamps suggest; else 25.
func (in *Info) TimingRate() Rational {
	if in.tickPerFrame() {
		return Rational{in.TimeBase.Den, in.TimeBase.Num}.reduced()
	}
	if in.AvgFrameRate.Valid() {
		return in.AvgFrameRate
	}
	if n, first, last := in.ptsEnds(); n > 1 && in.TimeBase.Valid() && first != NoPTS && last > first {
		// (n-1) frames in span * TimeBase seconds.
		num := new(big.Int).Mul(big.NewInt(int64(n-1)), big.NewInt(int64(in.TimeBase.Den)))
		den := new(big.Int).Mul(big.NewInt(last-first), big.NewInt(int64(in.TimeBase.Num)))
		if r := new(big.Rat).SetFrac(num, den); r.Num().IsInt64() && r.Denom().IsInt64() &&
			r.Num().Int64() <= math.MaxInt32 && r.Denom().Int64() <= math.MaxInt32 {
			return Rational{int(r.Num().Int64()), int(r.Denom().Int64())}
		}
	}
	return Rational{25, 1}
}

// tickPerFrame tells whether the video's timestamps advance exactly one tick of its clock a
// frame, from the first to the last, at a rate that agrees with its average frame rate (within
// maxRateDisagreement: a clock of 90 kHz that advances one tick a frame is broken, not 90,000
// frames a second).
func (in *Info) tickPerFrame() bool {
	n, first, last := in.ptsEnds()
	return n > 1 && n == in.Frames && in.TimeBase.Valid() && first != NoPTS && last-first == int64(n-1) && in.ratesAgree()
}

// reduced is the fraction in lowest terms.
func (r Rational) reduced() Rational {
	a, b := r.Num, r.Den
	for b != 0 {
		a, b = b, a%b
	}
	if a <= 0 {
		return r
	}
	return Rational{r.Num / a, r.Den / a}
}

// exactTicks tells whether the video's timestamps are exact: a frame at its average frame rate
// lasts a whole number of ticks of its clock (see FrameAt). Otherwise the container rounded
// them to the nearest tick.
func (in *Info) exactTicks() bool {
	tb, r := in.TimeBase, in.AvgFrameRate
	if !tb.Valid() || !r.Valid() {
		return false
	}
	// A frame lasts (1/r)/tb = (tb.Den*r.Den) / (tb.Num*r.Num) ticks.
	return (uint64(tb.Den)*uint64(r.Den))%(uint64(tb.Num)*uint64(r.Num)) == 0
}

// TimingNote says, for a video not timed by its timestamps, how it is timed instead; "" for one
// that is.
func (in *Info) TimingNote() string {
	if in.TimedByPTS() {
		return ""
	}
	why := "its container gives no usable timestamps"
	switch {
	case in.Timing == TimingDecoded:
		why = "its container's timestamps do not say which frame is which (" + in.Container + ")"
	case !in.ratesAgree():
		n, first, last := in.ptsEnds()
		why = fmt.Sprintf("its timestamps span %.3f s for %d frames, which its average frame rate puts at %.3f s",
			float64(last-first)*in.TimeBase.Float64(), n, float64(n-1)/in.AvgFrameRate.Float64())
	}
	r, what := in.TimingRate(), "its average frame rate"
	if avg := in.AvgFrameRate.reduced(); in.AvgFrameRate.Valid() && r != avg {
		what = fmt.Sprintf("the rate its clock ticks at (its average frame rate is given as %s fps)", avg.FPSString())
	}
	return fmt.Sprintf("timed at %s, %s fps: %s", what, r.FPSString(), why)
}

// FramesAt returns how many instants m/fps (m = 0, 1, ...) fall before the video's end: its
// length in frames at that rate, ceil(Duration * fps), worked out exactly from its first and last
// timestamps. A video of one frame lasts one frame at TimingRate.
func (in *Info) FramesAt(fps Rational) int {
	n := in.Frames
	if n <= 0 || !fps.Valid() {
		return 0
	}
	var x, y *big.Int // the video lasts x/y seconds times fps
	if in.TimedByPTS() && n > 1 {
		// span*TimeBase * n/(n-1) seconds, less half a tick where timestamps are rounded to
		// whole ticks (as FrameAt allows for), at fps: (2*span*n - (n-1)) * TimeBase / 2(n-1) *
		// fps; exact timestamps lose nothing.
		_, first, last := in.ptsEnds()
		span := last - first
		x = bigProduct(2, span, int64(n), int64(fps.Num), int64(in.TimeBase.Num))
		if !in.exactTicks() {
			x.Sub(x, bigProduct(int64(n-1), int64(fps.Num), int64(in.TimeBase.Num)))
		}
		y = bigProduct(2, int64(fps.Den), int64(in.TimeBase.Den), int64(n-1))
	} else {
		r := in.TimingRate()
		x = bigProduct(int64(n), int64(fps.Num), int64(r.Den))
		y = bigProduct(int64(fps.Den), int64(r.Num))
	}
	// ceil(x / y)
	q, m := new(big.Int).QuoRem(x, y, new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() > math.MaxInt32 {
		return math.MaxInt32
	}
	return max(int(q.Int64()), 1)
}

func bigProduct(xs ...int64) *big.Int {
	p := big.NewInt(1)
	for _, x := range xs {
		p.Mul(p, big.NewInt(x))
	}
	return p
}

// FrameAt returns the frame shown at instant m/fps from the first displayed frame: the one whose
// display interval holds it, the last frame whose presentation time is at or before it (or, past
// the end, the last frame).
func (in *Info) FrameAt(m int, fps Rational) int {
	n := in.Frames
	if n <= 1 || m <= 0 || !fps.Valid() {
		return 0
	}
	if in.TimedByPTS() {
		// The instant in time base units, rounded down where timestamps are exact (exactTicks:
		// at 12.5 ticks, frame 12 is shown, not 13). Where a container rounds each frame's time
		// to a whole tick (Matroska and WebM to the millisecond at 30 fps), a frame whose true
		// time is the instant may be stamped up to half a tick after it: there the instant is
		// rounded to the nearest tick. A frame is shown at m/fps when its offset is at most this.
		round := mulDivRound
		if in.exactTicks() {
			round = mulDiv
		}
		lim, ok := round(uint64(m)*uint64(fps.Den), uint64(in.TimeBase.Den), uint64(fps.Num)*uint64(in.TimeBase.Num))
		if !ok {
			return n - 1
		}
		base := in.PTS[0]
		return sort.Search(n, func(k int) bool { return uint64(in.PTS[k]-base) > lim }) - 1
	}
	r := in.TimingRate()
	k, ok := mulDiv(uint64(m)*uint64(fps.Den), uint64(r.Num), uint64(fps.Num)*uint64(r.Den))
	if !ok || k >= uint64(n) {
		return n - 1
	}
	return int(k)
}

// mulDivRound returns a*b/c rounded to the nearest (halves up), when it fits in 64 bits.
func mulDivRound(a, b, c uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	lo, carry := bits.Add64(lo, c/2, 0)
	hi += carry
	if c == 0 || hi >= c {
		return 0, false
	}
	q, _ := bits.Div64(hi, lo, c)
	return q, true
}

// mulDiv returns floor(a*b/c) when it fits in 64 bits.
func mulDiv(a, b, c uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	if c == 0 || hi >= c {
		return 0, false
	}
	q, _ := bits.Div64(hi, lo, c)
	return q, true
}

// ClipFrames returns the frames clip c holds in this video, in order: c.Indices(in.Frames) for a
// clip counted in the video's own frames, and for one at a target rate (c.FPS) the frame shown
// at each of its instants (FrameAt), which must come before the video's end (FramesAt) unless
// c.PadEnd. Its error is an *Error of kind ErrBadRequest or ErrTooFewFrames, with no path.
func (in *Info) ClipFrames(c Clip) ([]int, error) {
	if !c.FPS.Valid() {
		if c.FPS != (Rational{}) {
			return nil, &Error{Kind: ErrBadRequest, Detail: fmt.Sprintf("clip frame rate %v", c.FPS)}
		}
		return c.Indices(in.Frames)
	}
	if c.Start < 0 || c.Frames <= 0 || c.Stride <= 0 {
		return nil, &Error{Kind: ErrBadRequest, Detail: fmt.Sprintf("clip start %d, frames %d, stride %d", c.Start, c.Frames, c.Stride)}
	}
	last := c.Start + (c.Frames-1)*c.Stride
	if n := in.FramesAt(c.FPS); c.Start >= n || (!c.PadEnd && last >= n) {
		return nil, &Error{Kind: ErrTooFewFrames, Detail: fmt.Sprintf("clip needs frame %d at %s fps, video has %d at that rate",
			last, c.FPS.FPSString(), n)}
	}
	idx := make([]int, c.Frames)
	for j := range idx {
		idx[j] = in.FrameAt(c.Start+j*c.Stride, c.FPS)
	}
	return idx, nil
}

// firstFrame is the video frame clip c starts at (for choosing a decoder positioned before it).
func (in *Info) firstFrame(c Clip) int {
	if c.FPS.Valid() {
		return in.FrameAt(c.Start, c.FPS)
	}
	return c.Start
}
