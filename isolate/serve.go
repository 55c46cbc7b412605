package isolate

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/threadcpu"
)

// helperFD is the descriptor a helper finds its socket to the mount on.
const helperFD = 3

// IsHelper tells whether this process was started as a decoder helper (os.Args[1] is
// HelperArg): its main must call Main at once, and nothing else.
func IsHelper() bool { return len(os.Args) > 1 && os.Args[1] == HelperArg }

// Main is a helper's main (`PROGRAM __decoder-helper CLIPS DATA IDLE`, as Decoders starts it):
// it limits its data to DATA bytes (limits.go), serves CLIPS at once keeping IDLE decoders open
// between them, and returns the exit status.
func Main() int {
	each, idle := 2, 0
	if len(os.Args) > 2 {
		if n, err := strconv.Atoi(os.Args[2]); err == nil && n > 0 {
			each = n
		}
	}
	if len(os.Args) > 4 {
		if n, err := strconv.Atoi(os.Args[4]); err == nil && n > 0 {
			idle = n
		}
	}
	if len(os.Args) > 3 {
		n, err := strconv.ParseInt(os.Args[3], 10, 64)
		if err == nil {
			err = setData(n)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "vidfs decoder helper:", err)
			return 1
		}
	}
	// Few of glibc's arenas, however many clips: memory freed in one is reused by the next
	// decoder, not held by an arena no thread comes back to (decode.TuneMalloc).
	decode.TuneMalloc(min(each, 2))
	if err := Serve(each, idle); err != nil {
		fmt.Fprintln(os.Stderr, "vidfs decoder helper:", err)
		return 1
	}
	return 0
}

// Serve is a helper's life, in the process `vidfs __decoder-helper` starts: confined already
// (sandbox.go), it loads the seccomp filter, says hello, and decodes what the mount asks until
// the mount goes. concurrency is how many clips it decodes at once, idle how many decoders it
// keeps open between them (0: concurrency).
func Serve(concurrency, idle int) error {
	isHelper, abi, cerr := confinement()
	if !isHelper {
		return errors.New("not started as a decoder helper")
	}
	// A crash dies of its signal, for the mount to name; no core file is written (sandbox.go).
	debug.SetTraceback("crash")
	debug.SetMaxThreads(maxThreads(concurrency)) // limits.go
	f := os.NewFile(helperFD, "mount")
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("the socket to the mount: %w", err)
	}
	uc, ok := fc.(*net.UnixConn)
	if !ok {
		return errors.New("the socket to the mount is not a Unix socket")
	}
	c := newConn(uc, true)
	h := &helper{c: c, calls: map[uint64]context.CancelFunc{}, sources: map[string][]*fdSource{}, windows: make([][]byte, concurrency),
		tables: map[string]*decode.Info{}}
	hi := &hello{Pid: os.Getpid(), UID: os.Getuid(), LandlockABI: abi}
	if cerr == nil {
		cerr = loadSeccomp()
	}
	if cerr != nil {
		hi.Err = cerr.Error()
		c.send(&message{Kind: msgHello, Hello: hi})
		return cerr
	}
	hi.Seccomp = true
	pool, err := decode.NewPool(decode.PoolOptions{Concurrency: concurrency, Idle: cmp.Or(idle, concurrency), Threads: 1, Open: h.open})
	if err != nil {
		hi.Err = err.Error()
		c.send(&message{Kind: msgHello, Hello: hi})
		return err
	}
	h.pool = pool
	if err := c.send(&message{Kind: msgHello, Hello: hi}); err != nil {
		return err
	}
	return h.serve()
}

// helper is the helper's side of the conversation.
type helper struct {
	c    *conn
	pool *decode.Pool
	// fixMmap fixes glibc's mmap threshold once, at the first decode.
	fixMmap sync.Once
	// tables are the probe tables the mount sent, by video, kept for the later requests of
	// each (the mount keeps count of them: proc.tables). serve's alone.
	tables map[string]*decode.Info

	// mu guards calls, sources and windows.
	mu      sync.Mutex
	calls   map[uint64]context.CancelFunc // decodes running, by request
	sources map[string][]*fdSource        // descriptors handed over with the decodes running, by path
	// windows are the shared memory the mount lent, by index (memory.go), each mapped between
	// guard pages; the mount lends one to one request at a time.
	windows [][]byte
}

