package mcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// The 2025-11-25 GET stream (conns.go). parley serves it rather than
// mcp-go, to make a listening agent cheap and its notifications quick:
//
//   - mcp-go spends three goroutines on each stream (its writer, its
//     heartbeat, the handler's) and hands each notification through two
//     channels, marshalling it once per client; and a notification put on a
//     session's channel is taken by whichever of its stream and its POSTs in
//     flight reads first (a POST whose request ended drops it). parley's
//     stream writes the session's waiting notifications itself, each message
//     encoded once for every client (publish), and a ping every heartbeat.
//     parley sends clients no other server-initiated message (no sampling,
//     elicitation or roots), so nothing of mcp-go's is missed.
//   - Over HTTP/1.1 the stream takes the connection over (Hijack): the
//     handler returns, and net/http's connection goroutine, its buffers and
//     the request go; what stays is the socket and one goroutine, woken by
//     the registry and ticking every staleCheck, when it also looks whether
//     the client closed the connection (a read that waits a microsecond):
//     a client that went is seen within staleCheck, without a goroutine
//     blocked reading each stream. The response is chunked and the
//     connection closed at its end. Where the connection cannot be taken
//     over (HTTP/2), the stream runs in the handler, through net/http.

// keptBuffer is the largest event buffer a stream keeps between events.
const keptBuffer = 4 << 10

// errStale ends a stream whose client answers no pings.
var errStale = errors.New("the client answers no pings")

// sink is where a stream's events go.
type sink interface {
	// send writes one whole event within writeTimeout.
	send(event []byte) error
	// cut fails the write in progress, if any, and every later one.
	cut()
	// failed reports whether a write timed out or the stream was cut:
	// the client does not read.
	failed() bool
	// closed reports whether the client closed the connection, where
	// nothing else tells.
	closed() bool
}

// errClientGone ends a stream whose client closed the connection.
var errClientGone = errors.New("the client closed the stream")

// serveStream serves session id's GET stream until the client goes, the
// session ends, or the client stops reading (the session is then ended).
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, id string) {
	wake, gone, ok := s.conns.channels(id)
	if !ok || !s.conns.begin(id) {
		http.Error(w, "parley: "+errNoSession.Error(), http.StatusNotFound)
		return
	}
	if conn, brw, err := http.NewResponseController(w).Hijack(); err == nil {
		hs := &hijacked{conn: conn, chunked: r.ProtoAtLeast(1, 1)}
		if err := hs.head(w.Header(), brw); err != nil {
			_ = conn.Close()
			s.conns.end(id)
			return
		}
		if !s.streams.add(hs) { // the server is closing
			_ = conn.Close()
			s.conns.end(id)
			return
		}
		replaced := make(chan struct{})
		detach := s.conns.attach(id, sync.OnceFunc(func() { close(replaced) }))
		go func() {
			defer s.streams.done(hs)
			defer s.conns.end(id)
			defer detach()
			s.stream(id, hs, replaced, wake, gone)
			hs.close()
		}()
		return
	}
	defer s.conns.end(id)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer s.conns.attach(id, cancel)()
	dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if dw.flush() != nil {
		return
	}
	s.stream(id, handlerSink{dw}, ctx.Done(), wake, gone)
	if dw.failed() {
		// net/http would keep a connection whose reply it could not
		// finish, and its buffers, for a next request that a client that
		// does not read will never send.
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	}
}

// stream runs session id's stream on out until the client goes or another
// stream replaces it (ended), the session ends (gone) or out fails; a
// client that stopped reading has its session ended.
func (s *Server) stream(id string, out sink, ended <-chan struct{}, wake <-chan struct{}, gone <-chan struct{}) {
	var buf []byte
	send := func(uri string, msgs []wireMsg) error {
		buf = appendUpdateEvent(buf[:0], uri, msgs)
		err := out.send(buf)
		if cap(buf) > keptBuffer {
			buf = nil // a large batch's buffer is not kept for the stream's life
		}
		return err
	}
	tick := time.NewTicker(staleCheck)
	defer tick.Stop()
	ticks := 0
	onTick := func(now time.Time) error {
		if out.closed() {
			return errClientGone
		}
		if now.Sub(s.conns.lastSeen(id)) >= staleAfter {
			out.cut()
			return errStale
		}
		if ticks++; ticks%int(heartbeat/staleCheck) != 0 {
			return nil
		}
		buf = append(buf[:0], "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"...)
		buf = strconv.AppendInt(buf, s.pings.Add(1), 10)
		buf = append(buf, ",\"method\":\"ping\"}\n\n"...)
		return out.send(buf)
	}
	_ = s.subs.deliver(id, wake, ended, gone, send, tick.C, onTick)
	if out.failed() {
		s.log.Info("MCP client stopped reading its stream; ending its session", "mcp_session", id)
		s.endSession(id)
	}
}

