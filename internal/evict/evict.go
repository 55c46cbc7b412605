// Package evict is the eviction policy the memory cache and the disk tier share: which member of
// a bounded store goes first, by when the plans next want it. Members no plan wants go first,
// least recently used first; then the one due last. A store asks Victim under its own lock, and
// the work of every call grows with the logarithm of the members at most, never with their
// number.
package evict

import (
	"container/heap"
	"math"
	"time"
)

// Any, as Victim's after, takes any member; NotDue takes only members no plan wants.
const (
	Any    = math.MinInt
	NotDue = -1
)

// sweep is how many members each Victim asks due of again beside the top: due values go stale
// as readers move through the plans and plans are replaced, and the sweep brings every member's
// up to date over time.
const sweep = 4

// resweep is how many members each Victim asks due of again, in place of sweep, after Resweep,
// until every member has been asked.
const resweep = 64

// slack is how far a member's due may move before Victim takes it for stale: dues are estimates
// at readers' paces, rounded, and one asked again a moment later is a few milliseconds off.
const slack = 16

// maxStale bounds how many stale members one Victim puts in their places before it takes the
// order as it stands.
const maxStale = 8

// maxSkips bounds how many members Victim passes over because the store cannot drop them now
// (a reader holds them): far more than there are readers at once.
const maxSkips = 1024

// Policy orders the members of a store, each known by its key K and a tag (the sample it
// holds, -1: none), for eviction. due(tag) says how soon a tag is next due, in milliseconds, or
// -1 when no plan wants it (order.Plans.Due); it is asked holding the store's lock, so it must
// take none of the store's. A member's due is asked when it is added, touched or refreshed, and
// asked again before Victim takes it: a stale due (the plans moved since) is corrected then.
//
// Policy is not safe for concurrent use: its store calls it with its own lock held.
type Policy[K comparable] struct {
	due   func(tag int) int
	start time.Time // what members' dues count from
	items map[K]*item[K]
	byTag map[int]*item[K] // the member last added with each tag, for RefreshTag
	order members[K]
	seq   uint64 // recency: each add or touch takes the next
	sweep int    // where in order the next sweep starts
	owed  int    // members still to ask again after Resweep, resweep at a time
	// Asks counts calls of due, and Visits the members Victim looked at: the work done, which
	// tests count to show that it does not grow with the members.
	Asks, Visits int64
}

type item[K comparable] struct {
	key K
	tag int
	due int    // as last asked, in milliseconds from start; -1: not due
	seq uint64 // when last used
	i   int    // index in order
}

// New returns an empty policy that asks due how soon a tag is due (nil: nothing is ever due,
// which makes it least recently used first).
func New[K comparable](due func(tag int) int) *Policy[K] {
	return &Policy[K]{due: due, start: time.Now(), items: map[K]*item[K]{}, byTag: map[int]*item[K]{}}
}

// ask returns when tag is due, in milliseconds from start (which, unlike how soon it is due,
// stays put as time passes), or -1.
func (p *Policy[K]) ask(tag int) int {
	if p.due == nil || tag < 0 {
		return -1
	}
	p.Asks++
	d := p.due(tag)
	if d < 0 {
		return -1
	}
	return int(time.Since(p.start).Milliseconds()) + d
}

// Len is the number of members.
func (p *Policy[K]) Len() int { return len(p.order) }

// Has tells whether key is a member.
func (p *Policy[K]) Has(key K) bool { return p.items[key] != nil }

// Add makes key, tagged tag, a member, as just used (or, if it is one, touches it with its new
// tag).
func (p *Policy[K]) Add(key K, tag int) {
	if it := p.items[key]; it != nil {
		p.retag(it, tag)
		p.Touch(key)
		return
	}
	p.seq++
	it := &item[K]{key: key, tag: tag, due: p.ask(tag), seq: p.seq}
	p.items[key] = it
	if tag >= 0 {
		p.byTag[tag] = it
	}
	heap.Push(&p.order, it)
}

// Remove drops key, if it is a member.
func (p *Policy[K]) Remove(key K) {
	it := p.items[key]
	if it == nil {
		return
	}
	delete(p.items, key)
	if p.byTag[it.tag] == it {
		delete(p.byTag, it.tag)
	}
	heap.Remove(&p.order, it.i)
}

