package catalog

import (
	"log/slog"

	"github.com/vidfs/vidfs/decode"
)

// keeper writes the tables a scan probes into new segments: in the probe cache, a segment every
// checkpoint tables; where the cache cannot be written, in a temporary file; where that cannot
// be written either, in memory. Keeping the tables in the cache is best-effort: a failure to
// write there is logged and costs the videos whose tables were lost with the segment a probe
// again (add and finish return them), never the scan.
type keeper struct {
	store, root string // store: the probe cache's directory ("": none, or no longer)
	log         *slog.Logger
	checkpoint  int
	level       int        // where w writes: toStore, toTemp or toMemory
	segs        []*segment // the tables' segments; w's is the next
	w           *segWriter // nil until a table is added
	held        []int      // the videos whose tables w holds
}

// Where a keeper writes, in the order it tries them.
const (
	toStore = iota
	toTemp
	toMemory
)

func newKeeper(store, root string, segs []*segment, log *slog.Logger) *keeper {
	k := &keeper{store: store, root: root, log: log, checkpoint: checkpointEvery, segs: segs}
	if store == "" {
		k.level = toTemp
	}
	return k
}

// open starts a segment where the keeper now writes, or failing that, in the next place.
func (k *keeper) open() error {
	for {
		var err error
		switch k.level {
		case toStore:
			k.w, err = newSegWriter(k.store, k.root)
		case toTemp:
			k.w, err = newSegWriter("", k.root)
		default:
			k.w, err = newMemSegWriter(k.root)
			return err
		}
		if err == nil {
			return nil
		}
		k.fellBack(err)
	}
}

// fellBack logs why the tables could not be kept where they were, and moves on to the next place.
func (k *keeper) fellBack(err error) {
	if k.log != nil {
		if k.level == toStore {
			k.log.Warn("probe tables not kept in the probe cache; the next scan probes these videos again", "dir", k.store, "err", err)
		} else {
			k.log.Warn("probe tables kept in memory: no temporary file could hold them", "err", err)
		}
	}
	k.level++
}

// failed gives up the segment being written after err, and returns the videos whose tables it held.
func (k *keeper) failed(err error) []int {
	if k.w != nil {
		k.w.abort()
		k.w = nil
	}
	k.fellBack(err)
	lost := k.held
	k.held = nil
	return lost
}

// add keeps video i's table (or why it could not be probed) and returns where the table lies, and
// the videos whose tables a failure to write lost, to be probed and added again.
func (k *keeper) add(i int, rel string, id FileID, info *decode.Info, perr error) (Ref, []int, error) {
	var lost []int
	for {
		if k.w == nil {
			if err := k.open(); err != nil {
				return Ref{}, lost, err
			}
		}
		off, n, err := k.w.add(rel, id, info, perr)
		if err != nil && k.level < toMemory {
			lost = append(lost, k.failed(err)...)
			continue
		}
		if err != nil {
			return Ref{}, lost, err
		}
		k.held = append(k.held, i)
		ref := Ref{seg: int32(len(k.segs) + 1), n: n, off: off}
		if len(k.held) >= k.checkpoint && k.level == toStore {
			// Into place now, so that an interrupted scan keeps it.
			if s, err := k.w.finish(); err != nil {
				k.w = nil // finish removed it
				lost = append(lost, k.failed(err)...)
			} else {
				k.segs, k.w, k.held = append(k.segs, s), nil, nil
			}
		}
		if n == 0 {
			ref = Ref{}
		}
		return ref, lost, nil
	}
}

// finish puts the segment being written into place, and returns the videos whose tables were
// lost if it could not be.
func (k *keeper) finish() ([]int, error) {
	if k.w == nil {
		return nil, nil
	}
	s, err := k.w.finish()
	k.w = nil
	if err != nil && k.level < toMemory {
		return k.failed(err), nil
	}
	if err != nil {
		return nil, err
	}
	k.segs, k.held = append(k.segs, s), nil
	return nil, nil
}

// abort gives up the segment being written.
func (k *keeper) abort() {
	if k.w != nil {
		k.w.abort()
		k.w = nil
	}
}
