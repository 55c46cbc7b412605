package tier

// Taking stock of the entries on disk at Open, and where an entry's file lives.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// scan removes temporary files and indexes the entries, oldest first.
func (t *Tier) scan() error {
	tmp := filepath.Join(t.dir, "tmp")
	names, err := os.ReadDir(tmp)
	if err != nil {
		return fmt.Errorf("disk tier: %w", err)
	}
	for _, n := range names {
		os.Remove(filepath.Join(tmp, n.Name()))
	}
	type found struct {
		key  diskstore.Key
		size int64
		mod  time.Time
	}
	var all []found
	err = diskstore.WalkKeys(t.dir, tmp, func(k diskstore.Key, size int64, mod time.Time) { all = append(all, found{k, size, mod}) })
	if err != nil {
		return fmt.Errorf("disk tier: %w", err)
	}
	// Least recently written first: the order eviction takes them in when nothing is due.
	slices.SortFunc(all, func(a, b found) int { return a.mod.Compare(b.mod) })
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range all {
		e := &entry{key: f.key, tag: -1, size: f.size}
		t.evict.Add(f.key, -1)
		t.entries[f.key] = e
		t.bytes += f.size
	}
	return nil
}

// path is where an entry's file lives.
func (t *Tier) path(k diskstore.Key) string { return filepath.Join(t.dir, k.Rel()) }
