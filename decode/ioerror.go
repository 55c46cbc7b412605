package decode

/*
#cgo pkg-config: libavformat
#include <libavformat/avio.h>

// The error an I/O context's reads met (AVERROR(errno), say), or 0; and forgetting it (FFmpeg
// keeps it, past the seeks that read on).
static int vidfs_io_error(void *pb) { return ((AVIOContext *)pb)->error; }
static void vidfs_clear_io_error(void *pb) { ((AVIOContext *)pb)->error = 0; }
*/
import "C"

import (
	"unsafe"

	"github.com/asticode/go-astiav"
)

// readError returns the failure of the input's reads of its bytes, if they met one: a Source
// that failed (sourceError), or a system error reading the file (EIO from a disk, EMFILE...). It
// is ErrUnreadable (or ErrChanged), the path's failure (pathErrno, as openInput classifies the
// open's), never the video's damage: a packet read short by it decodes as damage, which must not
// be taken for the video's own.
func (in *input) readError() error {
	if err := in.sourceError(nil); err != nil {
		return err
	}
	pb := in.avio()
	if pb == nil {
		return nil
	}
	if errno, ok := pathErrno(astiav.Error(C.vidfs_io_error(pb))); ok {
		return &Error{Path: in.path, Kind: ErrUnreadable, Detail: "reading its bytes", Err: errno}
	}
	return nil
}

// clearReadError forgets a system error the input's reads met, so that readError tells of those
// that come after. (A Source's failure is kept: a decoder that met one is closed.)
func (in *input) clearReadError() {
	if pb := in.avio(); pb != nil {
		C.vidfs_clear_io_error(pb)
	}
}

// avio returns the AVIOContext the input reads through, or nil. go-astiav v0.38 has no accessor
// for it: its IOContext holds that pointer as its first field (TestReadErrorMidDecode fails if it
// does not).
func (in *input) avio() unsafe.Pointer {
	pb := in.fc.Pb()
	if pb == nil {
		return nil
	}
	return *(*unsafe.Pointer)(unsafe.Pointer(pb))
}
