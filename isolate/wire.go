package isolate

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/vidfs/vidfs/decode"
)

// The conversation between the mount and a helper: gob messages over a Unix stream socket, each
// way. A message that hands over descriptors carries them (SCM_RIGHTS) on its first write, so
// they arrive with its first bytes, before it is decoded.

// kind is what a message is.
type kind uint8

const (
	msgHello  kind = iota + 1 // helper → mount, once: what the sandbox holds
	msgArena                  // mount → helper: the cache's shared memory (1 descriptor)
	msgDecode                 // mount → helper: decode a clip (descriptors: the source, then the scratch memory if any)
	msgCancel                 // mount → helper: the caller of a decode gave up
	msgReply                  // helper → mount: a decode's end
	msgMarks                  // mount → helper: ask for the keyframes found unusable; helper → mount: them
	msgProbe                  // mount → helper (test builds): try what the sandbox forbids
)

// message is every message; Kind says which fields it uses.
type message struct {
	Kind kind
	ID   uint64
	FDs  int // descriptors it carries

	Hello  *hello
	Decode *decodeRequest
	Reply  *reply
	Marks  map[string][]int
	Arena  int64 // msgArena: its size
	Probe  []probeResult
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
	Info *decode.Info
	Clip clipSpec
	Out  decode.Output
	// Dst is where the frames go: in the arena (InArena) or in the scratch memory sent with
	// the request, at Off, Len bytes.
	InArena  bool
	Off, Len int64
	// Keep, when set, asks for the frames a decode passes through (decode.Keeper), written one
	// after another into the scratch memory at KeepOff.
	Keep    *keepSpec
	KeepOff int64
	// Stream: the source descriptor is a socket answering reads (streamSource), of Size bytes;
	// otherwise it is the video file itself.
	Stream bool
	Size   int64
}

// clipSpec is decode.Clip less what cannot cross a process: its Keeper and Path pointer.
type clipSpec struct {
	Start, Frames, Stride int
	PadEnd, Strict        bool
	FPS                   decode.Rational
}

// keepSpec is what a decode.Keeper wants: frames whose bit is set in Need, at most Max of them,
// of FrameBytes each (the rule fs's passKeeper follows).
type keepSpec struct {
	Need       []uint64
	Max        int
	FrameBytes int
}

// reply is a decode's end.
type reply struct {
	Err   *wireError
	Path  decode.Path
	Kept  []int // the frames kept, in the order written
	Stats decode.PoolStats
	CPU   time.Duration // the decode's CPU time, on its thread
}

// probeResult is one forbidden thing a helper tried, and what it got.
type probeResult struct {
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

// conn is one end of the socket: gob both ways, descriptors with a message going out, and those
// that came in kept in arrival order for the messages that take them.
type conn struct {
	uc *net.UnixConn

	// wmu guards the encoder and pending, and keeps a message's writes together.
	wmu     sync.Mutex
	enc     *gob.Encoder
	pending []int // descriptors to send with the next write

	dec *gob.Decoder // read by one goroutine only
	// fds are descriptors received and not yet taken, oldest first; the mount's side takes none
	// (takesFDs false) and closes them as they come. Only the reading goroutine touches them.
	fds      []int
	takesFDs bool
	// read counts the bytes read since the last message: the mount's side refuses a message
	// over maxMessage, which only a helper gone wrong would send.
	read, limit int
}

// maxMessage bounds a helper's message to the mount (replies are a few KB; the keyframes found
// unusable a few MB at most).
const maxMessage = 64 << 20

func newConn(uc *net.UnixConn, takesFDs bool) *conn {
	c := &conn{uc: uc, takesFDs: takesFDs}
	if !takesFDs {
		c.limit = maxMessage
	}
	c.enc = gob.NewEncoder(writerFunc(c.write))
	c.dec = gob.NewDecoder(readerFunc(c.readMsg))
	return c
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

// write writes b, with the pending descriptors on its first bytes. Called with wmu held.
func (c *conn) write(b []byte) (int, error) {
	if len(c.pending) == 0 {
		return c.uc.Write(b)
	}
	n, _, err := c.uc.WriteMsgUnix(b, syscall.UnixRights(c.pending...), nil)
	if err == nil || n > 0 {
		c.pending = nil
	}
	if err == nil && n < len(b) {
		m, err := c.uc.Write(b[n:])
		return n + m, err
	}
	return n, err
}

func (c *conn) readMsg(b []byte) (int, error) {
	if c.limit > 0 && c.read > c.limit {
		return 0, fmt.Errorf("a message over %d bytes", c.limit)
	}
	oob := make([]byte, syscall.CmsgSpace(4*64)) // room for the descriptors of many messages
	n, oobn, flags, _, err := c.uc.ReadMsgUnix(b, oob)
	n, oobn = max(n, 0), max(oobn, 0) // -1 with an error
	c.read += n
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
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.pending, m.FDs = fds, len(fds)
	err := c.enc.Encode(m)
	c.pending = nil
	return err
}

// receive reads the next message and takes the n descriptors it carries.
func (c *conn) receive() (*message, error) {
	m := new(message)
	c.read = 0
	if err := c.dec.Decode(m); err != nil {
		return nil, err
	}
	return m, nil
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
