package fs

// The budget of --copy-fill auto: the CPU that decoding videos whole may take, so that no stretch
// of reading costs more than a share above what decoding its clips would.

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// budgetShare is the share of a clip's decode that each sample the mount serves lets whole
// videos' decodes spend beyond what the copy saves: the copy's first epoch costs at most this
// much more CPU than decoding the clips (the keeping of the frames a clip's decode passes, which
// counts as the clip's, takes some of the rest of the 0.3 the issue allows).
const budgetShare = 0.2

// budget is what whole-video fills under --copy-fill auto may spend, in CPU time: each sample
// served adds budgetShare of a clip's decode, and each one served from the copy the decode it
// saved (less what reading it took); each fill takes its estimate when it starts and is settled
// at its end. What is not spent is kept up to about one fill's worth, so that a run of savings
// is not spent all at once later.
type budget struct {
	// mu guards everything below. LOCK ORDERING: taken alone.
	mu      sync.Mutex
	clip    time.Duration // a clip's decode, moving average; 0: none decoded yet
	perUnit time.Duration // a whole video's decode per unit decoded, moving average; 0: none yet
	tokens  time.Duration // what fills may spend now (below 0: owed)
	cap     time.Duration // the most tokens kept
	granted time.Duration // in all, for the stats
	spent   time.Duration
}

// decoded counts a clip decoded for a reader, which took cpu.
func (b *budget) decoded(cpu time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.clip == 0 {
		b.clip = cpu
	} else {
		b.clip += (cpu - b.clip) / 10
	}
	b.grant(time.Duration(budgetShare * float64(b.clip)))
}

// served counts a sample served from the copy, which took cpu to read.
func (b *budget) served(cpu time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.grant(time.Duration((1+budgetShare)*float64(b.clip)) - cpu)
}

// grant adds d to the tokens, up to the cap. Called with mu held.
func (b *budget) grant(d time.Duration) {
	b.granted += d
	b.tokens = min(b.tokens+d, max(b.cap, 4*b.clip))
}

// spend takes d from the tokens.
func (b *budget) spend(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens -= d
	b.spent += d
}

// allows returns what decoding units of a video whole is expected to take, and whether the
// tokens cover it. Before any fill has run, a unit is taken to cost what a frame of a clip
// (clipFrames of them, with the frames before them it decodes) does.
func (b *budget) allows(units, clipFrames int) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.clip == 0 {
		return 0, false
	}
	est := b.perUnit * time.Duration(units)
	if b.perUnit == 0 {
		est = b.clip * time.Duration(units) / time.Duration(max(1, clipFrames))
	}
	b.cap = max(b.cap, est)
	return est, b.tokens >= est
}

// filled settles a fill charged est that took cpu for units.
func (b *budget) filled(est, cpu time.Duration, units int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens += est - cpu
	b.spent += cpu - est
	if units > 0 {
		u := cpu / time.Duration(units)
		if b.perUnit == 0 {
			b.perUnit = u
		} else {
			b.perUnit += (u - b.perUnit) * 3 / 10
		}
	}
}

// state is the budget now, for the stats.
func (b *budget) state() (tokens, granted, spent time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens, b.granted, b.spent
}

// threadCPU is the CPU time the calling thread has used (the caller is locked to its thread).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
