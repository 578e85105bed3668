// Package pipenet serves HTTP over in-memory connections (net.Pipe), so
// that a server and its clients run inside a testing/synctest bubble: the
// connections' deadlines and every wait run on the bubble's fake clock, and
// synctest.Wait settles them. The MCP server's tests and the
// orchestrator's use it.
package pipenet

import (
	"context"
	"net"
	"sync"
)

// Listener is a net.Listener whose connections Dial makes.
type Listener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// NewListener returns an open Listener.
func NewListener() *Listener {
	return &Listener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for the next Dial, or fails with net.ErrClosed once the
// listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and Dial; it may be called more than once.
func (l *Listener) Close() error { l.once.Do(func() { close(l.done) }); return nil }

// Addr is a placeholder address ("pipe").
func (l *Listener) Addr() net.Addr { return addr{} }

// Dial connects to the listener; it has the signature of
// http.Transport.DialContext, whose network and address it ignores.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type addr struct{}

func (addr) Network() string { return "pipe" }
func (addr) String() string  { return "pipe" }
