package fs

import (
	"context"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/procfs"

	"github.com/vidfs/vidfs/order"
)

// owners finds the plans a reading process wrote: itself, or a process it descends from. A DDP
// rank's sampler writes its plan from the rank's process and its DataLoader workers, children
// of that process, read; so a read is counted toward the plan of the rank that reads, even when
// another rank's next epoch has the same sample due sooner. A read whose process wrote no plan
// (nor did its parents) has no owner, and counts as order.Plans decides from the plans alone.
// Which process owns which plan is the plans' to keep (order.Plans.SetOwned, Owned): owners
// keeps only what /proc said of threads, and its answers.
//
// Processes are known by their thread group (the kernel tells FUSE the reading thread), from
// /proc, which is looked at only while some plan has an owner. Each thread's answer is
// remembered for a while, so a read asks a map; /proc is read only for a thread not seen lately
// (a miss), and without the lock, so other readers never wait for it.
type owners struct {
	proc  procfs.FS // where threads are looked up: /proc
	plans *order.Plans

	// mu guards the fields below. LOCK ORDERING: taken with no other lock held, and nothing is
	// called with it held (the plans are asked, and /proc read, without it).
	mu      sync.Mutex
	known   map[int]procInfo // thread id -> its process and parent, as lately read
	answers map[int]answer   // thread id -> the plans of, as of the plans' OwnerGen
}

// answer is the plans a thread's reads count toward, as worked out at a time.
type answer struct {
	names []string // never changed once made
	gen   int64
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

func newOwners(proc procfs.FS, plans *order.Plans) *owners {
	return &owners{proc: proc, plans: plans, known: map[int]procInfo{}, answers: map[int]answer{}}
}

// callerPid is the id of the thread whose request ctx carries, or 0 when it carries none.
func callerPid(ctx context.Context) int {
	if c, ok := fuse.FromContext(ctx); ok {
		return int(c.Pid)
	}
	return 0
}

// process returns thread pid's process (thread group) id, 0 when not known: the owner of a plan
// the thread writes.
func (o *owners) process(pid int) int {
	if pid <= 0 {
		return 0
	}
	info, err := o.info(pid, time.Now())
	if err != nil {
		return 0 // gone already: no reader can descend from it
	}
	return info.tgid
}

// of returns the plans written by thread pid's process or the nearest of its ancestors that
// wrote any; nil when there are none or pid is not known (0). The caller must not change what
// it returns. A thread asked of lately is answered from memory.
func (o *owners) of(pid int) []string {
	if !o.plans.AnyOwned() || pid <= 0 {
		return nil
	}
	now, gen := time.Now(), o.plans.OwnerGen()
	o.mu.Lock()
	a, ok := o.answers[pid]
	o.mu.Unlock()
	if ok && a.gen == gen && now.Sub(a.at) < procTTL {
		return a.names
	}
	names := o.walk(pid, now)
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.answers) >= maxKnown {
		for p, a := range o.answers {
			if a.gen != gen || now.Sub(a.at) >= procTTL {
				delete(o.answers, p)
			}
		}
	}
	o.answers[pid] = answer{names, gen, now}
	return names
}

// walk goes up from thread pid to the nearest process that owns plans, and returns their names
// (nil: none).
func (o *owners) walk(pid int, now time.Time) []string {
	for range maxAncestry {
		info, err := o.info(pid, now)
		if err != nil {
			return nil
		}
		if names := o.plans.Owned(info.tgid); len(names) > 0 {
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
