package decode

import (
	"context"
	"errors"
	"fmt"
)

// Kinds of failure. Every error this package returns is an *Error whose Kind is one of these,
// so callers test with errors.Is(err, decode.ErrCorrupt) and print err as it is.
var (
	// ErrUnreadable: the file cannot be read at all (missing, a directory, no permission, an I/O
	// error).
	ErrUnreadable = errors.New("cannot read file")
	// ErrNotVideo: the file is not a container FFmpeg can open (empty, random bytes, text).
	ErrNotVideo = errors.New("not a readable video container")
	// ErrNoVideo: the file opened but holds no video stream.
	ErrNoVideo = errors.New("no video stream")
	// ErrUnsupportedCodec: the video stream's codec has no decoder in this build.
	ErrUnsupportedCodec = errors.New("unsupported codec")
	// ErrCorrupt: the data a clip needs is damaged or missing.
	ErrCorrupt = errors.New("corrupt or truncated data")
	// ErrChanged: the file is no longer the one that was probed (replaced or rewritten since).
	ErrChanged = errors.New("file changed since it was probed")
	// ErrTooFewFrames: the video has fewer frames than the clip needs.
	ErrTooFewFrames = errors.New("too few frames")
	// ErrBadRequest: the clip or output asked for is invalid (negative start, zero size, short
	// buffer).
	ErrBadRequest = errors.New("invalid request")
	// ErrInternal: FFmpeg failed in a way the data does not explain (memory, a filter graph).
	ErrInternal = errors.New("internal decoder failure")
	// ErrCrashed: decoding the video crashed or hung a sandboxed decoder process twice, the
	// second time with no other video in it. Held for the mount that met it (it may be a bug of
	// this FFmpeg, or a file made to attack it), never remembered across mounts: not Permanent.
	ErrCrashed = errors.New("the decoder crashed on it")
)

var kinds = []error{ErrUnreadable, ErrNotVideo, ErrNoVideo, ErrUnsupportedCodec, ErrCorrupt, ErrChanged,
	ErrTooFewFrames, ErrBadRequest, ErrInternal, ErrCrashed}

// KindNamed returns the kind whose text is name (as Error.Kind.Error() gives it), or nil. It
// lets a kind survive being stored as text, as the probe cache stores errors.
func KindNamed(name string) error {
	for _, k := range kinds {
		if k.Error() == name {
			return k
		}
	}
	return nil
}

// Error is a failure on one video file, with the frame it concerns when there is one.
type Error struct {
	Path   string // the video file ("" when not known yet, as from Clip.Indices)
	Frame  *int   // the frame index concerned, or nil for the whole file
	Kind   error  // one of the Err* values above
	Detail string // what happened, for people
	Err    error  // the underlying error (an FFmpeg error, say), if any
}

func (e *Error) Error() string {
	s := ""
	if e.Path != "" {
		s = e.Path + ": "
	}
	if e.Frame != nil {
		s += fmt.Sprintf("frame %d: ", *e.Frame)
	}
	return s + e.Reason()
}

// Reason is what went wrong, without the file and frame it concerns: the kind, the detail and
// the underlying error. Reports that show the file and frame in columns of their own print it.
func (e *Error) Reason() string {
	s := e.Kind.Error()
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

// frame returns a pointer to i, for Error.Frame.
func frame(i int) *int { return &i }

// permanentKinds are the kinds a file proves about itself: decoding it again gives the same
// answer until the file changes.
var permanentKinds = []error{ErrNotVideo, ErrNoVideo, ErrUnsupportedCodec, ErrCorrupt, ErrTooFewFrames}

// Permanent reports whether err is the video's own fault, which trying again cannot mend: not a
// container, no video stream, no decoder for its codec, damaged data, too few frames. Errors of
// the path to the file (I/O, network, descriptors, timeouts, cancellation), an internal FFmpeg
// failure and a file that changed are not: they may pass, so they must not be remembered.
// An error wrapping a context error is never permanent, whatever its kind.
func Permanent(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, k := range permanentKinds {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}
