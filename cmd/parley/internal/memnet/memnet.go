// Package memnet is an in-memory network for end-to-end tests that run on
// a testing/synctest bubble's fake clock. A goroutine blocked on real TCP
// is not durably blocked, so the bubble's clock would not move while it
// waits; a goroutine blocked on a net.Pipe is (its reads, writes and
// deadlines are channels and timers), so a whole stack — a platform's
// fake, parley's HTTP server and the MCP agent — can serve and call each
// other through one Network and wait out pacing, backoff and timeouts in
// no real time.
//
// A Network joins hosts, one per process the test plays (the fake, each
// run of the daemon, the agent). A host's listeners have made-up loopback
// addresses (127.0.0.1 with a port of the network's own counting, never a
// real socket: the daemon's Host check admits loopback names), and any
// host dials them by that address, so URLs built from a listener's Addr
// work unchanged with a client of the host's Transport. Kill ends a host
// as the death of its process does: its listeners and every connection it
// made or accepted are closed at once. Close ends them all, so that
// nothing is left blocked when the bubble ends.
package memnet

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"syscall"
)

// Network is a set of hosts and their listeners. Create it inside the
// bubble whose goroutines use it.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*Listener
	conns     []*pair
	next      int
	closed    bool
}

// pair is a connection: both ends and the hosts that hold them.
type pair struct {
	client, server net.Conn
	dialer, owner  *Host
}

func (p *pair) close() {
	p.client.Close()
	p.server.Close()
}

// New returns an empty network.
func New() *Network {
	return &Network{listeners: map[string]*Listener{}, next: 10000}
}

// Host is a new host of the network.
func (n *Network) Host() *Host { return &Host{net: n} }

// Close closes every listener and every connection of the network:
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
		c.close()
	}
}

// Host is one process's end of the network: what it listens on and
// dials.
type Host struct {
	net  *Network
	dead bool // under net.mu
}

// Listen returns a listener of h at a new address of the network.
func (h *Host) Listen() *Listener {
	h.net.mu.Lock()
	h.net.next++
	address := fmt.Sprintf("127.0.0.1:%d", h.net.next)
	h.net.mu.Unlock()
	l, _ := h.ListenOn(address)
	return l
}

// ListenOn returns a listener of h at address (a process listening again
// where it did before a restart); it fails if another listens there.
func (h *Host) ListenOn(address string) (*Listener, error) {
	n := h.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, taken := n.listeners[address]; taken {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Err: fmt.Errorf("memnet: %s: %w", address, syscall.EADDRINUSE)}
	}
	l := &Listener{host: h, addr: addr(address), conns: make(chan net.Conn), done: make(chan struct{})}
	if h.dead || n.closed {
		// Closed from the start: nobody can reach it.
		l.once.Do(func() { close(l.done) })
		return l, nil
	}
	n.listeners[address] = l
	return l, nil
}

// DialContext connects h to the listener at address; it has the signature
// of http.Transport.DialContext. An address nobody listens at is refused
// at once, as a closed port is.
func (h *Host) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	n := h.net
	refused := &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("memnet: %s: %w", address, syscall.ECONNREFUSED)}
	n.mu.Lock()
	l, ok := n.listeners[address]
	up := !n.closed && !h.dead
	n.mu.Unlock()
	if !ok || !up {
		return nil, refused
	}
	server, client := net.Pipe()
	select {
	case l.conns <- server:
	case <-l.done:
		return nil, refused
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p := &pair{client: client, server: server, dialer: h, owner: l.host}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || h.dead || l.host.dead {
		p.close()
		return nil, refused
	}
	n.conns = append(n.conns, p)
	return client, nil
}

// Transport is a new HTTP transport that dials from h.
func (h *Host) Transport() *http.Transport {
	return &http.Transport{DialContext: h.DialContext}
}

// Client is an HTTP client dialing from h (no timeout of its own: its
// callers' contexts bound the requests).
func (h *Host) Client() *http.Client { return &http.Client{Transport: h.Transport()} }

// Kill ends h as the death of its process does: its listeners close and
// every connection it dialed or accepted is closed at both ends, so that
// nothing it still does reaches anyone; it can listen and dial no more.
func (h *Host) Kill() {
	n := h.net
	n.mu.Lock()
	h.dead = true
	var ls []*Listener
	for _, l := range n.listeners {
		if l.host == h {
			ls = append(ls, l)
		}
	}
	var cut []*pair
	n.conns = slices.DeleteFunc(n.conns, func(p *pair) bool {
		if p.dialer == h || p.owner == h {
			cut = append(cut, p)
			return true
		}
		return false
	})
	n.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, p := range cut {
		p.close()
	}
}

// Listener is a net.Listener of a Host.
type Listener struct {
	host  *Host
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
		n := l.host.net
		n.mu.Lock()
		if n.listeners[string(l.addr)] == l {
			delete(n.listeners, string(l.addr))
		}
		n.mu.Unlock()
	})
	return nil
}

// Addr is the listener's address on the network, 127.0.0.1:port.
func (l *Listener) Addr() net.Addr { return l.addr }

// addr is an address of the network.
type addr string

func (addr) Network() string  { return "tcp" }
func (a addr) String() string { return string(a) }
