package decode

import (
	"errors"
	"fmt"
)

// Kinds of failure. Every error this package returns wraps one of them inside an *Error that
// names the file, so callers test with errors.Is(err, decode.ErrCorrupt) and print err as is.
var (
	// ErrUnsupportedCodec: the video stream's codec has no decoder in this build.
	ErrUnsupportedCodec = errors.New("unsupported codec")
	// ErrNoVideo: the file opened but holds no video stream.
	ErrNoVideo = errors.New("no video stream")
	// ErrCorrupt: the file is not a readable video, or the data a clip needs is damaged or missing.
	ErrCorrupt = errors.New("corrupt or truncated data")
	// ErrTooFewFrames: the video has fewer frames than the clip needs.
	ErrTooFewFrames = errors.New("too few frames")
	// ErrBadRequest: the clip or output asked for is invalid (negative start, zero size, short buffer).
	ErrBadRequest = errors.New("invalid request")
)

// Error is a failure on one video file, with the frame it concerns when there is one.
type Error struct {
	Path   string // the video file
	Frame  int    // frame index concerned, or -1
	Kind   error  // one of the Err* values above
	Detail string // what happened, for people
	Err    error  // the underlying error (an FFmpeg error, say), if any
}

func (e *Error) Error() string {
	s := e.Path + ": "
	if e.Frame >= 0 {
		s += fmt.Sprintf("frame %d: ", e.Frame)
	}
	s += e.Kind.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap lets errors.Is match both the kind and the underlying error.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

func newError(path string, frame int, kind error, detail string, err error) *Error {
	return &Error{Path: path, Frame: frame, Kind: kind, Detail: detail, Err: err}
}
