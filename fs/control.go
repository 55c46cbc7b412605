package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vidfs/vidfs/internal/npy"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/order"
)

// planFile is a plan: .vidfs/plans/NAME, or .vidfs/order (and .vidfs/order.npy), the plan named
// "default". Writing it (truncating, as `>` and open(..., "w") do) replaces the plan when the
// file is closed; appending (`>>`, "a") queues the written plan behind the current one (each
// close of a descriptor queues what was written since the close before). A plan that does not
// parse is refused whole: close fails with EINVAL, the reason is logged, and the plan in force
// stays; so is one that would take the entries of all plans past the mount's bound
// (Config.PlanMaxEntries), with ENOSPC. Reading it gives the plan in force, as text.
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
		p.f.emptyClosedPlans()
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
	return p.f.newPlanWriter(p.name, flags&syscall.O_APPEND != 0, flags&syscall.O_TRUNC != 0), fuse.FOPEN_DIRECT_IO, 0
}

// planFileMode is the mode of every plan file.
const planFileMode = syscall.S_IFREG | 0o644

// plansDir is .vidfs/plans: a file per reader's plan. Creating a file (writing it) creates the
// plan; unlinking it removes the plan.
type plansDir struct{ node }

func (d *plansDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if _, ok := d.f.plans.Len(name); !ok {
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
	if _, ok := d.f.plans.Len(name); !ok {
		d.f.setPlan(name, nil, false, 0) // an empty plan: never past the bound
	}
	d.f.attr(&out.Attr, planFileMode, 0)
	ch := d.NewInode(ctx, &planFile{node{f: d.f, mode: planFileMode}, name}, gofs.StableAttr{Mode: syscall.S_IFREG})
	appendPlan := flags&syscall.O_APPEND != 0
	// A file created for writing is a new plan, even left empty.
	w := d.f.newPlanWriter(name, appendPlan, flags&syscall.O_TRUNC != 0 || !appendPlan)
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

// planState is where a planWriter is in its life. The transitions (anything not listed leaves
// the state as it is):
//
//	unwritten    Write: written (tooLarge past the size limit).
//	             Flush: pendingEmpty when opened to replace the plan.
//	written      Write past the size limit: tooLarge.
//	             Flush: done, the plan applied, or refused whole (EINVAL).
//	tooLarge     Write: EFBIG.
//	             Flush: done, the plan refused (EFBIG).
//	pendingEmpty Write: written (tooLarge past the size limit).
//	             emptyClosedPlans (an open of the plan or the stats for reading, or a flush of
//	             any plan file): done, the plan emptied.
//	done         Write: written (tooLarge past the size limit).
//	any          Release: released; unwritten or pendingEmpty, an open to replace empties the plan
//	             first.
//
// The kernel flushes once per close of a descriptor (a dup'ed or inherited descriptor flushes
// again, and a shell's redirection closes one before anything is written), and releases once,
// after the last close has returned: so what is written is applied at the first flush after it
// was written, once, and an open to replace the plan that is closed with nothing written waits
// as pendingEmpty, not emptied at the flush (the shell's write may follow) yet emptied before
// anything that comes after its close can see the old plan (emptyClosedPlans).
type planState int

const (
	planUnwritten    planState = iota // nothing written yet
	planWritten                       // written since the last flush
	planTooLarge                      // a write went past the size limit since the last flush
	planPendingEmpty                  // opened to replace, flushed with nothing written: to be emptied
	planDone                          // what was written is applied or refused, or the plan emptied
	planReleased                      // the last descriptor is closed
)

// planWriter collects what one open of a plan file writes: the handle of every descriptor that
// open gave, dups and inherited ones included, which the kernel may call at once.
type planWriter struct {
	f          *FS
	name       string
	appendPlan bool // opened with O_APPEND: each flush queues what was written behind the plan
	replace    bool // opened to replace the plan (O_TRUNC, or created): unless written, it is emptied

	// mu guards state and buf. LOCK ORDERING: a writer's mu, then, one at a time,
	// pendingEmpties.mu (add, remove), the owners' mu (setPlan: the writer's process, /proc read
	// without it), order.Plans' setMu and mu (setPlan: the plan is built and published with this
	// mu held, so one open's plan is applied whole before its close returns), the cache's and the
	// disk tier's mu (their Replanned, each briefly), and the problem log's; the source's fetcher
	// is told (PlanMoved, no lock). None of those calls back into a writer, and
	// pendingEmpties.emptyAll takes a writer's mu holding no lock of its own. Readers of the
	// mount's data take none of these but the plans' and the owners', each briefly: they never
	// wait for a plan being built.
	mu    sync.Mutex
	state planState
	buf   []byte // what the next flush applies: the plan as written so far, or what to queue
}

// newPlanWriter returns the handle for one open for writing of plan name.
func (f *FS) newPlanWriter(name string, appendPlan, replace bool) *planWriter {
	return &planWriter{f: f, name: name, appendPlan: appendPlan, replace: replace}
}

func (w *planWriter) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.appendPlan {
		off = int64(len(w.buf))
	}
	end := off + int64(len(data))
	if w.state == planTooLarge || end > order.MaxBytes(w.f.lay.Len()) {
		w.setStateLocked(planTooLarge)
		return 0, syscall.EFBIG
	}
	if end > int64(len(w.buf)) {
		if off == 0 && cap(w.buf) == 0 {
			// A .npy plan says its size in its header: room for all of it at once, not a
			// buffer doubled again and again (three times a plan of millions in garbage); up
			// to planPresize, so that a header alone reserves no more.
			w.buf = make([]byte, 0, min(planPresize, npySize(data, order.MaxLen(w.f.lay.Len()))))
		}
		old := len(w.buf)
		w.buf = slices.Grow(w.buf, int(end)-old)[:end]
		if off > int64(old) {
			clear(w.buf[old:off]) // a gap left by a write past the end reads as zeros
		}
	}
	copy(w.buf[off:], data)
	w.setStateLocked(planWritten) // what is written replaces the plan, at the next flush
	return uint32(len(data)), 0
}

// Read gives what the next flush would apply: a replacing open's plan as written so far, or
// what an appending open wrote since its last flush.
func (w *planWriter) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := copy(dest, sliceAt(w.buf, dest, off)) // a copy: buf changes once mu is let go
	return fuse.ReadResultData(dest[:n]), 0
}

