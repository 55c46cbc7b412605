package decode

import (
	"errors"
	"testing"
)

// Reason is the error's text without its file and frame, whatever the file's name holds.
func TestErrorReason(t *testing.T) {
	cause := errors.New("Invalid data found when processing input")
	for _, e := range []*Error{
		{Path: "a/frame 3: b.mp4", Frame: frame(7), Kind: ErrCorrupt, Detail: "data it depends on is damaged (frame 5)", Err: cause},
		{Path: "v.mp4", Kind: ErrUnreadable, Err: cause},
		{Kind: ErrTooFewFrames, Detail: "12 frames"},
	} {
		want := e.Kind.Error()
		if e.Detail != "" {
			want += ": " + e.Detail
		}
		if e.Err != nil {
			want += ": " + e.Err.Error()
		}
		if got := e.Reason(); got != want {
			t.Errorf("Reason() = %q, want %q", got, want)
		}
		prefix := ""
		if e.Path != "" {
			prefix = e.Path + ": "
		}
		if e.Frame != nil {
			prefix += "frame 7: "
		}
		if got := e.Error(); got != prefix+want {
			t.Errorf("Error() = %q, want %q", got, prefix+want)
		}
	}
}
