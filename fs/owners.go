package fs

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/procfs"
)

// owners remembers which process wrote each plan, and finds the plans a reading process wrote:
// itself, or a process it descends from. A DDP rank's sampler writes its plan from the rank's
// process and its DataLoader workers, children of that process, read; so a read is counted
// toward the plan of the rank that reads, even when another rank's next epoch has the same
// sample due sooner. A read whose process wrote no plan (nor did its parents) has no owner,
// and counts as order.Plans decides from the plans alone.
//
// Processes are known by their thread group (the kernel tells FUSE the reading thread), from
// /proc, which is looked at only while some plan has an owner. Each thread's answer is
// remembered for a while, so a read asks a map; /proc is read only for a thread not seen lately
// (a miss), and without the lock, so other readers never wait for it.
type owners struct {
	proc procfs.FS // where threads are looked up: /proc

	// mu guards the fields below. LOCK ORDERING: taken after a plan writer's mu (setPlan) and
	// before nothing: it is held for map work only, and /proc is read without it.
	mu      sync.Mutex
	byProc  map[int][]string // process (thread group) id -> the plans it wrote last
	known   map[int]procInfo // thread id -> its process and parent, as lately read
	answers map[int]answer   // thread id -> the plans of, as of gen
	gen     int              // moves at each change of byProc: older answers are stale
}

// answer is the plans a thread's reads count toward, as worked out at a time.
type answer struct {
	names []string // never changed once made
	gen   int
	at    time.Time
}

// procInfo is what /proc said of a thread.
type procInfo struct {
	tgid, ppid int
	at         time.Time
}

// procTTL is how long what /proc said of a thread is trusted. Thread ids are reused, but not
// this soon on a machine that is not creating threads by the thousand.
const procTTL = 10 * time.Second

// maxAncestry bounds the walk up from a reading process to the one that wrote its plan.
const maxAncestry = 16

// maxKnown bounds the threads remembered; past it, those not seen within procTTL are forgotten.
const maxKnown = 4096

func newOwners(proc procfs.FS) *owners {
	return &owners{proc: proc, byProc: map[int][]string{}, known: map[int]procInfo{}, answers: map[int]answer{}}
}

// callerPid is the id of the thread whose request ctx carries, or 0 when it carries none.
func callerPid(ctx context.Context) int {
	if c, ok := fuse.FromContext(ctx); ok {
		return int(c.Pid)
	}
	return 0
}

// wrote records that thread pid wrote plan (which no other process owns from now on).
func (o *owners) wrote(plan string, pid int) {
	var info procInfo
	var err error
	if pid > 0 {
		info, err = o.info(pid, time.Now())
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.forgetLocked(plan)
	if pid <= 0 || err != nil {
		return // gone already: no reader can descend from it
	}
	o.byProc[info.tgid] = append(o.byProc[info.tgid], plan)
}

// forget drops plan's owner (the plan was removed).
func (o *owners) forget(plan string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.forgetLocked(plan)
}

func (o *owners) forgetLocked(plan string) {
	o.gen++
	for p, names := range o.byProc {
		if names = slices.DeleteFunc(names, func(n string) bool { return n == plan }); len(names) == 0 {
			delete(o.byProc, p)
		} else {
			o.byProc[p] = names
		}
	}
}

// of returns the plans written by thread pid's process or the nearest of its ancestors that
// wrote any; nil when there are none or pid is not known (0). The caller must not change what
// it returns. A thread asked of lately is answered from memory.
func (o *owners) of(pid int) []string {
	now := time.Now()
	o.mu.Lock()
	if len(o.byProc) == 0 || pid <= 0 {
		o.mu.Unlock()
		return nil
	}
	if a, ok := o.answers[pid]; ok && a.gen == o.gen && now.Sub(a.at) < procTTL {
		o.mu.Unlock()
		return a.names
	}
	gen := o.gen
	o.mu.Unlock()
	names := o.walk(pid, now)
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.answers) >= maxKnown {
		for p, a := range o.answers {
			if a.gen != o.gen || now.Sub(a.at) >= procTTL {
				delete(o.answers, p)
			}
		}
	}
	o.answers[pid] = answer{names, gen, now}
	return names
}

// walk goes up from thread pid to the nearest process that wrote plans, and returns a copy of
// their names (nil: none).
func (o *owners) walk(pid int, now time.Time) []string {
	for range maxAncestry {
		info, err := o.info(pid, now)
		if err != nil {
			return nil
		}
		o.mu.Lock()
		names := slices.Clone(o.byProc[info.tgid]) // wrote and forget change byProc's slices in place
		o.mu.Unlock()
		if len(names) > 0 {
			return names
		}
		if info.ppid <= 1 {
			return nil
		}
		pid = info.ppid
	}
	return nil
}

// info returns thread pid's process and parent, from what is remembered or, without the lock,
// from /proc.
func (o *owners) info(pid int, now time.Time) (procInfo, error) {
	o.mu.Lock()
	info, ok := o.known[pid]
	o.mu.Unlock()
	if ok && now.Sub(info.at) < procTTL {
		return info, nil
	}
	tgid, ppid, err := o.thread(pid)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		delete(o.known, pid)
		return procInfo{}, err
	}
	if len(o.known) >= maxKnown {
		for p, info := range o.known {
			if now.Sub(info.at) >= procTTL {
				delete(o.known, p)
			}
		}
	}
	info = procInfo{tgid: tgid, ppid: ppid, at: now}
	o.known[pid] = info
	return info, nil
}

// thread reads from /proc thread pid's process (its thread group) and that process's parent.
func (o *owners) thread(pid int) (tgid, ppid int, err error) {
	p, err := o.proc.Proc(pid)
	if err != nil {
		return 0, 0, err
	}
	status, err := p.NewStatus()
	if err != nil {
		return 0, 0, err
	}
	stat, err := p.Stat()
	if err != nil {
		return 0, 0, err
	}
	return status.TGID, stat.PPID, nil
}