// Flush applies the plan written through this open, at a close of one of its descriptors.
// Plans emptied by opens closed before are emptied first, so that this plan, or an append to
// it, comes after them.
func (w *planWriter) Flush(ctx context.Context) syscall.Errno {
	w.f.emptyClosedPlans()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.state {
	case planUnwritten:
		if w.replace {
			w.setStateLocked(planPendingEmpty)
		}
	case planWritten, planTooLarge:
		return w.applyLocked(callerPid(ctx))
	}
	return 0
}

// applyLocked sets or queues the plan written, or refuses it whole, and returns the errno for
// the close.
func (w *planWriter) applyLocked(pid int) syscall.Errno {
	tooLarge := w.state == planTooLarge
	w.setStateLocked(planDone)
	var entries []int32
	var err error
	errno := syscall.EINVAL
	if tooLarge {
		err, errno = fmt.Errorf("more than %d bytes written: no plan for %d samples is that long", order.MaxBytes(w.f.lay.Len()), w.f.lay.Len()), syscall.EFBIG
	} else {
		entries, err = order.Parse(w.buf, w.f.lay.Len())
	}
	if err == nil {
		if err = w.f.setPlan(w.name, entries, w.appendPlan, pid); errors.Is(err, order.ErrTooManyEntries) {
			errno = syscall.ENOSPC // the plan is fine, the mount holds too many entries
		}
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
	verb := "new plan"
	if w.appendPlan {
		verb = "plan appended"
		w.buf = nil // queued: the next flush queues only what is written after
	}
	length, _ := w.f.plans.Len(w.name)
	w.f.log.Info(verb, "plan", w.name, "samples", len(entries), "length", length)
	return 0
}

// Release drops what was written, once the last descriptor is closed. A plan opened to be
// replaced (O_TRUNC, or created) and closed with nothing written is emptied now, unless a reader
// of the plan or the stats, or a flush, emptied it first (emptyClosedPlans).
func (w *planWriter) Release(ctx context.Context) syscall.Errno {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.replace && (w.state == planUnwritten || w.state == planPendingEmpty) {
		w.emptyLocked()
	}
	w.setStateLocked(planReleased)
	w.buf = nil
	return 0
}

// emptyIfPending empties the plan if w waits to empty it (pendingEmpty).
func (w *planWriter) emptyIfPending() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == planPendingEmpty {
		w.emptyLocked()
		w.setStateLocked(planDone)
	}
}

