package fs

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/order"
)

// planFile is a plan: .vidfs/plans/NAME, or .vidfs/order (and .vidfs/order.npy), the plan named
// "default". Writing it (truncating, as `>` and open(..., "w") do) replaces the plan when the
// file is closed; appending (`>>`, "a") queues the written plan behind the current one. A plan
// that does not parse is refused whole: close fails with EINVAL, the reason is logged, and the
// plan in force stays. Reading it gives the plan in force, as text.
type planFile struct {
	node
	name string
}

// Setattr accepts truncation (the open's O_TRUNC says what it means).
func (p *planFile) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok && size != 0 {
		return syscall.EINVAL
	}
	p.f.attr(&out.Attr, p.mode, 0)
	return 0
}

func (p *planFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		p.f.emptied.settle()
		entries, _ := p.f.plans.Entries(p.name)
		var b bytes.Buffer
		for i, s := range entries {
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
	return p.f.planWriter(p.name, flags), fuse.FOPEN_DIRECT_IO, 0
}

// planWriter returns the handle that collects what one open for writing of plan name writes.
func (f *FS) planWriter(name string, flags uint32) *planWriter {
	return &planWriter{f: f, name: name, appendPlan: flags&syscall.O_APPEND != 0, truncate: flags&syscall.O_TRUNC != 0}
}

// planFileMode is the mode of every plan file.
const planFileMode = syscall.S_IFREG | 0o644

// plansDir is .vidfs/plans: a file per reader's plan. Creating a file (writing it) creates the
// plan; unlinking it removes the plan.
type plansDir struct{ node }

func (d *plansDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if _, ok := d.f.plans.Entries(name); !ok {
		return nil, syscall.ENOENT
	}
	d.f.attr(&out.Attr, planFileMode, 0)
	return d.NewInode(ctx, &planFile{node{f: d.f, mode: planFileMode}, name}, gofs.StableAttr{Mode: syscall.S_IFREG}), 0
}

func (d *plansDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	var list []fuse.DirEntry
	for _, name := range d.f.plans.Names() {
		list = append(list, fuse.DirEntry{Name: name, Mode: syscall.S_IFREG})
	}
	return gofs.NewListDirStream(list), 0
}

// Create makes a plan: empty until what is written is closed (or what was there, on append).
func (d *plansDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if err := order.ValidName(name); err != nil {
		d.f.log.Error("plan refused", "reason", err)
		return nil, nil, 0, syscall.EINVAL
	}
	if _, ok := d.f.plans.Entries(name); !ok {
		d.f.setPlan(name, nil, false, 0)
	}
	d.f.attr(&out.Attr, planFileMode, 0)
	ch := d.NewInode(ctx, &planFile{node{f: d.f, mode: planFileMode}, name}, gofs.StableAttr{Mode: syscall.S_IFREG})
	w := d.f.planWriter(name, flags)
	w.truncate = w.truncate || !w.appendPlan // a file created for writing is a new plan, even left empty
	return ch, w, fuse.FOPEN_DIRECT_IO, 0
}

// Unlink removes a plan: its samples are no longer due, and its counters go.
func (d *plansDir) Unlink(ctx context.Context, name string) syscall.Errno {
	if !d.f.removePlan(name) {
		return syscall.ENOENT
	}
	d.f.log.Info("plan removed", "plan", name)
	return 0
}

// planWriter collects what one open of a plan file writes.
type planWriter struct {
	f          *FS
	name       string
	appendPlan bool
	buf        []byte
	dirty      bool          // written since what was last applied
	truncate   bool          // opened to replace the plan: if nothing is written, it is emptied
	applied    bool          // something written was applied
	tooLarge   syscall.Errno // EFBIG once a write went past the size limit
}

func (w *planWriter) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
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
	w.f.emptied.drop(w) // what is written replaces the plan, at the next flush
	return uint32(len(data)), 0
}

