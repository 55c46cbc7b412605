package decode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

func TestPermanent(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&Error{Path: "a.mp4", Kind: ErrNotVideo}, true},
		{&Error{Path: "a.mp4", Kind: ErrNoVideo}, true},
		{&Error{Path: "a.mp4", Kind: ErrUnsupportedCodec}, true},
		{fmt.Errorf("sample 3: %w", &Error{Path: "a.mp4", Kind: ErrCorrupt}), true},
		{&Error{Path: "a.mp4", Kind: ErrTooFewFrames}, true},
		{&Error{Path: "a.mp4", Kind: ErrUnreadable, Err: syscall.EMFILE}, false},
		{&Error{Path: "a.mp4", Kind: ErrUnreadable, Err: fs.ErrNotExist}, false},
		{&Error{Path: "a.mp4", Kind: ErrChanged}, false},
		{&Error{Path: "a.mp4", Kind: ErrInternal}, false},
		{&Error{Path: "a.mp4", Kind: ErrCorrupt, Err: context.DeadlineExceeded}, false},
		{context.Canceled, false},
		{errors.New("something else"), false},
	}
	for _, c := range cases {
		if got := Permanent(c.err); got != c.want {
			t.Errorf("Permanent(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