// serve reads the mount's messages until it goes (the socket ends); decodes still running are
// of no use then, and end with the process.
func (h *helper) serve() error {
	for {
		m, err := h.c.receive()
		if err != nil {
			h.mu.Lock()
			for _, cancel := range h.calls {
				cancel()
			}
			h.mu.Unlock()
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		fds, err := h.c.takeFDs(m.FDs)
		if err != nil {
			return err
		}
		switch m.Kind {
		case msgDecode:
			if m.Decode != nil {
				h.tableOf(m.Decode)
			}
			if len(fds) < 1 || len(fds) > 2 || m.Decode == nil || m.Decode.Info == nil || m.Decode.Window >= len(h.windows) ||
				m.Decode.Window < -1 || (m.Decode.Window == -1 && len(fds) != 2) {
				return fmt.Errorf("a decode with %d descriptors into window %d", len(fds), m.Decode.Window)
			}
			if w := m.Decode.Window; w >= 0 && len(fds) == 2 {
				// A window new to this helper, in place of the last of its index: mapped here,
				// in the order requests come, before the decode that uses it starts.
				mem, err := mapFD(fds[1])
				syscall.Close(fds[1])
				if err != nil {
					return err
				}
				h.mu.Lock()
				unmapGuarded(h.windows[w])
				h.windows[w] = mem
				h.mu.Unlock()
				fds = fds[:1]
			}
			ctx, cancel := context.WithCancel(context.Background())
			h.mu.Lock()
			h.calls[m.ID] = cancel
			h.mu.Unlock()
			go func() {
				r := h.decode(ctx, m.Decode, fds)
				h.mu.Lock()
				delete(h.calls, m.ID)
				h.mu.Unlock()
				cancel()
				h.c.send(&message{Kind: msgReply, ID: m.ID, Reply: r})
			}()
		case msgCancel:
			h.mu.Lock()
			if cancel := h.calls[m.ID]; cancel != nil {
				cancel()
			}
			h.mu.Unlock()
		case msgTry:
			h.c.send(&message{Kind: msgTry, ID: m.ID, Tries: trySandbox()})
		case msgProbeVideo:
			if len(fds) != 1 || m.ProbeVideo == nil {
				return fmt.Errorf("a probe with %d descriptors", len(fds))
			}
			go func() {
				r := h.probe(m.ProbeVideo, fds[0])
				h.c.send(&message{Kind: msgReply, ID: m.ID, Reply: r})
			}()
		}
	}
}

// tableOf gives a decode request its video's probe table: the one it carries, kept for the
// requests of the video that follow, or the one kept (nil if none: the mount's mistake). Tables
// the mount says it will not send again are let go of first. Called from serve alone, in the
// order requests come.
func (h *helper) tableOf(req *decodeRequest) {
	for _, f := range req.Forget {
		delete(h.tables, f)
	}
	if req.Info != nil {
		req.Info.Path = req.Video
		h.tables[req.Video] = req.Info
		return
	}
	req.Info = h.tables[req.Video]
}

// decode runs one request: fds are its source, and its memory when that is the request's alone
// (else the window it names).
func (h *helper) decode(ctx context.Context, req *decodeRequest, fds []int) *reply {
	var mem []byte
	if len(fds) > 1 {
		var err error
		mem, err = mapFD(fds[1])
		syscall.Close(fds[1])
		if err != nil {
			syscall.Close(fds[0])
			return &reply{Err: toWire(&decode.Error{Path: req.Info.Path, Kind: decode.ErrInternal, Detail: "mapping shared memory", Err: err})}
		}
		defer unmapGuarded(mem)
	} else {
		h.mu.Lock()
		mem = h.windows[req.Window]
		h.mu.Unlock()
	}
	if req.Len < 0 || req.Len > int64(len(mem)) {
		syscall.Close(fds[0])
		return &reply{Err: toWire(&decode.Error{Path: req.Info.Path, Kind: decode.ErrBadRequest, Detail: "destination outside shared memory"})}
	}
	dst := mem[:req.Len:req.Len]
	src := newFDSource(fds[0], req.Stream, req.Size)
	h.mu.Lock()
	h.sources[req.Info.Path] = append(h.sources[req.Info.Path], src)
	h.mu.Unlock()
	defer h.unregister(req.Info.Path, src)

	c := decode.Clip{Start: req.Clip.Start, Frames: req.Clip.Frames, Stride: req.Clip.Stride, PadEnd: req.Clip.PadEnd,
		Strict: req.Clip.Strict, FPS: req.Clip.FPS}
	var k *decode.FrameKeeper
	if req.Keep != nil {
		// The frames kept go one after another into the memory lent at KeepOff, never past it.
		k = &decode.FrameKeeper{Spec: *req.Keep}
		if req.KeepOff >= req.Len && req.KeepOff <= int64(len(mem)) {
			k.Frames = mem[req.KeepOff:req.KeepOff:len(mem)]
		}
		c.Keep = k
	}
	// As the mount's own decoders (decode.FixMmapThreshold): half the resident memory of a helper
	// at 1080p, for about 3 % more CPU (docs/benchmarks.md). Fixed at the first decode, not at
	// the start: probes, which come first, run 4x slower with it fixed.
	h.fixMmap.Do(decode.FixMmapThreshold)
	poison(req.Info.Path) // test builds only: a marked video crashes the helper
	// The decode runs on this thread (one FFmpeg thread a decoder): its CPU is the thread's. A
	// background clip (a training copy's whole decode in the time the readers leave) runs on a
	// thread of its own at SCHED_IDLE, which ends with it (a thread cannot leave SCHED_IDLE
	// unprivileged).
	var res decode.Result
	var err error
	var cpu time.Duration
	idle := false
	decodeClip := func() {
		began := threadcpu.Now()
		res, err = h.pool.DecodeClip(ctx, req.Info, c, req.Out, dst)
		cpu = threadcpu.Now() - began
	}
	if req.Clip.Background {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // never unlocked: the thread, at SCHED_IDLE, ends with this goroutine
			idle = idleThread()
			decodeClip()
		}()
		<-done
	} else {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		decodeClip()
	}
	scribble(req.Info.Path, dst) // test builds only: a marked video writes past its frames
	r := &reply{Err: toWire(err), Path: res.Path, Stats: h.pool.Stats(), CPU: cpu, Idle: idle}
	if k != nil {
		r.Kept = k.Kept
	}
	// The keyframes found unusable of this video, so far: the mount takes them for it alone.
	r.Marks = forgeMarks(req.Info, h.pool.UnusableKeyframes()[req.Info.Path])
	return r
}

