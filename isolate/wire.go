package isolate

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/vidfs/vidfs/decode"
)

// The conversation between the mount and a helper: messages over a Unix stream socket, each
// way, in frames of a fixed header (the body's length, the message's kind, the descriptors it
// carries, its request's ID) and a body of fixed-width fields (codec.go), whose length is bounded
// before it is read. A message that hands over descriptors carries them (SCM_RIGHTS) on its first
// write, so they arrive with its first bytes, before it is parsed. The mount parses what helpers
// send with the same bounded reader that fuzzing (FuzzParse) tries: never encoding/gob, which
// is not hardened against hostile input.

// kind is what a message is.
type kind uint8

const (
	msgHello      kind = iota + 1 // helper → mount, once: what the sandbox holds
	msgArena                      // mount → helper: the cache's shared memory (1 descriptor)
	msgDecode                     // mount → helper: decode a clip (descriptors: the source, then the scratch memory if any)
	msgCancel                     // mount → helper: the caller of a decode gave up
	msgReply                      // helper → mount: a decode's end
	_                             // (was the keyframes found unusable, of any video: now in a decode's reply)
	msgTry                        // mount → helper (test builds): try what the sandbox forbids; helper → mount: what it got
	msgProbeVideo                 // mount → helper: probe a video (descriptor: the source); answered by a msgReply
)

// message is every message; Kind says which fields it uses.
type message struct {
	Kind kind
	ID   uint64
	FDs  int // descriptors it carries

	Hello  *hello
	Decode *decodeRequest
	Reply  *reply
	Tries  []tryResult
	// ProbeVideo asks for a video's probe table.
	ProbeVideo *probeRequest
}

// probeRequest is a decode.ProbeFrom call: the video's path (its name only: the helper reads the
// descriptor handed over), and whether that is a socket answering reads, of Size bytes.
type probeRequest struct {
	Path   string
	Stream bool
	Size   int64
}

// hello is what a helper says once it is confined and ready.
type hello struct {
	Pid         int
	UID         int
	LandlockABI int  // 0: the kernel has no Landlock
	Seccomp     bool // the seccomp filter is loaded
	Err         string
}

// decodeRequest is a decode.Pool.DecodeClip call, with where its bytes come from and go to.
type decodeRequest struct {
	// Video is the video's path. Info is its probe table when the helper has not kept it from an
	// earlier request (proc.tables), else nil; Forget names tables it may let go of first.
	Video  string
	Info   *decode.Info
	Forget []string
	Clip   clipSpec
	Out    decode.Output
	// Window is the window (memory.go) the frames go into, at its start, Len bytes: one the
	// helper has mapped, or, when a descriptor comes with the request, new memory to map in its
	// place. -1: the descriptor is memory for this request alone.
	Window int
	Len    int64
	// Keep, when set, asks for the frames a decode passes through (decode.Keeper), written one
	// after another into the same memory at KeepOff.
	Keep    *decode.KeepSpec
	KeepOff int64
	// Stream: the source descriptor is a socket answering reads (streamSource), of Size bytes;
	// otherwise it is the video file itself.
	Stream bool
	Size   int64
}

// clipSpec is decode.Clip less what cannot cross a process: its Keeper and Path pointer.
type clipSpec struct {
	Start, Frames, Stride      int
	PadEnd, Strict, Background bool
	FPS                        decode.Rational
}

// reply is a decode's end.
type reply struct {
	Err   *wireError
	Path  decode.Path
	Kept  []int // the frames kept, in the order written
	Stats decode.PoolStats
	CPU   time.Duration // the decode's CPU time, on its thread
	Info  *decode.Info  // a probe's table
	// Marks are the frames of the keyframes of the decode's video found unusable so far
	// (decode.Pool.UnusableKeyframes): taken for that video only.
	Marks []int
	// Idle says the decode ran at SCHED_IDLE (a Background clip whose thread took the policy).
	Idle bool
}

// tryResult is one forbidden thing a helper tried, and what it got.
type tryResult struct {
	What string
	Err  string // "" when it succeeded
}

// wireError is an error of the decoder, as it crosses: a *decode.Error by its kind's name, an
// errno by number, a context's end by which.
type wireError struct {
	Kind, Path, Detail, Err string
	Frame                   *int
	Errno                   int
	Context                 int // 1: canceled, 2: deadline exceeded
}

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Err: err.Error()}
	var de *decode.Error
	if errors.As(err, &de) {
		w.Kind, w.Path, w.Detail, w.Frame = de.Kind.Error(), de.Path, de.Detail, de.Frame
		w.Err = ""
		if de.Err != nil {
			w.Err = de.Err.Error()
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		w.Errno = int(errno)
	}
	switch {
	case errors.Is(err, context.Canceled):
		w.Context = 1
	case errors.Is(err, context.DeadlineExceeded):
		w.Context = 2
	}
	return w
}

