package isolate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/decode"
)

// deathError is a clip's end when its helper died before answering: crashed, exited, or killed
// as hung.
type deathError struct{ reason string }

func (e *deathError) Error() string { return "the decoder helper died: " + e.reason }

// errGone is a clip's end when its helper was found dead before the clip was sent to it.
var errGone = errors.New("the decoder helper is gone")

// proc is one helper process, from the mount's side.
type proc struct {
	d   *Decoders
	pid int
	// pixels is the picture measure its data limit was sized for (limits.go).
	pixels int64
	cmd    *exec.Cmd
	c      *conn
	hello  hello

	// sendMu keeps a decode's choice of the probe table to send and its sending together, so that
	// the requests reach the helper in the order tables decides them. LOCK ORDERING: sendMu
	// before mu and conn.wmu.
	sendMu sync.Mutex

	gone   chan struct{} // closed once the process is reaped and its calls failed
	waited chan struct{} // closed once it was reaped (and its socket closed)
	said   chan struct{} // closed once its stderr ended

	// mu guards the fields below.
	mu       sync.Mutex
	calls    map[uint64]*pending
	inflight int      // clips given to it and not yet ended (Decoders.mu guards it too: pick)
	recent   []string // the videos of its last clips, most recent last
	stats    decode.PoolStats
	tryAsk   chan []tryResult
	hungWhy  string // set when it was killed for passing a deadline
	dead     bool
	lines    []string // the last lines it printed
	signal   string   // the fatal signal the Go runtime reported, e.g. "SIGSEGV: segmentation violation"
	fatal    string   // its first "fatal error:" or "panic:" line
	// waiting counts its reads of a source this process is answering (serveStream), since
	// waitStart; stalled is the time it waited for them before, beyond readGrace a wait.
	waiting   int
	waitStart time.Time
	stalled   time.Duration
	// tables are the videos whose probe tables it keeps (helper.tables), least recently sent
	// first, at most keptTables.
	tables []tableSent
	// retiring: it takes no more requests, and is replaced once those it has end (grow, Fit).
	retiring bool
	// windows are the shared memory lent to it, one for each clip it may decode at once (nil:
	// not made yet, or let go); lent marks those a request holds.
	windows []*window
	lent    []bool
}

// tableSent is a probe table a helper keeps: the video's, as sent.
type tableSent struct {
	path string
	info *decode.Info
}

// keptTables bounds the probe tables a helper keeps, for each clip it decodes at once.
const keptTables = 4

// send sends request m with fds. A decode's probe table goes with it only when p does not keep
// it already (the same table, sent before: the Tables' LRU may have read it anew); p is told to
// let go of the least recently sent beyond keptTables a clip.
func (p *proc) send(m *message, fds []int) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	if r := m.Decode; r != nil && r.Info != nil {
		r.Video = r.Info.Path
		p.mu.Lock()
		i := slices.IndexFunc(p.tables, func(t tableSent) bool { return t.path == r.Video })
		kept := i >= 0 && p.tables[i].info == r.Info
		if i >= 0 {
			p.tables = slices.Delete(p.tables, i, i+1)
		}
		p.tables = append(p.tables, tableSent{r.Video, r.Info})
		if over := len(p.tables) - keptTables*p.d.opts.PerHelper; over > 0 {
			for _, t := range p.tables[:over] {
				r.Forget = append(r.Forget, t.path)
			}
			p.tables = slices.Delete(p.tables, 0, over)
		}
		p.mu.Unlock()
		if kept {
			sent := *r
			sent.Info = nil
			mm := *m
			mm.Decode = &sent
			m = &mm
		}
	}
	return p.c.send(m, fds...)
}

// pending is a decode awaiting its reply.
type pending struct{ done chan *reply }

// load says how many clips p decodes, whether it decoded path last, and whether it serves
// requests of pictures of pixels pixels. Called with Decoders.mu held.
func (p *proc) load(path string, pixels int64) (n int, has, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight, slices.Contains(p.recent, path), !p.dead && !p.retiring && pixels <= p.pixels
}

