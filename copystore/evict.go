package copystore

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

// candidates is how many videos an eviction looks at: a sample of the videos held, so that the
// work does not grow with them.
const candidates = 8

// makeRoom evicts until n more bytes fit, and takes them. Files found at Open that no video
// claimed go first, oldest first; then, of a few videos chosen at random (not v), one no plan
// wants, least recently used. A video a plan wants is never evicted for another: the room a
// video's frames take was promised to it when it was admitted (Admit), and a copy that cannot
// hold every video keeps the ones it holds rather than swap them (a video decoded whole only to
// be dropped is decoding with no return). It returns the keys of the files to unlink, which the
// caller does once it has let mu go. Called with mu held.
func (c *Store) makeRoom(n int64, v int) (gone []diskstore.Key, ok bool) {
	for c.bytes+n > c.bound() {
		k, ok := c.evictOne(v, false)
		if !ok {
			return gone, false
		}
		gone = append(gone, k)
	}
	c.bytes += n
	return gone, true
}

// evictOne evicts one file and returns its key, for the caller to unlink once it has let mu go:
// a file found at Open that no video claimed, oldest first; else, of a few videos chosen at
// random (not v), one no plan wants, least recently used (victim); else, with anyVideo, the least
// recently used of a few, wanted or not (leastRecent). ok is false when none may go. Called with
// mu held.
func (c *Store) evictOne(v int, anyVideo bool) (k diskstore.Key, ok bool) {
	if uk, size, found := c.oldestUntagged(); found {
		c.bytes -= size
		c.untaggedBytes -= size
		c.stats.Evicted++
		return uk, true
	}
	w := c.victim(v)
	if w < 0 && anyVideo {
		w = c.leastRecent()
	}
	if w < 0 {
		return diskstore.Key{}, false
	}
	k = c.videos[w].key
	c.dropPresent(w)
	c.stats.Evicted++
	return k, true
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

// victim chooses, of a few videos held chosen at random (not v), one no plan wants, least
// recently used, or -1. Called with mu held.
func (c *Store) victim(v int) int { return c.pick(v, true) }

// leastRecent chooses, of a few videos held chosen at random, the least recently used, wanted
// or not, or -1. Called with mu held.
func (c *Store) leastRecent() int { return c.pick(-1, false) }

// pick chooses, of a few videos held chosen at random (not v), the least recently used, of
// those no plan wants if unwanted is set; -1 if there is none. Called with mu held.
func (c *Store) pick(v int, unwanted bool) int {
	best := -1
	var bestUsed uint32
	for k := range min(candidates, len(c.present)) {
		w := int(c.present[k]) // few enough to look at them all
		if len(c.present) > candidates {
			w = int(c.present[rand.IntN(len(c.present))])
		}
		if w == v || unwanted && c.due(w) >= 0 {
			continue
		}
		if used := c.videos[w].used; best < 0 || used < bestUsed {
			best, bestUsed = w, used
		}
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
