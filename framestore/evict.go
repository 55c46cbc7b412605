package framestore

// Eviction: making room for frames within the bound, a video at a time, by the plans.

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// due is how soon video v is wanted, -1: not.
func (c *Store) due(v int) int {
	if c.opts.Due == nil || v < 0 {
		return -1
	}
	return c.opts.Due(v)
}

// candidates is how many videos makeRoom looks at for each eviction: a sample of the videos
// held, so that the work does not grow with them. The farthest due of 8 chosen at random is in
// the farthest 20 % of all with a chance of 83 %.
const candidates = 8

// makeRoom evicts until n more bytes fit, and takes them. Files found at Open that no video
// claimed go first, oldest first; then, of a few videos chosen at random (not v), one no plan
// wants, least recently used, or else the one due last, if it is due later than v (if v is not
// due, or -1, it takes only the place of videos not due). It returns the keys of the files to
// unlink, which the caller does once it has let mu go. Called with mu held.
func (c *Store) makeRoom(n int64, v int) (gone []diskstore.Key, ok bool) {
	due, asked := -1, false
	for c.bytes+n > c.opts.MaxBytes {
		if !asked { // asked only when there is something to evict
			due, asked = c.due(v), true
		}
		if k, size, ok := c.oldestUntagged(); ok {
			c.bytes -= size
			gone = append(gone, k)
			c.stats.Evicted++
			continue
		}
		w := c.victim(v, due)
		if w < 0 {
			return gone, false
		}
		gone = append(gone, c.videos[w].key)
		c.dropPresent(w)
		c.stats.Evicted++
	}
	c.bytes += n
	return gone, true
}

func (c *Store) oldestUntagged() (diskstore.Key, int64, bool) {
	if len(c.untagged) == 0 {
		c.oldest = nil
		return diskstore.Key{}, 0, false
	}
	if len(c.oldest) == 0 { // made once, when eviction first needs it
		c.oldest = slices.Collect(maps.Keys(c.untagged))
		slices.SortFunc(c.oldest, func(a, b diskstore.Key) int { return cmp.Compare(c.untagged[a].mod, c.untagged[b].mod) })
	}
	for len(c.oldest) > 0 {
		k := c.oldest[0]
		c.oldest = c.oldest[1:]
		if f, ok := c.untagged[k]; ok {
			delete(c.untagged, k)
			return k, f.size, true
		}
	}
	return diskstore.Key{}, 0, false
}

// victim chooses a video to evict for v (see makeRoom), or -1. Called with mu held.
func (c *Store) victim(v, due int) int {
	best, bestDue := -1, 0
	var bestUsed uint32
	for k := range min(candidates, len(c.present)) {
		w := int(c.present[k]) // few enough to look at them all
		if len(c.present) > candidates {
			w = int(c.present[rand.IntN(len(c.present))])
		}
		if w == v {
			continue
		}
		d, used := c.due(w), c.videos[w].used
		switch {
		case best < 0,
			d < 0 && (bestDue >= 0 || used < bestUsed),
			d >= 0 && bestDue >= 0 && d > bestDue:
			best, bestDue, bestUsed = w, d, used
		}
	}
	if best < 0 || bestDue >= 0 && (due < 0 || bestDue <= due) {
		return -1
	}
	return best
}

// evictVideo drops video v's file now.
func (c *Store) evictVideo(v int) {
	c.mu.Lock()
	k, had := c.videos[v].key, c.videos[v].at >= 0
	c.dropPresent(v)
	c.mu.Unlock()
	if had {
		os.Remove(c.path(k))
	}
}

func (c *Store) unlinkAll(keys []diskstore.Key) {
	for _, k := range keys {
		os.Remove(c.path(k))
	}
}
