package tier

// The tier's space: the index of its entries, making room in it (eviction), and what callers
// tell it of how soon entries are due.

import (
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/evict"
)

// Has tells whether there is an entry under key (not whether it is sound).
func (t *Tier) Has(key diskstore.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entries[key] != nil
}

// Tag gives the entry under key, if there is one, the caller's number tag, for Due; it says
// whether there was one. (Entries found on disk at Open have none.)
func (t *Tier) Tag(key diskstore.Key, tag int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.entries[key]; e != nil {
		e.tag = tag
		t.evict.Retag(key, tag)
		return true
	}
	return false
}

// Replanned tells the tier that a plan was written or removed: every entry's due may have
// moved. They are asked again a few dozen at each eviction from then on, until all have been.
func (t *Tier) Replanned() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.evict.Resweep()
}

// Refresh asks again how soon the entry tagged tag is due (Options.Due), if there is one: a
// reader read it, and the plans moved.
func (t *Tier) Refresh(tag int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.evict.RefreshTag(tag)
}

// makeRoom evicts until size more bytes fit, and reserves them. Eviction drops an entry that is
// not due, least recently used first, or else the one due last, and only if it is due later than
// the entry being made room for (due; -1: not due, which takes only the place of entries not
// due): the shared policy's choice (package evict). It reports whether the room was made, and
// the keys of the entries it dropped from the index, whose files the caller unlinks
// (unlinkEntries) once it has let mu go, before it writes any entry. Called with t.mu held.
func (t *Tier) makeRoom(size int64, due int) (evicted []diskstore.Key, ok bool) {
	after := due
	if due < 0 {
		after = evict.NotDue
	}
	for t.bytes+size > t.opts.MaxBytes {
		k, ok := t.evict.Victim(after, nil)
		if !ok {
			return evicted, false
		}
		t.remove(t.entries[k])
		evicted = append(evicted, k)
		t.stats.Evicted++
	}
	t.bytes += size
	return evicted, true
}

// unlinkEntries unlinks the files of the entries makeRoom evicted. Called without t.mu, by the
// writer (or by Open before the writer starts), which writes no entry meanwhile.
func (t *Tier) unlinkEntries(keys []diskstore.Key) {
	for _, k := range keys {
		t.unlink(t.path(k))
	}
}

// due is how soon the entry tagged tag is due; -1 when it is not, or has no tag.
func (t *Tier) due(tag int) int {
	if t.opts.Due == nil || tag < 0 {
		return -1
	}
	return t.opts.Due(tag)
}

// remove drops an entry from the index. Called with t.mu held.
func (t *Tier) remove(e *entry) {
	t.evict.Remove(e.key)
	delete(t.entries, e.key)
	t.bytes -= e.size
}

// forget drops key from the index if it is there. Called with t.mu held.
func (t *Tier) forget(key diskstore.Key) {
	if e := t.entries[key]; e != nil {
		t.remove(e)
	}
}
