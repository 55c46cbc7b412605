package fs

// The budget of --copy-fill auto: the CPU that decoding videos whole may take, so that no stretch
// of reading costs more than a share above what decoding its clips would.

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/wire"
)

// budgetShare is the share of a clip's decode that each sample read lets whole videos' decodes
// spend beyond what the copy saves: reading costs at most about this much more CPU than decoding
// the clips would (docs/design.md aims at 0.3; the rest is margin for what the estimates miss:
// keeping frames, the writer, reading from the copy).
const budgetShare = 0.25

// budget is what whole-video decodes under --copy-fill auto may spend, in CPU time. Each sample a
// reader reads grants budgetShare of a clip's decode, and each one the copy served the decode it
// saved; reading from the copy, and keeping frames in it, are paid for as they happen. Grants
// follow the readers, not the loads ahead of them, so that they come at the pace of the reading.
// A whole decode goes a chunk at a time, each once the tokens cover what a chunk is expected to
// take, and pays what it took; it waits (paused) meanwhile. What is not spent fades
// (budgetKeep), so that no stretch of reading pays much for another's.
type budget struct {
	chunk int // units a chunk of a whole decode converts
	// mu guards everything below. LOCK ORDERING: taken alone.
	mu      sync.Mutex
	clip    time.Duration // a clip's decode, moving average; 0: none decoded yet
	perUnit time.Duration // a whole decode's CPU per unit, moving average; 0: none yet
	tokens  time.Duration // what whole decodes may spend now (below 0: owed)
	open    bool          // no bound any more: vidfs copy asked for every video
	changed chan struct{} // closed, and replaced, when the tokens grow or the bound is lifted
	faded   time.Time     // when the tokens last faded
	granted time.Duration // in all, for the stats
	spent   time.Duration
}

func newBudget(chunk int) *budget { return &budget{chunk: chunk, changed: make(chan struct{})} }

// decoded counts a clip decoded for a reader, which took cpu: what a clip's decode costs.
func (b *budget) decoded(cpu time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.clip == 0 {
		b.clip = cpu
	} else {
		b.clip += (cpu - b.clip) / 10
	}
}

// read counts a sample a reader read; fromCopy says the copy served it (no decode).
func (b *budget) read(fromCopy bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	share := budgetShare
	if fromCopy {
		share++
	}
	b.grant(time.Duration(share * float64(b.clip)))
}

// budgetKeep is how long tokens last: what is not spent fades (by e, every budgetKeep), so that
// a batch of reads, whose grants come at once, is spent over the chunks that follow, and what one
// stretch of reading granted is not spent on another much later.
const budgetKeep = 2 * time.Second

// fade lets the tokens fade for the time since they last did. Called with mu held.
func (b *budget) fade() {
	now := time.Now()
	if b.tokens > 0 && !b.faded.IsZero() {
		b.tokens = time.Duration(float64(b.tokens) * math.Exp(-float64(now.Sub(b.faded))/float64(budgetKeep)))
	}
	b.faded = now
}

// grant adds d to the tokens. Called with mu held.
func (b *budget) grant(d time.Duration) {
	b.fade()
	b.granted += d
	b.tokens += d
	close(b.changed)
	b.changed = make(chan struct{})
}

// spend takes d from the tokens: what the copy cost beyond a whole decode (reading a sample from
// it and missing, keeping a sample's frames).
func (b *budget) spend(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens -= d
	b.spent += d
}

// chunkCost is what a chunk of a whole decode is expected to take: as chunks took so far, or
// before any has, what converting as many frames of a clip did. Called with mu held.
func (b *budget) chunkCost() time.Duration {
	if b.perUnit > 0 {
		return b.perUnit * time.Duration(b.chunk)
	}
	return b.clip
}

// ready tells whether the tokens cover a chunk of a whole decode now (or the bound is lifted).
func (b *budget) ready() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fade()
	return b.open || b.clip > 0 && b.tokens >= b.chunkCost()
}

// await waits until the tokens cover a chunk, or ctx is done; paused is told when it starts
// waiting and when it stops.
func (b *budget) await(ctx context.Context, paused func(bool)) error {
	waited := false
	defer func() {
		if waited {
			paused(false)
		}
	}()
	for {
		b.mu.Lock()
		b.fade()
		if b.open || b.clip > 0 && b.tokens >= b.chunkCost() {
			b.mu.Unlock()
			return nil
		}
		changed := b.changed
		b.mu.Unlock()
		if !waited {
			waited = true
			paused(true)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// paid counts a chunk of a whole decode that took cpu for units.
func (b *budget) paid(cpu time.Duration, units int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens -= cpu
	b.spent += cpu
	if units > 0 {
		u := cpu / time.Duration(units)
		if b.perUnit == 0 {
			b.perUnit = u
		} else {
			b.perUnit += (u - b.perUnit) * 3 / 10
		}
	}
}

// lift lifts the bound: vidfs copy asked for every video whole, whatever it costs.
func (b *budget) lift() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		b.open = true
		close(b.changed)
		b.changed = make(chan struct{})
	}
}

// state is the budget now, for the stats.
func (b *budget) state() wire.FillBudget {
	b.mu.Lock()
	defer b.mu.Unlock()
	return wire.FillBudget{Seconds: b.tokens.Seconds(), GrantedSeconds: b.granted.Seconds(), SpentSeconds: b.spent.Seconds(),
		ClipSeconds: b.clip.Seconds(), ChunkSeconds: b.chunkCost().Seconds()}
}

// threadCPU is the CPU time the calling thread has used (the caller is locked to its thread).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