// begin counts a clip of path given to p. Called with Decoders.mu held.
func (p *proc) begin(path string) {
	p.mu.Lock()
	p.inflight++
	if i := slices.Index(p.recent, path); i >= 0 {
		p.recent = slices.Delete(p.recent, i, i+1)
	}
	p.recent = append(p.recent, path)
	if len(p.recent) > p.d.opts.PerHelper {
		p.recent = p.recent[1:]
	}
	p.mu.Unlock()
}

// finish counts a clip ended. Called with Decoders.mu held.
func (p *proc) finish() {
	p.mu.Lock()
	p.inflight--
	p.mu.Unlock()
}

func (p *proc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.dead
}

func (p *proc) poolStats() decode.PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// call sends request m and waits for its reply, the helper's death, or its deadline (when p is
// killed: a helper that stopped reading is caught as well as one that stopped answering; what
// names the request in the reason). The deadline counts the time p decodes, not the time it
// waits for a source this process answers (an object store that stalls): such a wait ends in
// the source's own error, a transient one, never in a helper killed as hung. When ctx ends
// first, the helper is told, and the reply still awaited, unless leave is set: a decode's memory
// is not free until then, nor are fds until the request is sent.
func (p *proc) call(ctx context.Context, m *message, fds []int, deadline time.Duration, what string, leave bool) (*reply, error) {
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	began := time.Now()
	stalledBefore, _ := p.stalledFor()
	id := p.d.nextID.Add(1)
	w := &pending{done: make(chan *reply, 1)}
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return nil, errGone
	}
	p.calls[id] = w
	p.mu.Unlock()
	sending := make(chan error, 1)
	m.ID = id
	go func() { sending <- p.send(m, fds) }()
	sent := false
	defer func() {
		if !sent {
			<-sending // the descriptors are the caller's to close once sent (or failed)
		}
	}()
	done := ctx.Done()
	for {
		var sendDone <-chan error
		if !sent {
			sendDone = sending
		}
		select {
		case err := <-sendDone:
			sent = true
			if err != nil {
				p.kill("")
			}
		case r := <-w.done:
			return r, nil
		case <-p.gone:
			select {
			case r := <-w.done: // it answered before it died
				return r, nil
			default:
			}
			return nil, &deathError{reason: p.reason()}
		case <-done:
			done = nil
			go p.c.send(&message{Kind: msgCancel, ID: id})
			if leave {
				p.mu.Lock()
				delete(p.calls, id)
				p.mu.Unlock()
				return nil, ctx.Err()
			}
		case <-timer.C:
			stalled, stalling := p.stalledFor()
			busy := time.Since(began) - (stalled - stalledBefore)
			switch {
			case stalling:
				timer.Reset(max(deadline-busy, time.Second)) // looked at again once the wait could be over
			case busy < deadline:
				timer.Reset(deadline - busy)
			default:
				p.kill(fmt.Sprintf("%s passed its deadline of %s", what, deadline.Round(time.Millisecond)))
			}
		}
	}
}

// readGrace is how long a wait for a source counts as decoding: reads answered from memory or
// fetched in the usual time are the decoder's work, so that a decoder that reads without end
// is still caught by its deadline; only a stall (the time a wait lasts past readGrace) is not.
const readGrace = 250 * time.Millisecond

// waitBegins counts a read of a source that p waits for (waiter).
func (p *proc) waitBegins() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting == 0 {
		p.waitStart = time.Now()
	}
	p.waiting++
}

// waitEnds counts a read of a source answered (waiter).
func (p *proc) waitEnds() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting--; p.waiting == 0 {
		p.stalled += max(time.Since(p.waitStart)-readGrace, 0)
	}
}

// stalledFor is how long p has waited for its sources past readGrace, in all, up to now, and
// whether it is stalled now.
func (p *proc) stalledFor() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting > 0 {
		if over := time.Since(p.waitStart) - readGrace; over > 0 {
			return p.stalled + over, true
		}
	}
	return p.stalled, false
}