// hijacked is a stream on a connection taken over from net/http.
type hijacked struct {
	conn    net.Conn
	chunked bool

	mu     sync.Mutex
	isCut  bool
	broken bool
	size   []byte // a chunk's size line
}

// head writes the response's status and headers (those set on h too).
func (c *hijacked) head(h http.Header, brw *bufio.ReadWriter) error {
	h = h.Clone()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "close")
	h.Del("Content-Length")
	h.Del("Transfer-Encoding")
	if c.chunked {
		h.Set("Transfer-Encoding", "chunked")
	}
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	_ = c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	fmt.Fprintf(brw, "HTTP/1.1 200 OK\r\n")
	if err := h.Write(brw); err != nil {
		return err
	}
	if _, err := brw.WriteString("\r\n"); err != nil {
		return err
	}
	return brw.Flush()
}

// closed looks whether the client closed the connection: a read that
// waits a microsecond ends with EOF (or a reset) if it did, with a timeout
// if not. A client sends nothing on the stream; what it might is dropped.
func (c *hijacked) closed() bool {
	var b [64]byte
	_ = c.conn.SetReadDeadline(time.Now().Add(time.Microsecond))
	_, err := c.conn.Read(b[:])
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

func (c *hijacked) send(event []byte) error {
	c.mu.Lock()
	if c.isCut {
		c.mu.Unlock()
		return errCut
	}
	c.mu.Unlock()
	bufs := net.Buffers{event}
	if c.chunked {
		c.size = strconv.AppendInt(c.size[:0], int64(len(event)), 16)
		c.size = append(c.size, "\r\n"...)
		bufs = net.Buffers{c.size, event, crlf}
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := bufs.WriteTo(c.conn) // one writev on a socket
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.mu.Lock()
		c.broken = true
		c.mu.Unlock()
	}
	return err
}

var crlf = []byte("\r\n")

func (c *hijacked) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.isCut, c.broken = true, true
	_ = c.conn.SetWriteDeadline(time.Now().Add(-time.Second))
}

func (c *hijacked) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

// close ends the response (when the client still reads) and the
// connection.
func (c *hijacked) close() {
	if c.chunked && !c.failed() {
		_ = c.conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.conn.Write([]byte("0\r\n\r\n"))
	}
	_ = c.conn.Close()
}

// handlerSink is a stream served through net/http, in the handler.
type handlerSink struct{ *deadlineWriter }

// closed is false: the request's context tells when the client goes.
func (h handlerSink) closed() bool { return false }

func (h handlerSink) send(event []byte) error {
	if _, err := h.Write(event); err != nil {
		return err
	}
	return h.flush()
}

// streamSet is the streams running on connections taken over, which
// net/http no longer closes or waits for: Server.Close does.
type streamSet struct {
	mu     sync.Mutex
	open   map[*hijacked]struct{}
	closed bool
	wg     sync.WaitGroup
}

// add records a stream about to run; false once the set is closed.
func (ss *streamSet) add(h *hijacked) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return false
	}
	if ss.open == nil {
		ss.open = map[*hijacked]struct{}{}
	}
	ss.open[h] = struct{}{}
	ss.wg.Add(1)
	return true
}

// done records the end of a stream add recorded.
func (ss *streamSet) done(h *hijacked) {
	ss.mu.Lock()
	delete(ss.open, h)
	ss.mu.Unlock()
	ss.wg.Done()
}

// close closes every stream's connection, which ends it at once, and
// waits for them.
func (ss *streamSet) close() {
	ss.mu.Lock()
	ss.closed = true
	for h := range ss.open {
		_ = h.conn.Close()
	}
	ss.mu.Unlock()
	ss.wg.Wait()
}
