package decode

import (
	"container/list"
	"fmt"
	"log/slog"
	"testing"
)

// TestGPUIdleBookkeeping checks, with stand-in decoders (no GPU needed), how a pool keeps its idle
// decoders: idle GPU decoders stay beyond Idle while they hold slots, CPU ones do not; a reclaim
// closes the least recently used GPU decoder and frees its slot; a decoder tried for adoption and
// not taken goes back to the least recently used end.
func TestGPUIdleBookkeeping(t *testing.T) {
	g := &gpu{slots: make(chan struct{}, 3)}
	p := &Pool{opts: PoolOptions{Idle: 1, GPUDecoders: 3, Log: slog.New(slog.DiscardHandler)}, gpus: []*gpu{g}, idle: list.New(),
		states: map[string]*videoState{}}
	stand := func(name string, onGPU bool) *video {
		info := &Info{Path: name}
		st := newVideoState(info, p.opts.Log)
		st.users = 1
		p.states[name] = st
		v := &video{info: info, state: st}
		if onGPU {
			if !g.take() {
				t.Fatalf("no GPU slot for %s", name)
			}
			v.g = g
		}
		return v
	}
	idle := func() string {
		var s []string
		for e := p.idle.Front(); e != nil; e = e.Next() {
			s = append(s, e.Value.(*video).info.Path)
		}
		return fmt.Sprint(s)
	}
	for _, name := range []string{"g1", "c1", "g2", "c2", "g3", "c3"} {
		p.put(stand(name, name[0] == 'g'))
	}
	if got, want := idle(), "[c3 g3 g2 g1]"; got != want {
		t.Errorf("idle after putting 3 GPU and 3 CPU decoders with Idle 1: %s, want %s", got, want)
	}
	if g.take() {
		t.Fatal("a GPU slot free while three idle GPU decoders hold all three")
	}
	if p.reclaimGPUSlot() != g {
		t.Fatal("reclaim found no slot")
	}
	if got, want := idle(), "[c3 g3 g2]"; got != want || p.stats.GPUReclaims != 1 {
		t.Errorf("after a reclaim: %s, %d reclaims; want %s (the least recently used GPU decoder closed), 1", got, p.stats.GPUReclaims, want)
	}
	if _, ok := p.states["g1"]; ok {
		t.Error("the closed decoder's video state was kept")
	}
	// A candidate for adoption that is not taken goes back last, to be reclaimed first.
	e := p.idle.Front().Next() // g3
	p.idle.Remove(e)
	p.putBack(e.Value.(*video))
	if got, want := idle(), "[c3 g2 g3]"; got != want {
		t.Errorf("after putting g3 back: %s, want %s", got, want)
	}
	g.release() // the slot the reclaim took
	p.Close()
	if len(g.slots) != 0 || p.idle.Len() != 0 {
		t.Errorf("after Close: %d GPU slots held, %d idle", len(g.slots), p.idle.Len())
	}
}