// kill kills p; why, when not empty, says it hung.
func (p *proc) kill(why string) {
	p.mu.Lock()
	if why != "" && p.hungWhy == "" && !p.dead {
		p.hungWhy = why
	}
	p.mu.Unlock()
	p.cmd.Process.Kill()
}

// answer hands the one who asked the sandbox's tries the results m carries (nil ones: none).
func (p *proc) answer(m *message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case m.Kind == msgTry && p.tryAsk != nil:
		p.tryAsk <- m.Tries
		p.tryAsk = nil
	}
}

// wait reaps p, then closes its socket: the end of read, whatever else holds the other end.
func (p *proc) wait() {
	p.cmd.Wait()
	select {
	case <-p.said: // what it printed last, for the reason it died
	case <-time.After(2 * time.Second):
	}
	close(p.waited)
	p.c.uc.Close()
}

// read delivers p's replies until its socket ends, then kills and reaps it, fails its calls and
// tells the Decoders.
func (p *proc) read() {
	for {
		m, err := p.c.receive()
		if err != nil {
			break
		}
		switch m.Kind {
		case msgReply:
			p.mu.Lock()
			w := p.calls[m.ID]
			delete(p.calls, m.ID)
			if m.Reply != nil {
				p.stats = m.Reply.Stats
			}
			p.mu.Unlock()
			if w != nil && m.Reply != nil {
				w.done <- m.Reply
			}
		case msgTry:
			p.answer(m)
		}
	}
	p.cmd.Process.Kill() // a helper whose socket broke, or that sent nonsense, is of no use
	<-p.waited
	p.c.close()
	p.mu.Lock()
	p.dead = true
	busy := len(p.calls) > 0
	hung := p.hungWhy != ""
	p.mu.Unlock()
	p.answer(&message{Kind: msgTry}) // nobody waits for a dead helper's answers
	p.letWindowsGo()
	close(p.gone)
	p.d.died(p, p.reason(), hung, busy)
}

// reason says how p died: the deadline it passed, or the signal that killed it (the one the Go
// runtime reported: it dies of SIGABRT after printing a fatal signal's traceback), or its exit
// status, and what it said of it.
func (p *proc) reason() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hungWhy != "" {
		return p.hungWhy + "; killed"
	}
	s := "it ended"
	if st := p.cmd.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			s = "killed by " + signalName(ws.Signal())
		} else {
			s = "exit status " + strconv.Itoa(st.ExitCode())
		}
	}
	switch {
	case p.signal != "":
		s = "killed by " + p.signal
	case p.fatal != "":
		s += ": " + p.fatal
	case len(p.lines) > 0:
		s += ": " + p.lines[len(p.lines)-1]
	}
	return s
}

// fatalSignal finds the signal in the Go runtime's report of one: "SIGSEGV: segmentation
// violation" (in C code) or "[signal SIGSEGV: segmentation violation code=...]" (in Go's).
var fatalSignal = regexp.MustCompile(`^\[?(?:signal )?(SIG[A-Z]+): ([a-z]+(?: [a-z]+)*?)(?: code=|\]|$)`)

// signalName is a signal's name as kill -l gives it (SIGSEGV), or its number.
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(int(sig))
}

// stop ends p: its socket closes, it exits, it is reaped.
func (p *proc) stop() {
	p.c.uc.CloseWrite()
	select {
	case <-p.waited:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
	}
	<-p.gone
}

// logLines logs what p prints, and keeps its last lines for the reason it died. It reads to the
// end: a helper must never block on, or die of, a full pipe.
func (p *proc) logLines(r io.ReadCloser) {
	defer close(p.said)
	defer r.Close()
	br := bufio.NewReaderSize(r, 4096)
	for {
		raw, err := br.ReadSlice('\n')
		line := strings.TrimSpace(string(raw)) // a line longer than the buffer comes in pieces
		if line != "" {
			p.mu.Lock()
			if m := fatalSignal.FindStringSubmatch(line); m != nil && p.signal == "" {
				p.signal = m[1] + " (" + m[2] + ")"
			}
			if p.fatal == "" && (strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "panic:")) {
				p.fatal = line
			}
			p.lines = append(p.lines, line)
			if len(p.lines) > 8 {
				p.lines = p.lines[1:]
			}
			p.mu.Unlock()
			p.d.opts.Log.Debug("decoder helper", "pid", p.pid, "said", line)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func (p *proc) lastLine() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.lines); n > 0 {
		return p.lines[n-1]
	}
	return ""
}

