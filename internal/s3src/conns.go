package s3src

import (
	"context"
	"net"
	"sync"
)

// conns keeps every connection the bucket's transport dials, so that Close can close them all.
// The transport's own CloseIdleConnections is not enough: a dial that a cancelled GET started
// still completes, and the transport pools its connection after Close has closed the idle ones.
type conns struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu     sync.Mutex                // guards open and closed; a leaf: taken with no other lock
	open   map[*trackedConn]struct{} // the connections dialled and not yet closed
	closed bool                      // by closeAll: a dial that ends after it closes its connection
}

// dialContext dials as the transport's own dialer does and keeps the connection, or, after
// closeAll, closes it and fails with net.ErrClosed.
func (c *conns) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		conn.Close()
		return nil, net.ErrClosed
	}
	if c.open == nil {
		c.open = map[*trackedConn]struct{}{}
	}
	t := &trackedConn{Conn: conn, owner: c}
	c.open[t] = struct{}{}
	return t, nil
}

// closeAll closes every connection open, and every one dialled from now on.
func (c *conns) closeAll() {
	c.mu.Lock()
	c.closed = true
	open := c.open
	c.open = nil
	c.mu.Unlock()
	for t := range open {
		t.Conn.Close()
	}
}

// trackedConn is a connection that leaves its owner's set when closed.
type trackedConn struct {
	net.Conn
	owner *conns
}

func (t *trackedConn) Close() error {
	t.owner.mu.Lock()
	delete(t.owner.open, t)
	t.owner.mu.Unlock()
	return t.Conn.Close()
}
