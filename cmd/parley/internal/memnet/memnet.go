// Package memnet is an in-memory network for end-to-end tests that run on
// a testing/synctest bubble's fake clock. A goroutine blocked on real TCP
// is not durably blocked, so the bubble's clock would not move while it
// waits; a goroutine blocked on a net.Pipe is (its reads, writes and
// deadlines are channels and timers), so a whole stack — a platform's
// fake, parley's HTTP server and the MCP agent — can serve and call each
// other through one Network and wait out pacing, backoff and timeouts in
// no real time.
//
// A Network hands out listeners under made-up loopback addresses
// (127.0.0.1 with a port of its own counting, never a real socket: the
// daemon's Host check admits loopback names) and dials them by that
// address, so URLs built from a listener's Addr work unchanged with a
// client of Transport. Close ends every listener and every connection it
// made, so that nothing is left blocked when the bubble ends.
package memnet

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// Network is a set of in-memory listeners reachable by address. Create it
// inside the bubble whose goroutines use it.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*Listener
	conns     []net.Conn
	next      int
	closed    bool
}

// New returns an empty network.
func New() *Network {
	return &Network{listeners: map[string]*Listener{}, next: 10000}
}

// Listen returns a listener at a new address of the network.
func (n *Network) Listen() *Listener {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	l := &Listener{net: n, addr: addr(fmt.Sprintf("127.0.0.1:%d", n.next)), conns: make(chan net.Conn), done: make(chan struct{})}
	n.listeners[string(l.addr)] = l
	return l
}

// DialContext connects to the listener at address; it has the signature
// of http.Transport.DialContext. An address nobody listens at is refused
// at once, as a closed port is.
func (n *Network) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	n.mu.Lock()
	l, ok := n.listeners[address]
	closed := n.closed
	n.mu.Unlock()
	if !ok || closed {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("memnet: %s: %w", address, syscall.ECONNREFUSED)}
	}
	server, client := net.Pipe()
	select {
	case l.conns <- server:
	case <-l.done:
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("memnet: %s: %w", address, syscall.ECONNREFUSED)}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		server.Close()
		client.Close()
		return nil, net.ErrClosed
	}
	n.conns = append(n.conns, server, client)
	return client, nil
}

// Transport is a new HTTP transport that dials on the network.
func (n *Network) Transport() *http.Transport {
	return &http.Transport{DialContext: n.DialContext, ForceAttemptHTTP2: false}
}

// Client is an HTTP client of the network (no timeout of its own: its
// callers' contexts bound the requests).
func (n *Network) Client() *http.Client { return &http.Client{Transport: n.Transport()} }

// Close closes every listener and every connection the network made:
// whatever still reads or writes on one gets an error. It may be called
// more than once.
func (n *Network) Close() {
	n.mu.Lock()
	n.closed = true
	ls, cs := n.listeners, n.conns
	n.listeners, n.conns = map[string]*Listener{}, nil
	n.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, c := range cs {
		c.Close()
	}
}

// Listener is a net.Listener of a Network.
type Listener struct {
	net   *Network
	addr  addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// Accept waits for the next connection, or fails with net.ErrClosed once
// the listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and refuses new connections; those accepted stay
// open. It may be called more than once.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.net.mu.Lock()
		if l.net.listeners[string(l.addr)] == l {
			delete(l.net.listeners, string(l.addr))
		}
		l.net.mu.Unlock()
	})
	return nil
}

// Addr is the listener's address on the network, 127.0.0.1:port.
func (l *Listener) Addr() net.Addr { return l.addr }

// addr is an address of the network.
type addr string

func (addr) Network() string  { return "tcp" }
func (a addr) String() string { return string(a) }