// fromWire is the error toWire sent, as near to the original as the wire allows: the same kind,
// path, frame and detail, and the errno or context error it wrapped.
func (w *wireError) error() error {
	if w == nil {
		return nil
	}
	var inner error
	switch {
	case w.Context == 1:
		inner = context.Canceled
	case w.Context == 2:
		inner = context.DeadlineExceeded
	case w.Errno != 0:
		inner = syscall.Errno(w.Errno)
	case w.Err != "":
		inner = errors.New(w.Err)
	}
	if w.Kind == "" {
		if inner == nil {
			inner = errors.New("unknown error")
		}
		return inner
	}
	k := decode.KindNamed(w.Kind)
	if k == nil {
		k = decode.ErrInternal
	}
	if w.Errno != 0 && w.Err != "" && w.Err != syscall.Errno(w.Errno).Error() {
		inner = fmt.Errorf("%s: %w", w.Err, syscall.Errno(w.Errno))
	}
	return &decode.Error{Path: w.Path, Frame: w.Frame, Kind: k, Detail: w.Detail, Err: inner}
}

// body writes m's fields for its kind.
func (m *message) body() []byte {
	var e enc
	switch m.Kind {
	case msgHello:
		h := m.Hello
		e.int(h.Pid)
		e.int(h.UID)
		e.int(h.LandlockABI)
		e.bool(h.Seccomp)
		e.str(h.Err)
	case msgDecode:
		r := m.Decode
		e.str(r.Video)
		e.info(r.Info)
		e.u32(uint32(len(r.Forget)))
		for _, f := range r.Forget {
			e.str(f)
		}
		c := r.Clip
		e.int(c.Start)
		e.int(c.Frames)
		e.int(c.Stride)
		e.bool(c.PadEnd)
		e.bool(c.Strict)
		e.bool(c.Background)
		e.rational(c.FPS)
		e.output(r.Out)
		e.int(r.Window)
		e.i64(r.Len)
		e.bool(r.Keep != nil)
		if r.Keep != nil {
			e.u32(uint32(len(r.Keep.Need)))
			for _, w := range r.Keep.Need {
				e.u64(w)
			}
			e.int(r.Keep.Max)
			e.int(r.Keep.FrameBytes)
		}
		e.i64(r.KeepOff)
		e.bool(r.Stream)
		e.i64(r.Size)
	case msgReply:
		r := m.Reply
		e.bool(r.Err != nil)
		if w := r.Err; w != nil {
			e.str(w.Kind)
			e.str(w.Path)
			e.str(w.Detail)
			e.str(w.Err)
			e.bool(w.Frame != nil)
			if w.Frame != nil {
				e.int(*w.Frame)
			}
			e.int(w.Errno)
			e.int(w.Context)
		}
		e.int(int(r.Path))
		e.ints(r.Kept)
		e.poolStats(r.Stats)
		e.i64(int64(r.CPU))
		e.info(r.Info)
		e.ints(r.Marks)
		e.bool(r.Idle)
	case msgTry:
		e.u32(uint32(len(m.Tries)))
		for _, r := range m.Tries {
			e.str(r.What)
			e.str(r.Err)
		}
	case msgProbeVideo:
		e.str(m.ProbeVideo.Path)
		e.bool(m.ProbeVideo.Stream)
		e.i64(m.ProbeVideo.Size)
	}
	return e.b
}

// parse reads the body of a message of kind k: the inverse of body, for any bytes whatever (a
// helper's may be hostile). A body with bytes left over, or too few, is refused.
func parse(k kind, id uint64, fds int, b []byte) (*message, error) {
	m := &message{Kind: k, ID: id, FDs: fds}
	d := dec{b: b}
	switch k {
	case msgHello:
		m.Hello = &hello{Pid: d.int(), UID: d.int(), LandlockABI: d.int(), Seccomp: d.boolean(), Err: d.str()}
	case msgCancel:
	case msgDecode:
		r := &decodeRequest{Video: d.str(), Info: d.info()}
		if n := d.count(4); n > 0 {
			r.Forget = make([]string, n)
			for i := range r.Forget {
				r.Forget[i] = d.str()
			}
		}
		r.Clip = clipSpec{Start: d.int(), Frames: d.int(), Stride: d.int(), PadEnd: d.boolean(), Strict: d.boolean(), Background: d.boolean(), FPS: d.rational()}
		r.Out, r.Window, r.Len = d.output(), d.int(), d.i64()
		if d.boolean() {
			k := &decode.KeepSpec{}
			if n := d.count(8); n > 0 {
				k.Need = make([]uint64, n)
				for i := range k.Need {
					k.Need[i] = d.u64()
				}
			}
			k.Max, k.FrameBytes = d.int(), d.int()
			r.Keep = k
		}
		r.KeepOff, r.Stream, r.Size = d.i64(), d.boolean(), d.i64()
		m.Decode = r
	case msgReply:
		r := &reply{}
		if d.boolean() {
			w := &wireError{Kind: d.str(), Path: d.str(), Detail: d.str(), Err: d.str()}
			if d.boolean() {
				f := d.int()
				w.Frame = &f
			}
			w.Errno, w.Context = d.int(), d.int()
			r.Err = w
		}
		r.Path = decode.Path(d.int())
		r.Kept = d.ints()
		r.Stats = d.poolStats()
		r.CPU = time.Duration(d.i64())
		r.Info = d.info()
		r.Marks = d.ints()
		r.Idle = d.boolean()
		m.Reply = r
	case msgTry:
		if n := d.count(8); n > 0 {
			m.Tries = make([]tryResult, n)
			for i := range m.Tries {
				m.Tries[i] = tryResult{What: d.str(), Err: d.str()}
			}
		}
	case msgProbeVideo:
		m.ProbeVideo = &probeRequest{Path: d.str(), Stream: d.boolean(), Size: d.i64()}
	default:
		return nil, fmt.Errorf("a message of unknown kind %d", k)
	}
	if err := d.end(); err != nil {
		return nil, fmt.Errorf("a message of kind %d: %w", k, err)
	}
	return m, nil
}