// Touch marks key as just used, and asks its due again.
func (p *Policy[K]) Touch(key K) {
	if it := p.items[key]; it != nil {
		p.seq++
		it.seq = p.seq
		it.due = p.ask(it.tag)
		heap.Fix(&p.order, it.i)
	}
}

// Retag gives key a new tag, and asks its due.
func (p *Policy[K]) Retag(key K, tag int) {
	if it := p.items[key]; it != nil {
		p.retag(it, tag)
		it.due = p.ask(tag)
		heap.Fix(&p.order, it.i)
	}
}

func (p *Policy[K]) retag(it *item[K], tag int) {
	if p.byTag[it.tag] == it {
		delete(p.byTag, it.tag)
	}
	it.tag = tag
	if tag >= 0 {
		p.byTag[tag] = it
	}
}

// Refresh asks key's due again (the plans moved: a reader read it, say).
func (p *Policy[K]) Refresh(key K) {
	if it := p.items[key]; it != nil {
		p.refresh(it)
	}
}

// RefreshTag asks the due of the member tagged tag again, if there is one.
func (p *Policy[K]) RefreshTag(tag int) {
	if it := p.byTag[tag]; it != nil {
		p.refresh(it)
	}
}

// refresh asks it's due again, and says whether it moved (by more than slack).
func (p *Policy[K]) refresh(it *item[K]) bool {
	d := p.ask(it.tag)
	if d == it.due || d >= 0 && it.due >= 0 && d-it.due <= slack && it.due-d <= slack {
		return false
	}
	it.due = d
	heap.Fix(&p.order, it.i)
	return true
}

// RefreshAll asks every member's due again (a plan was written or removed: every due may have
// moved). Its work grows with the members, once: a store calls it after the plans change, not
// on a read.
func (p *Policy[K]) RefreshAll() {
	for _, it := range p.order {
		it.due = p.ask(it.tag)
	}
	heap.Init(&p.order)
}

// Resweep has the members' dues asked again a few dozen at a time at each Victim until all have
// been (the plans changed): for a store too large to RefreshAll at once.
func (p *Policy[K]) Resweep() { p.owed = len(p.order) }

// Victim returns the member to evict and true, or false when there is none: the member no plan
// wants that was used least recently, else the one due last, if it is due later than after (Any:
// whatever its due; NotDue: only members not due). skip, if not nil, names members the store
// cannot drop now (a reader holds them): they are passed over. Victim does not remove the
// member.
func (p *Policy[K]) Victim(after int, skip func(K) bool) (K, bool) {
	n := sweep
	if p.owed > 0 {
		n = resweep
		p.owed -= n
	}
	for range min(n, len(p.order)) {
		p.sweep = (p.sweep + 1) % len(p.order)
		p.Visits++
		p.refresh(p.order[p.sweep])
	}
	var aside []*item[K]
	defer func() {
		for _, it := range aside {
			heap.Push(&p.order, it)
		}
	}()
	var none K
	stale := 0
	for len(p.order) > 0 && len(aside) < maxSkips {
		top := p.order[0]
		p.Visits++
		if stale < maxStale && p.refresh(top) {
			stale++
			continue // its place was wrong, and another may be first now
		}
		if skip != nil && skip(top.key) {
			aside = append(aside, heap.Pop(&p.order).(*item[K]))
			continue
		}
		if after == Any || top.due < 0 || after >= 0 && top.due-p.now() > after {
			return top.key, true
		}
		return none, false // the first in the order will not do: nothing after it would
	}
	return none, false
}

// now is the time in milliseconds from start.
func (p *Policy[K]) now() int { return int(time.Since(p.start).Milliseconds()) }

// members is a heap of the members, the first to evict at the top.
type members[K comparable] []*item[K]

func (m members[K]) Len() int { return len(m) }
func (m members[K]) Less(i, j int) bool {
	a, b := m[i], m[j]
	switch {
	case (a.due < 0) != (b.due < 0):
		return a.due < 0 // not due first
	case a.due != b.due && a.due >= 0:
		return a.due > b.due // due last first
	}
	return a.seq < b.seq // least recently used first
}
func (m members[K]) Swap(i, j int) {
	m[i], m[j] = m[j], m[i]
	m[i].i, m[j].i = i, j
}
func (m *members[K]) Push(x any) {
	it := x.(*item[K])
	it.i = len(*m)
	*m = append(*m, it)
}
func (m *members[K]) Pop() any {
	old := *m
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*m = old[:len(old)-1]
	return it
}