// probe makes the probe table of the video req names from descriptor fd.
func (h *helper) probe(req *probeRequest, fd int) *reply {
	src := newFDSource(fd, req.Stream, req.Size)
	h.mu.Lock()
	h.sources[req.Path] = append(h.sources[req.Path], src)
	h.mu.Unlock()
	defer h.unregister(req.Path, src)
	poisonProbe(req.Path) // test builds only: a marked video crashes the helper
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	began := threadcpu.Now()
	info, err := decode.ProbeFrom(req.Path, h.open)
	return &reply{Err: toWire(err), Info: info, CPU: threadcpu.Now() - began}
}

// idleThread puts the calling thread at SCHED_IDLE, and says whether it is (best effort: where
// the filter or the kernel refuses, it stays as it was).
func idleThread() bool {
	unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0)
	a, err := unix.SchedGetAttr(0, 0)
	return err == nil && a.Policy == unix.SCHED_IDLE
}

// open is the pool's decode.Opener: a descriptor of its own (a dup) of one a request running
// handed over for the path. A decoder may open its video more than once in a decode (a rewind),
// and keeps what it opened while it is idle, after the request.
func (h *helper) open(path string) (decode.Source, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.sources[path]
	if len(list) == 0 {
		return nil, errors.New("no descriptor was handed over for it")
	}
	s := list[len(list)-1]
	fd, err := syscall.Dup(int(s.f.Fd()))
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	return &fdSource{f: os.NewFile(uintptr(fd), "video"), stream: s.stream, size: s.size, mu: s.mu}, nil
}

