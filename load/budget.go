package load

// The budget of --copy-fill auto: the CPU that decoding videos whole may take, so that no stretch
// of reading costs more than a share above what decoding its clips would.

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/vidfs/vidfs/internal/threadcpu"
	"github.com/vidfs/vidfs/internal/wire"
)

// budgetShare is the share of a clip's decode that each sample read lets whole videos' decodes
// spend beyond what the copy saves: reading costs at most about this much more CPU than decoding
// its clips would. The bound is 0.3; the rest is margin for what the budget does not see
// (keeping each decoded sample's frames is paid from it; the writer's appending is not).
const budgetShare = 0.25

// runShare is what each sample read grants instead, while the run has runRepays epochs or more
// left: decoding a video whole (about 3.5 of a 10 s video's clips) is then repaid by the clips
// of it the later epochs read from the copy, even at one or two clips a video an epoch. An epoch
// then costs at most about 1 + runShare times what decoding its clips would (3x).
const runShare = 2.0

// runRepays is how many epochs left (PlanSampler(epochs=...), .vidfs/epochs) make runShare the
// grant.
const runRepays = 4

// budgetKeep is how long tokens last: what is not spent fades (by e, every budgetKeep), so that
// a batch of reads, whose grants come at once, is spent over the chunks that follow, and what one
// stretch of reading granted is not spent on another much later.
const budgetKeep = 2 * time.Second

// budget is what whole-video decodes under --copy-fill auto may spend, in CPU time. Each sample a
// reader reads grants budgetShare of a clip's decode (its moving average), and each one the copy
// served the decode it saved too; reading from the copy, and keeping frames in it, are paid for
// as they happen. Grants follow the readers, not the loads ahead of them (a plan's prefetch of an
// epoch from the copy comes in one burst, and decodes run ahead into the next epoch), so that
// they come at the pace of the reading.
// A whole decode goes a chunk at a time: a chunk starts when the tokens are above what the
// chunks under way are expected to take (their running average), and pays what it took
// afterwards (the tokens may go below zero, and the next chunk waits until grants bring them
// back); a whole decode waiting for it is paused, and loads do not wait on it. The estimate only
// spreads the tokens over the whole decodes under way: the first chunk of all always starts on
// tokens above zero, so that no costly chunk can stall the fills, and each stretch of reading
// pays for at most a chunk more than it granted for each whole decode under way.
type budget struct {
	// mu guards everything below. LOCK ORDERING: taken alone.
	mu      sync.Mutex
	clip    time.Duration // a clip's decode, moving average; 0: none decoded yet
	chunk   time.Duration // a chunk of a whole decode, moving average (for the stats)
	tokens  time.Duration // what whole decodes may spend now (below 0: owed)
	busy    int           // budgeted chunks being decoded
	open    bool          // no bound any more: vidfs copy asked for every video
	changed chan struct{} // closed, and replaced, when the tokens grow, a chunk ends or the bound is lifted
	faded   time.Time     // when the tokens last faded
	granted time.Duration // in all, for the stats
	spent   time.Duration
	// epochsLeft is what the readers last said of their run (.vidfs/epochs): the epochs left,
	// this one included; 0: not said.
	epochsLeft int
}

func newBudget() *budget { return &budget{changed: make(chan struct{})} }

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

// read counts a sample a reader read: it grants budgetShare of a clip's decode, and if the copy
// served it (fromCopy), the decode it saved too.
func (b *budget) read(fromCopy bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	share := budgetShare
	if b.epochsLeft >= runRepays {
		share = runShare
	}
	if fromCopy {
		share++
	}
	b.grant(time.Duration(share * float64(b.clip)))
}

// grant adds d to the tokens and wakes what waits for them. Called with mu held.
func (b *budget) grant(d time.Duration) {
	b.fade()
	b.granted += d
	b.tokens += d
	b.signal()
}

// fade lets the tokens above zero fade for the time since they last did (debts do not). Called
// with mu held.
func (b *budget) fade() {
	now := time.Now()
	if b.tokens > 0 && !b.faded.IsZero() {
		b.tokens = time.Duration(float64(b.tokens) * math.Exp(-float64(now.Sub(b.faded))/float64(budgetKeep)))
	}
	b.faded = now
}

// signal wakes what waits for the budget. Called with mu held.
func (b *budget) signal() {
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

// ready tells whether a chunk of a whole decode could start now: the tokens are above zero (or
// the bound is lifted).
func (b *budget) ready() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fade()
	return b.open || b.clip > 0 && b.tokens > 0
}

// take waits until a chunk may start (the tokens above what the chunks under way will take),
// or ctx is done, and marks one started; the caller pays for it with paid. paused is told when it
// starts waiting and when it stops. With the bound lifted it returns at once, marking nothing.
func (b *budget) take(ctx context.Context, paused func(bool)) (budgeted bool, err error) {
	waited := false
	defer func() {
		if waited {
			paused(false)
		}
	}()
	for {
		b.mu.Lock()
		b.fade()
		if b.open {
			b.mu.Unlock()
			return false, nil
		}
		if b.clip > 0 && b.tokens > time.Duration(b.busy)*b.chunkCost() {
			b.busy++
			b.mu.Unlock()
			return true, nil
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
			return false, ctx.Err()
		}
	}
}

// paid pays for a chunk of a whole decode that took cpu (budgeted: take marked it started).
func (b *budget) paid(cpu time.Duration, budgeted bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens -= cpu
	b.spent += cpu
	if b.chunk == 0 {
		b.chunk = cpu
	} else {
		b.chunk += (cpu - b.chunk) / 10
	}
	if budgeted {
		b.busy--
		b.signal()
	}
}

// chunkCost is what a chunk of a whole decode is expected to take: as chunks took lately, or
// before any has, a clip's decode. Called with mu held.
func (b *budget) chunkCost() time.Duration {
	if b.chunk > 0 {
		return b.chunk
	}
	return b.clip
}

// run notes that the readers' run has n epochs left, this one included.
func (b *budget) run(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.epochsLeft = n
}

// lift lifts the bound: vidfs copy asked for every video whole, whatever it costs.
func (b *budget) lift() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		b.open = true
		b.signal()
	}
}

// state is the budget now, for the stats.
func (b *budget) state() wire.FillBudget {
	b.mu.Lock()
	defer b.mu.Unlock()
	return wire.FillBudget{Seconds: b.tokens.Seconds(), GrantedSeconds: b.granted.Seconds(), SpentSeconds: b.spent.Seconds(),
		ClipSeconds: b.clip.Seconds(), ChunkSeconds: b.chunk.Seconds(), EpochsLeft: b.epochsLeft}
}

// threadCPU is the CPU time the calling thread has used (the caller is locked to its thread).
func threadCPU() time.Duration { return threadcpu.Now() }