// setStateLocked moves w to state s, and keeps f.emptied holding exactly the writers that are
// pendingEmpty.
func (w *planWriter) setStateLocked(s planState) {
	if s == planPendingEmpty {
		w.f.emptied.add(w)
	} else if w.state == planPendingEmpty {
		w.f.emptied.remove(w)
	}
	w.state = s
}

func (w *planWriter) emptyLocked() {
	w.f.setPlan(w.name, nil, false, 0) // an empty plan: never past the bound
	w.f.log.Info("plan emptied", "plan", w.name)
}

// pendingEmpties are the plan writers that are pendingEmpty: closed with nothing written to a
// plan they opened to replace (O_TRUNC). The kernel sends Release, where such a plan is emptied,
// after close returns, so a reader that opens the plan or the stats right after the close could
// see the old plan, and a plan written or appended after the close could be emptied by it: such
// opens and flushes empty them first (FS.emptyClosedPlans). They are not emptied at the flush
// itself, because a shell's redirection closes one descriptor before it writes through another.
type pendingEmpties struct {
	// mu guards ws. LOCK ORDERING: taken after a writer's mu (add, remove), never before one
	// (emptyAll lets it go first), and nothing is called with it held.
	mu sync.Mutex
	ws map[*planWriter]struct{}
}

func (p *pendingEmpties) add(w *planWriter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ws == nil {
		p.ws = map[*planWriter]struct{}{}
	}
	p.ws[w] = struct{}{}
}

func (p *pendingEmpties) remove(w *planWriter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.ws, w)
}

// emptyClosedPlans empties the plans that opens to replace them left pendingEmpty (closed with
// nothing written), before anything that comes after those closes can see or change a plan. It
// is the one trigger for that, called where it matters and nowhere else: at each open of a plan
// file for reading (planFile.Open) or of .vidfs/stats (which shows the plans), and at each flush
// of a plan written through any file (planWriter.Flush), so that a plan written or appended
// after the close is not emptied by it. Release empties a writer's own plan in any case.
func (f *FS) emptyClosedPlans() { f.emptied.emptyAll() }

// emptyAll empties the plans of the writers pending. It lets go of p.mu before it takes a
// writer's, which holds its own while it adds or removes itself.
func (p *pendingEmpties) emptyAll() {
	p.mu.Lock()
	ws := slices.Collect(maps.Keys(p.ws))
	p.mu.Unlock()
	for _, w := range ws {
		w.emptyIfPending()
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

// planPresize bounds the room a plan's header reserves before its entries come: 64 epochs of a
// million samples as int32.
const planPresize = 256 << 20

// npySize is the size of the .npy plan whose first bytes are head, as its header says, where
// order.Parse would take it (one dimension of integers, at most maxLen of them); else 0.
func npySize(head []byte, maxLen int) int {
	h, off, err := npy.Decode(head)
	if err != nil || len(h.Shape) != 1 || h.Shape[0] < 0 || h.Shape[0] > maxLen || len(h.Descr) != 3 || !strings.ContainsRune("iu", rune(h.Descr[1])) {
		return 0
	}
	switch size := h.Descr[2]; size {
	case '1', '2', '4', '8':
		return off + h.Shape[0]*int(size-'0')
	}
	return 0
}