// unregister closes the descriptor a request handed over, and forgets it; decoders that opened
// it hold their own.
func (h *helper) unregister(path string, src *fdSource) {
	h.mu.Lock()
	list := h.sources[path]
	if i := slices.Index(list, src); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(h.sources, path)
	} else {
		h.sources[path] = list
	}
	h.mu.Unlock()
	src.Close()
}

// mapFD maps the whole of the shared memory fd, between guard pages (mapGuarded).
func mapFD(fd int) ([]byte, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shared memory: %w", err)
	}
	return mapGuarded(fd, st.Size)
}

// fdSource is a video's bytes from a descriptor the mount handed over: the file itself, read
// where asked, or a socket the mount answers reads on (streamed sources: objects in a bucket).
type fdSource struct {
	f      *os.File
	stream bool
	size   int64
	// mu guards a socket's request and answer going together; the dups of one descriptor
	// share it.
	mu *sync.Mutex
}

func newFDSource(fd int, stream bool, size int64) *fdSource {
	s := &fdSource{f: os.NewFile(uintptr(fd), "video"), stream: stream, size: size, mu: new(sync.Mutex)}
	if !stream {
		if st, err := s.f.Stat(); err == nil {
			s.size = st.Size()
		}
	}
	return s
}

// Size is the video's size in bytes (decode.Source).
func (s *fdSource) Size() int64 { return s.size }

// ReadAt reads the video's bytes at off (decode.Source).
func (s *fdSource) ReadAt(p []byte, off int64) (int, error) {
	if !s.stream {
		return s.f.ReadAt(p, off)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return streamRead(s.f, p, off)
}

// Close lets the descriptor go (the decoder that opened it closed).
func (s *fdSource) Close() error { return s.f.Close() }

// streamRead asks the mount for len(p) bytes at off over a stream socket: a request of 12
// bytes (offset, length), an answer of 4 (the length read, or minus an errno) and the bytes.
func streamRead(rw io.ReadWriter, p []byte, off int64) (int, error) {
	n := min(len(p), maxStreamRead)
	var req [12]byte
	binary.LittleEndian.PutUint64(req[:], uint64(off))
	binary.LittleEndian.PutUint32(req[8:], uint32(n))
	if _, err := rw.Write(req[:]); err != nil {
		return 0, err
	}
	var ans [4]byte
	if _, err := io.ReadFull(rw, ans[:]); err != nil {
		return 0, err
	}
	got := int32(binary.LittleEndian.Uint32(ans[:]))
	if got < 0 {
		var size [2]byte
		if _, err := io.ReadFull(rw, size[:]); err != nil {
			return 0, err
		}
		why := make([]byte, binary.LittleEndian.Uint16(size[:]))
		if _, err := io.ReadFull(rw, why); err != nil {
			return 0, err
		}
		return 0, &streamError{errno: syscall.Errno(-got), text: string(why)}
	}
	if got > int32(n) {
		return 0, fmt.Errorf("the mount answered %d bytes for %d", got, n)
	}
	if _, err := io.ReadFull(rw, p[:got]); err != nil {
		return 0, err
	}
	if int(got) < len(p) {
		return int(got), io.EOF
	}
	return int(got), nil
}

// streamError is the error the mount's Source gave a read: its text, its errno, and, for ESTALE,
// decode.ErrChanged (the video changed since it was probed), as errors.Is asks.
type streamError struct {
	errno syscall.Errno
	text  string
}

func (e *streamError) Error() string { return e.text }

// Unwrap gives the errno, and decode.ErrChanged for ESTALE.
func (e *streamError) Unwrap() []error {
	if e.errno == syscall.ESTALE {
		return []error{e.errno, decode.ErrChanged}
	}
	return []error{e.errno}
}

// maxStreamRead bounds one read of a streamed source (FFmpeg asks for 64 KiB at a time).
const maxStreamRead = 1 << 20
