package fs

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/order"
)

// orderFile is .vidfs/order (and .vidfs/order.npy): the plan. Writing it (truncating, as `>`
// and open(..., "w") do) replaces the plan when the file is closed; appending (`>>`, "a")
// queues the written plan behind the current one. A plan that does not parse is refused whole:
// close fails with EINVAL, the reason is logged, and the plan in force stays. Reading it gives
// the plan in force, as text.
type orderFile struct{ node }

// Setattr accepts truncation (the open's O_TRUNC says what it means).
func (o *orderFile) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok && size != 0 {
		return syscall.EINVAL
	}
	o.f.attr(&out.Attr, o.mode, 0)
	return 0
}

func (o *orderFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		var b bytes.Buffer
		for i, s := range o.f.tracker.Plan() {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.Itoa(int(s)))
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		return &bytesHandle{data: b.Bytes()}, fuse.FOPEN_DIRECT_IO, 0
	}
	return &orderWriter{f: o.f, appendPlan: flags&syscall.O_APPEND != 0, dirty: flags&syscall.O_TRUNC != 0}, fuse.FOPEN_DIRECT_IO, 0
}

// orderWriter collects what one open of the order file writes.
type orderWriter struct {
	f          *FS
	appendPlan bool
	buf        []byte
	dirty      bool          // there is something to apply at close
	tooLarge   syscall.Errno // EFBIG once a write went past the size limit
}

func (w *orderWriter) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if w.appendPlan {
		off = int64(len(w.buf))
	}
	end := off + int64(len(data))
	if w.tooLarge != 0 || end > order.MaxBytes(w.f.lay.Len()) {
		w.tooLarge, w.dirty = syscall.EFBIG, true
		return 0, syscall.EFBIG
	}
	if end > int64(len(w.buf)) {
		w.buf = append(w.buf, make([]byte, end-int64(len(w.buf)))...)
	}
	copy(w.buf[off:], data)
	w.dirty = true
	return uint32(len(data)), 0
}

func (w *orderWriter) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(sliceAt(w.buf, dest, off)), 0
}

// Flush applies the plan written through this open, at close. The kernel flushes once per
// close of a descriptor (a dup'ed or inherited descriptor flushes again): what was written is
// applied at the first flush after it was written, once.
func (w *orderWriter) Flush(ctx context.Context) syscall.Errno {
	if !w.dirty {
		return 0
	}
	w.dirty = false
	var plan []int32
	var err error
	errno := syscall.EINVAL
	if w.tooLarge != 0 {
		err, errno = fmt.Errorf("more than %d bytes written: no plan for %d samples is that long", order.MaxBytes(w.f.lay.Len()), w.f.lay.Len()), w.tooLarge
	} else {
		plan, err = order.Parse(w.buf, w.f.lay.Len())
	}
	if err != nil {
		w.buf = nil
		w.f.log.Error("order refused; the previous plan stays", "reason", err)
		w.f.problems.add(wire.Problem{Time: time.Now(), File: ".vidfs/order", Sample: -1, Reason: "order refused: " + err.Error()})
		return errno
	}
	w.f.SetPlan(plan, w.appendPlan)
	verb := "new plan"
	if w.appendPlan {
		verb = "plan appended"
	}
	pos, length := w.f.tracker.Position()
	w.f.log.Info(verb, "samples", len(plan), "position", pos, "length", length)
	return 0
}

// Release drops what was written.
func (w *orderWriter) Release(ctx context.Context) syscall.Errno {
	w.buf = nil
	return 0
}

// statsFile is .vidfs/stats: a JSON snapshot taken when it is opened.
type statsFile struct{ node }

func (s *statsFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if errno := refuseWrites(flags); errno != 0 {
		return nil, 0, errno
	}
	return &bytesHandle{data: jsonBytes(s.f.Stats())}, fuse.FOPEN_DIRECT_IO, 0
}
