package cache

// fifo is a queue of loads, first in first out, from which an entry is taken out anywhere in
// constant time: it is only marked gone (its q no longer this queue) and skipped when it comes
// to the front, and the queue is compacted once the gone outnumber the queued. So dropping k
// queued prefetches costs O(k), whatever the queue's length, not O(k·n).
//
// An entry is in at most one fifo at a time (entry.q). Each push numbers its place (entry.qseq),
// so that an entry taken out and queued again, in this fifo or another, is found once, at its
// latest place: the places it left are stale whatever its q says.
type fifo struct {
	items []place // queued entries, and gone ones among them
	n     int     // entries queued (places that are their entry's latest, in this queue)
	work  *int64  // counts the entries looked at (Stats.QueueWork)
}

// place is where an entry was queued: it is queued there still if it is in this queue and was
// not queued again since.
type place struct {
	e   *entry
	seq uint64
}

// here tells whether p is where its entry is queued now, in q.
func (q *fifo) here(p place) bool { return p.e.q == q && p.e.qseq == p.seq }

// push queues e at the back. e must be in no queue.
func (q *fifo) push(e *entry) {
	e.q = q
	e.qseq++
	q.items = append(q.items, place{e, e.qseq})
	q.n++
}

// len is how many entries are queued.
func (q *fifo) len() int { return q.n }

// pop takes the entry at the front out, or returns nil if none is queued.
func (q *fifo) pop() *entry {
	for len(q.items) > 0 {
		p := q.items[0]
		q.items[0] = place{}
		q.items = q.items[1:]
		*q.work++
		if q.here(p) {
			p.e.q = nil
			q.n--
			return p.e
		}
	}
	return nil
}

// remove takes e, which is queued here, out of the queue.
func (q *fifo) remove(e *entry) {
	e.q = nil
	q.n--
	if gone := len(q.items) - q.n; gone > q.n && gone > 32 {
		q.compact()
	}
}

// compact drops the gone entries, keeping the order of the rest.
func (q *fifo) compact() {
	items := make([]place, 0, q.n)
	for _, p := range q.items {
		*q.work++
		if q.here(p) {
			items = append(items, p)
		}
	}
	q.items = items
}

// drain takes every queued entry out, front first, calling f for each.
func (q *fifo) drain(f func(*entry)) {
	for e := q.pop(); e != nil; e = q.pop() {
		f(e)
	}
	q.items = nil
}
