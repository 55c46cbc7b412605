package s3src

import (
	"context"
	"errors"
	"net"
	"testing"
)

// TestConnsCloseAll: closeAll closes the connections open, and a dial that ends after it (one a
// cancelled GET started) gets its connection closed and an error, not a connection to pool.
func TestConnsCloseAll(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	inDial, release := make(chan struct{}), make(chan struct{})
	c := &conns{dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if ctx.Value(inDial) != nil {
			close(inDial)
			<-release // closeAll runs while this dial is under way
		}
		return conn, err
	}}
	open, err := c.dialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	late := make(chan error)
	go func() {
		_, err := c.dialContext(context.WithValue(context.Background(), inDial, true), "tcp", ln.Addr().String())
		late <- err
	}()
	<-inDial
	c.closeAll()
	close(release)
	if err := <-late; !errors.Is(err, net.ErrClosed) {
		t.Errorf("dial ending after closeAll: %v, want net.ErrClosed", err)
	}
	for range 2 {
		peer := <-accepted
		if n, err := peer.Read(make([]byte, 1)); err == nil {
			t.Errorf("peer read %d bytes, want the connection closed", n)
		}
		peer.Close()
	}
	if _, err := open.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write on a connection closeAll closed: %v, want net.ErrClosed", err)
	}
	if len(c.open) != 0 {
		t.Errorf("%d connections kept after closeAll", len(c.open))
	}
}
