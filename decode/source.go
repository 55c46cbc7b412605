package decode

import (
	"errors"
	"io"

	"github.com/asticode/go-astiav"
)

// Source is a video's bytes where they are not a local file (an object in a bucket): read at any
// offset, of a size known in advance. ReadAt follows io.ReaderAt; it may block while the bytes
// are fetched.
type Source interface {
	io.ReaderAt
	Size() int64
}

// Opener opens the video named by an Info's Path as a Source. Nil: paths are local files, which
// FFmpeg opens itself. A Source that is also an io.Closer is closed when the decoder that opened
// it closes.
type Opener func(path string) (Source, error)

// ioBuffer is the custom I/O context's buffer: FFmpeg asks the Source for this much at a time.
// Each ask is served from the Source's memory when it has the bytes; larger asks would make the
// probe of a small video read past what it needs.
const ioBuffer = 64 << 10

// sourceIO adapts a Source to FFmpeg's read and seek callbacks, keeping the first error the
// Source gave, which FFmpeg's error codes cannot carry, for the caller's message.
type sourceIO struct {
	src Source
	pos int64
	err error // the first error ReadAt gave other than io.EOF
}

func (s *sourceIO) read(b []byte) (int, error) {
	if s.pos >= s.src.Size() {
		return 0, io.EOF
	}
	n, err := s.src.ReadAt(b[:min(int64(len(b)), s.src.Size()-s.pos)], s.pos)
	s.pos += int64(n)
	if n > 0 {
		return n, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return 0, io.EOF
	}
	if s.err == nil {
		s.err = err
	}
	return 0, astiav.ErrEio
}

// srcCloser is the Source, when there is one and it is an io.Closer.
func (s *sourceIO) srcCloser() (io.Closer, bool) {
	if s == nil {
		return nil, false
	}
	c, ok := s.src.(io.Closer)
	return c, ok
}

// avseekSize and avseekForce are FFmpeg's AVSEEK_SIZE and AVSEEK_FORCE whence flags.
const (
	avseekSize  = 0x10000
	avseekForce = 0x20000
)

func (s *sourceIO) seek(off int64, whence int) (int64, error) {
	whence &^= avseekForce
	switch whence {
	case avseekSize:
		return s.src.Size(), nil
	case io.SeekStart:
	case io.SeekCurrent:
		off += s.pos
	case io.SeekEnd:
		off += s.src.Size()
	default:
		return 0, astiav.ErrEio
	}
	if off < 0 {
		return 0, astiav.ErrEio
	}
	s.pos = off
	return off, nil
}

// openSource opens path through open into fc as a custom I/O context, returning it for closing
// after the demuxer.
func openSource(fc *astiav.FormatContext, path string, open Opener) (*astiav.IOContext, *sourceIO, error) {
	src, err := open(path)
	if err != nil {
		return nil, nil, &Error{Path: path, Kind: ErrUnreadable, Err: err}
	}
	if src.Size() == 0 {
		return nil, nil, &Error{Path: path, Kind: ErrNotVideo, Detail: "empty file"}
	}
	sio := &sourceIO{src: src}
	ic, err := astiav.AllocIOContext(ioBuffer, false, sio.read, sio.seek, nil)
	if err != nil {
		return nil, nil, &Error{Path: path, Kind: ErrInternal, Detail: "allocating an I/O context", Err: err}
	}
	fc.SetPb(ic)
	fc.SetFlags(fc.Flags().Add(astiav.FormatContextFlagCustomIo))
	return ic, sio, nil
}

// sourceError is err, or when the Source failed beneath FFmpeg, an error of kind ErrUnreadable
// that says why (a changed object, a fetch that timed out), since FFmpeg can only say "I/O error".
func (in *input) sourceError(err error) error {
	if in.sio == nil || in.sio.err == nil {
		return err
	}
	kind := ErrUnreadable
	if errors.Is(in.sio.err, ErrChanged) {
		kind = ErrChanged
	}
	return &Error{Path: in.path, Kind: kind, Detail: "reading its bytes", Err: in.sio.err}
}