// lend lends a window of at least size bytes for one request: its index, and whether it is
// new to p (its descriptor goes with the request, and p maps it in place of the last one of
// that index). ok is false when none is free, or size is over maxWindow: the request then takes
// memory of its own.
func (p *proc) lend(size int64) (i int, w *window, fresh, ok bool) {
	if size > maxWindow || size <= 0 {
		return 0, nil, false, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return 0, nil, false, false
	}
	if p.windows == nil {
		n := p.d.opts.PerHelper
		p.windows, p.lent = make([]*window, n), make([]bool, n)
	}
	i = slices.Index(p.lent, false)
	if i < 0 {
		return 0, nil, false, false
	}
	if w = p.windows[i]; w == nil || int64(len(w.mem)) < size {
		nw, err := newWindow(size)
		if err != nil {
			return 0, nil, false, false
		}
		if w != nil {
			w.close() // p unmaps its own mapping of it when the new one comes
		}
		p.windows[i], w, fresh = nw, nw, true
	}
	p.lent[i] = true
	return i, w, fresh, true
}

// giveBack ends the loan of window i: its request has ended, and p will write it no more for it
// (it answered, or died). A dead helper's windows are let go.
func (p *proc) giveBack(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lent[i] = false
	if w := p.windows[i]; w != nil && p.dead {
		w.close()
		p.windows[i] = nil
	}
}

// letWindowsGo lets go of the windows no request holds, once p died.
func (p *proc) letWindowsGo() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, w := range p.windows {
		if w != nil && !p.lent[i] {
			w.close()
			p.windows[i] = nil
		}
	}
}

// resident is p's private resident memory in bytes (RssAnon: its windows' pages are shared
// memory, counted apart), from /proc (0 when it cannot be read).
func (p *proc) resident() int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssAnon:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// addStats adds b's counters to a's.
func addStats(a *decode.PoolStats, b decode.PoolStats) {
	a.ClipsCPU += b.ClipsCPU
	a.ClipsGPU += b.ClipsGPU
	a.Frames += b.Frames
	a.Opens += b.Opens
	a.Adoptions += b.Adoptions
	a.Seeks += b.Seeks
	a.GPUFallbacks += b.GPUFallbacks
	a.KeyframeFallbacks += b.KeyframeFallbacks
	a.FlushesSaved += b.FlushesSaved
	a.GPUReclaims += b.GPUReclaims
}

// TrySandbox asks every serving helper to try what its sandbox forbids (test builds only: a
// release build's helpers try nothing and answer nil), and returns each helper's results.
func (d *Decoders) TrySandbox() [][]TryResult {
	d.mu.Lock()
	procs := append([]*proc(nil), d.procs...)
	d.mu.Unlock()
	var out [][]TryResult
	for _, p := range procs {
		if p == nil {
			continue
		}
		ask := make(chan []tryResult, 1)
		p.mu.Lock()
		if p.dead || p.tryAsk != nil {
			p.mu.Unlock()
			continue
		}
		p.tryAsk = ask
		p.mu.Unlock()
		go p.c.send(&message{Kind: msgTry})
		var answer []tryResult
		select {
		case answer = <-ask:
		case <-time.After(10 * time.Second):
		}
		var got []TryResult
		for _, r := range answer {
			got = append(got, TryResult(r))
		}
		out = append(out, got)
	}
	return out
}

// TryResult is one forbidden thing a helper tried (TrySandbox), and the error it got ("" when it
// succeeded: a hole in the sandbox).
type TryResult struct {
	What string
	Err  string
}

// Pids lists the helpers serving now, for tests and `vidfs top`.
func (d *Decoders) Pids() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	var pids []int
	for _, p := range d.procs {
		if p != nil && p.alive() {
			pids = append(pids, p.pid)
		}
	}
	return pids
}
