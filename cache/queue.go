package cache

// fifo is a queue of loads, first in first out, from which an entry is taken out anywhere in
// constant time: it is only marked gone (its q no longer this queue) and skipped when it comes
// to the front, and the queue is compacted once the gone outnumber the queued. So dropping k
// queued prefetches costs O(k), whatever the queue's length, not O(k·n).
//
// An entry is in at most one fifo at a time (entry.q), and never put back in a fifo it was taken
// out of while that fifo may still hold it as gone: entries move only from a lane's prefetch
// queue to its demand queue, and from Fetch's lane to Load's.
type fifo struct {
	items []*entry // queued entries, and gone ones among them
	n     int      // entries queued (items whose q is this queue)
	work  *int64   // counts the entries looked at (Stats.QueueWork)
}

// push queues e at the back.
func (q *fifo) push(e *entry) {
	e.q = q
	q.items = append(q.items, e)
	q.n++
}

// len is how many entries are queued.
func (q *fifo) len() int { return q.n }

// pop takes the entry at the front out, or returns nil if none is queued.
func (q *fifo) pop() *entry {
	for len(q.items) > 0 {
		e := q.items[0]
		q.items[0] = nil
		q.items = q.items[1:]
		*q.work++
		if e.q == q {
			e.q = nil
			q.n--
			return e
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
	items := make([]*entry, 0, q.n)
	for _, e := range q.items {
		*q.work++
		if e.q == q {
			items = append(items, e)
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