// headerBytes is a frame's header: the body's length (4 bytes), the message's kind (1), the
// descriptors it carries (1), its ID (8).
const headerBytes = 14

// conn is one end of the socket: frames both ways, descriptors with a message going out, and
// those that came in kept in arrival order for the messages that take them.
type conn struct {
	uc *net.UnixConn

	// wmu guards writing: it keeps a message's writes together.
	wmu sync.Mutex

	// The fields below are the reading goroutine's alone (one reads).
	r *bufio.Reader // over readMsg
	// fds are descriptors received and not yet taken, oldest first; the mount's side takes none
	// (takesFDs false) and closes them as they come.
	fds      []int
	takesFDs bool
	limit    int // the longest body taken
}

// maxMessage bounds a helper's message to the mount (replies are a few KB; a probe table a few
// MB at most: 8 bytes and more a frame).
const maxMessage = 64 << 20

// maxRequest bounds a message from the mount, which carries a probe table.
const maxRequest = 256 << 20

func newConn(uc *net.UnixConn, takesFDs bool) *conn {
	c := &conn{uc: uc, takesFDs: takesFDs, limit: maxMessage}
	if takesFDs {
		c.limit = maxRequest
	}
	c.r = bufio.NewReaderSize(readerFunc(c.readMsg), 64<<10)
	return c
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

// readMsg reads what the socket has, keeping (or, on the mount's side, closing) the descriptors
// that come with it.
func (c *conn) readMsg(b []byte) (int, error) {
	oob := make([]byte, syscall.CmsgSpace(4*64)) // room for the descriptors of many messages
	n, oobn, flags, _, err := c.uc.ReadMsgUnix(b, oob)
	n, oobn = max(n, 0), max(oobn, 0) // -1 with an error
	if oobn > 0 {
		msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
		if perr == nil {
			for _, m := range msgs {
				if fds, err := syscall.ParseUnixRights(&m); err == nil {
					if c.takesFDs {
						c.fds = append(c.fds, fds...)
					} else {
						for _, fd := range fds {
							syscall.Close(fd)
						}
					}
				}
			}
		}
	}
	if err == nil && flags&syscall.MSG_CTRUNC != 0 && c.takesFDs {
		err = errors.New("descriptors lost: too many in one read")
	}
	return n, err
}

// send writes m, handing over fds with it (they stay the caller's to close).
func (c *conn) send(m *message, fds ...int) error {
	body := m.body()
	if len(body) > maxRequest || len(fds) > 255 {
		return fmt.Errorf("a message of %d bytes and %d descriptors: too large", len(body), len(fds))
	}
	b := make([]byte, headerBytes, headerBytes+len(body))
	binary.LittleEndian.PutUint32(b, uint32(len(body)))
	b[4], b[5] = byte(m.Kind), byte(len(fds))
	binary.LittleEndian.PutUint64(b[6:], m.ID)
	b = append(b, body...)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(fds) == 0 {
		_, err := c.uc.Write(b)
		return err
	}
	n, _, err := c.uc.WriteMsgUnix(b, syscall.UnixRights(fds...), nil)
	if err == nil && n < len(b) {
		_, err = c.uc.Write(b[n:])
	}
	return err
}

// receive reads the next message. The descriptors it carries are taken with takeFDs.
func (c *conn) receive() (*message, error) {
	var h [headerBytes]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(h[:])
	if int64(n) > int64(c.limit) {
		return nil, fmt.Errorf("a message of %d bytes, over %d", n, c.limit)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return parse(kind(h[4]), binary.LittleEndian.Uint64(h[6:]), int(h[5]), body)
}

// takeFDs takes the n oldest descriptors received: those the message just read carried.
func (c *conn) takeFDs(n int) ([]int, error) {
	if len(c.fds) < n {
		return nil, fmt.Errorf("a message wanted %d descriptors, %d came", n, len(c.fds))
	}
	fds := c.fds[:n:n]
	c.fds = c.fds[n:]
	return fds, nil
}

func (c *conn) close() error {
	for _, fd := range c.fds {
		syscall.Close(fd)
	}
	c.fds = nil
	return c.uc.Close()
}
