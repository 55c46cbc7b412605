package tier

// Taking stock of the entries on disk at Open, and where an entry's file lives.

import (
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
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
		key  Key
		size int64
		mod  time.Time
	}
	var all []found
	err = walkKeys(t.dir, tmp, func(k Key, size int64, mod time.Time) { all = append(all, found{k, size, mod}) })
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

// walkKeys calls found for each file under dir named by a key (but those under skip), with its
// size and modification time.
func walkKeys(dir, skip string, found func(k Key, size int64, mod time.Time)) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == skip {
				return filepath.SkipDir
			}
			return nil
		}
		k, ok := parseName(d.Name())
		if !ok {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		found(k, info.Size(), info.ModTime())
		return nil
	})
}

func parseName(name string) (Key, bool) {
	var k Key
	if len(name) != 2*len(k) {
		return k, false
	}
	if _, err := hex.Decode(k[:], []byte(name)); err != nil {
		return k, false
	}
	return k, true
}

// path is where an entry's file lives.
func (t *Tier) path(k Key) string {
	s := k.String()
	return filepath.Join(t.dir, s[:2], s)
}
