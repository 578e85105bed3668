package httpguard

import (
	"context"
	"net"
	"net/http"
	"time"
)

// StreamSendBuffer is the kernel send buffer (SO_SNDBUF) of a long-lived
// stream's connection (BoundStream). Linux tunes a connection's send
// buffer up to net.ipv4.tcp_wmem's maximum, 4 MiB by default: a client
// that reads nothing, even one with a small receive buffer, could be sent
// megabytes of events before a write blocked and its deadline noticed,
// and the kernel would hold them all for it. Set explicitly, the buffer
// stays at this size, doubled by the kernel for its bookkeeping (socket(7):
// https://man7.org/linux/man-pages/man7/socket.7.html, tcp(7):
// https://man7.org/linux/man-pages/man7/tcp.7.html). At 64 KiB a client
// 100 ms away still receives over half a megabyte a second, far more than
// a stream of chat events needs, even when replaying.
const StreamSendBuffer = 64 << 10

type connKey struct{}

// ConnContext is the server's http.Server.ConnContext: it keeps each
// connection in the context of its requests, where ConnOf and BoundStream
// find it.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// ConnOf is the connection r came on, or nil when the server does not keep
// it (no ConnContext).
func ConnOf(r *http.Request) net.Conn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c
}

// BoundStream readies r's connection for a long-lived response (an event
// stream) whose writes have deadlines. Its send buffer is fixed at
// StreamSendBuffer, so a client that does not read blocks a write, and is
// cut off by the write's deadline, once that much waits for it. And until
// end is called, closing the connection resets it (SO_LINGER 0: "the
// operating system discards any unsent or unacknowledged data",
// https://pkg.go.dev/net#TCPConn.SetLinger): net/http closes a connection
// as soon as a write to it fails, and the reset drops at once what the
// kernel still holds for a client that does not read, where a graceful
// close would keep it, and keep trying to send it, for minutes. Call end
// when the stream ends (defer it): a connection closed after that, or kept
// for another request, closes gracefully again. On a connection that is
// not TCP, or that the server does not keep, both do nothing.
func BoundStream(r *http.Request) (end func()) {
	tc := tcpConn(r)
	if tc == nil {
		return func() {}
	}
	_ = tc.SetWriteBuffer(StreamSendBuffer)
	_ = tc.SetLinger(0)
	// After a failed write the connection is closed already, and this
	// fails: nothing to undo.
	return func() { _ = tc.SetLinger(-1) }
}

// Settled waits, until the time given at the latest, for r's client to
// have acknowledged every byte written on r's connection, and reports
// whether it has. A stream that ends by design (a lifetime, a bound on
// their number) calls it after its last write to choose how its
// connection closes: when everything was taken, in good order (end, then
// return); when not, the client does not read, and leaving the reset of
// BoundStream armed drops what it did not take. The kernel acknowledges
// for the client what fits its receive buffer whether or not the client
// reads, so a client that reads nothing but was sent little settles too,
// and closes in good order with nothing left to send. Where this cannot be
// known — a connection that is not TCP, a system without SIOCOUTQ — it
// reports true at once: the close is then the ordinary one. It gives up
// when ctx ends.
func Settled(ctx context.Context, r *http.Request, until time.Time) bool {
	tc := tcpConn(r)
	if tc == nil {
		return true
	}
	// Acknowledgements come within a round trip, or a delayed ACK's
	// 40–200 ms: poll from 1 ms, doubling to 100 ms.
	pause := time.Millisecond
	for {
		n, ok := unacked(tc)
		if !ok || n == 0 {
			return true
		}
		left := time.Until(until)
		if left <= 0 {
			return false
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// tcpConn is r's TCP connection, nil when it is not TCP or the server does
// not keep it (ConnContext).
func tcpConn(r *http.Request) *net.TCPConn {
	c := ConnOf(r)
	if u, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = u.NetConn() // under TLS
	}
	tc, _ := c.(*net.TCPConn)
	return tc
}