func (w *planWriter) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(sliceAt(w.buf, dest, off)), 0
}

// Flush applies the plan written through this open, at close. The kernel flushes once per
// close of a descriptor (a dup'ed or inherited descriptor flushes again, and a shell's
// redirection closes one before anything is written): what was written is applied at the first
// flush after it was written, once.
func (w *planWriter) Flush(ctx context.Context) syscall.Errno {
	if !w.dirty {
		if w.truncate && !w.applied {
			w.f.emptied.add(w)
		}
		return 0
	}
	w.dirty, w.applied = false, true
	var entries []int32
	var err error
	errno := syscall.EINVAL
	if w.tooLarge != 0 {
		err, errno = fmt.Errorf("more than %d bytes written: no plan for %d samples is that long", order.MaxBytes(w.f.lay.Len()), w.f.lay.Len()), w.tooLarge
	} else {
		entries, err = order.Parse(w.buf, w.f.lay.Len())
	}
	file := ".vidfs/plans/" + w.name
	if w.name == order.DefaultPlan {
		file = ".vidfs/order"
	}
	if err != nil {
		w.buf = nil
		w.f.log.Error("plan refused; the one in force stays", "plan", w.name, "reason", err)
		w.f.problems.add(wire.Problem{Time: time.Now(), File: file, Sample: -1, Reason: "plan refused: " + err.Error()})
		return errno
	}
	w.f.setPlan(w.name, entries, w.appendPlan, callerPid(ctx))
	verb := "new plan"
	if w.appendPlan {
		verb = "plan appended"
	}
	all, _ := w.f.plans.Entries(w.name)
	w.f.log.Info(verb, "plan", w.name, "samples", len(entries), "length", len(all))
	return 0
}

// Release drops what was written, once the last descriptor is closed. A plan opened to be
// replaced (O_TRUNC, or created) and closed with nothing written is emptied now, unless a reader
// of the plan or the stats settled it first.
func (w *planWriter) Release(ctx context.Context) syscall.Errno {
	if !w.f.emptied.release(w) && w.truncate && !w.applied {
		w.empty()
	}
	w.buf = nil
	return 0
}

func (w *planWriter) empty() {
	w.f.setPlan(w.name, nil, false, 0)
	w.f.log.Info("plan emptied", "plan", w.name)
}

// pendingEmpties are plan writers closed with nothing written to a plan they opened to replace
// (O_TRUNC). The kernel sends Release, where such a plan is emptied, after close returns, so a
// reader that opens the plan or the stats right after the close could see the old plan; it
// settles them first. They are not emptied at the flush itself, because a shell's redirection
// closes one descriptor before it writes through another.
type pendingEmpties struct {
	mu sync.Mutex
	ws map[*planWriter]bool // true: emptied by settle
}

func (p *pendingEmpties) add(w *planWriter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ws == nil {
		p.ws = map[*planWriter]bool{}
	}
	if _, ok := p.ws[w]; !ok {
		p.ws[w] = false
	}
}

// drop forgets w: something was written through it.
func (p *pendingEmpties) drop(w *planWriter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.ws, w)
}

// release forgets w and says whether settle already emptied its plan.
func (p *pendingEmpties) release(w *planWriter) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	done := p.ws[w]
	delete(p.ws, w)
	return done
}

// settle empties the plans of the writers pending.
func (p *pendingEmpties) settle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for w, done := range p.ws {
		if !done {
			w.empty()
			p.ws[w] = true
		}
	}
}

// snapshotFile is a file whose contents are made when it is opened: .vidfs/stats (JSON) and
// .vidfs/failed (CSV).
type snapshotFile struct {
	node
	take func() []byte
}

func (s *snapshotFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if errno := refuseWrites(flags); errno != 0 {
		return nil, 0, errno
	}
	return &bytesHandle{data: s.take()}, fuse.FOPEN_DIRECT_IO, 0
}
