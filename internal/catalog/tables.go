package catalog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"

	"github.com/vidfs/vidfs/decode"
)

// Tables reads the probe tables a scan found or made, one video at a time, keeping the most
// recently used in memory up to a bound.
type Tables struct {
	segs   []*segment // read-only after Scan
	prober Prober     // how a table that cannot be read back is probed again
	loads  singleflight.Group

	// mu guards the fields below. A leaf lock: nothing is called while it is held.
	mu sync.Mutex
	// lru holds the tables in memory, bounded in bytes (maxBytes), not in entries: its own
	// bound on entries is never reached, and keep evicts the least recently used past maxBytes.
	lru      *simplelru.LRU[Ref, tableEntry]
	bytes    int64 // the tables' estimated memory, tableBytes summed over lru
	maxBytes int64
}

// tableEntry is a table in memory and its estimated size.
type tableEntry struct {
	info  *decode.Info
	bytes int64
}

// DefaultTablesBytes bounds the memory of the tables Tables keeps decoded.
const DefaultTablesBytes = 32 << 20

func newTables(segs []*segment, prober Prober) *Tables {
	lru, err := simplelru.NewLRU[Ref, tableEntry](math.MaxInt, nil) // bounded in bytes by keep
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &Tables{segs: segs, prober: prober, lru: lru, maxBytes: DefaultTablesBytes}
}

// Info returns the probe table r points at, with Path set to path. The table is shared with
// other callers: it must not be changed. A table that cannot be read back (its segment damaged,
// or removed on a shared filesystem by another node's merge) is probed again from path, once:
// the new table is kept as the one read would have been. Callers asking for the same table at
// once share one read.
func (t *Tables) Info(r Ref, path string) (*decode.Info, error) {
	if !r.Valid() || int(r.seg) > len(t.segs) {
		return nil, fmt.Errorf("%s: no probe table", path)
	}
	if info := t.cached(r); info != nil {
		return info, nil
	}
	v, err, _ := t.loads.Do(fmt.Sprintf("%d/%d", r.seg, r.off), func() (any, error) {
		if info := t.cached(r); info != nil { // loaded between the look and the load
			return info, nil
		}
		info, err := t.segs[r.seg-1].record(r.off, r.n)
		if err != nil {
			var perr error
			if info, perr = t.prober.Probe(context.Background(), path); perr != nil {
				return nil, fmt.Errorf("reading the probe table of %s: %w (probing it again: %w)", path, err, perr)
			}
		}
		info.Path = path
		t.keep(r, info)
		return info, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*decode.Info), nil
}

// cached returns the table r points at if it is in memory, else nil.
func (t *Tables) cached(r Ref) *decode.Info {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.lru.Get(r); ok { // made the most recently used
		return e.info
	}
	return nil
}

// keep adds a table to those in memory, dropping the least recently used beyond the bound.
func (t *Tables) keep(r Ref, info *decode.Info) {
	size := tableBytes(info)
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.lru.Peek(r); ok { // kept already (a load the single flight did not join): count it once
		t.bytes -= old.bytes
	}
	t.lru.Add(r, tableEntry{info: info, bytes: size})
	t.bytes += size
	for t.bytes > t.maxBytes && t.lru.Len() > 1 {
		_, old, _ := t.lru.RemoveOldest()
		t.bytes -= old.bytes
	}
}

// tableBytes estimates the memory a decoded table takes.
func tableBytes(in *decode.Info) int64 {
	n := 512 + 8*len(in.PTS) + 4*(len(in.FramePackets)+len(in.PacketFrames)) + 64*len(in.Keyframes)
	for _, w := range in.Warnings {
		n += 16 + len(w)
	}
	return int64(n)
}

// Close closes the segment files.
func (t *Tables) Close() error {
	var errs []error
	for _, s := range t.segs {
		errs = append(errs, s.f.Close())
	}
	return errors.Join(errs...)
}
