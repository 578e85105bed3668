package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/parley-chat/parley/core"
)

// TestSSEEndResetsNonReader: a stream that ends by design closes its
// connection in good order when the client took everything, and resets it
// when not. A client that reads nothing, with a 4 KiB receive buffer, is
// sent about 32 KiB of events (2 messages of 8 KiB and their UiUpdates):
// less than it takes for a write to block, so its stream would run on,
// but most of it stays in the daemon's send buffer. When the stream is ended to make room (Options.MaxStreams
// 1 here, a second client connecting), its client has not acknowledged
// those bytes, and the connection is reset, which drops them at once
// rather than leaving the kernel to try to deliver them for minutes. The
// second client, which reads, is ended by a third and sees the reconnect
// message and the end in good order.
func TestSSEEndResetsNonReader(t *testing.T) {
	var mu sync.Mutex
	server := map[string]net.Conn{} // the daemon's end, by the client's address
	closed := map[string]chan struct{}{}
	s := newStack(t, func(o *stackOptions) {
		o.web.MaxStreams = 1
		o.connState = func(c net.Conn, st http.ConnState) {
			mu.Lock()
			defer mu.Unlock()
			switch st {
			case http.StateNew:
				server[c.RemoteAddr().String()] = c
				closed[c.RemoteAddr().String()] = make(chan struct{})
			case http.StateClosed:
				close(closed[c.RemoteAddr().String()])
			}
		}
	})
	id := s.newSession("unread")
	addr := s.srv.Listener.Addr().String()
	c, err := smallReceiver().Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /api/events?ui=delta HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	waitClients(t, s, 1, wait)
	text := strings.Repeat("nobody reads this. ", 8<<10/19)
	for i := range 2 {
		s.chat(id, fmt.Sprintf("%d %s", i, text))
	}
	// Wait until the daemon has written them: its end of the connection
	// holds what the client did not acknowledge.
	mu.Lock()
	sc := server[c.LocalAddr().String()].(*net.TCPConn)
	gone := closed[c.LocalAddr().String()]
	mu.Unlock()
	deadline := time.After(time.Minute)
	for unackedBytes(t, sc) < 16<<10 {
		select {
		case <-deadline:
			t.Fatalf("the daemon holds %d bytes for the client, want most of the 32 KiB of events", unackedBytes(t, sc))
		case <-time.After(5 * time.Millisecond):
		}
	}

	// The client reads only once the daemon has closed the connection.
	reader := s.es("")
	select {
	case <-gone:
	case <-time.After(time.Minute):
		t.Fatal("the daemon did not close the stream of a client that did not read")
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err = io.ReadAll(c)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the stream of a client that did not read ended with %v, not reset", err)
	}

	s.chat(id, "the reader reads")
	reader.await(core.EventHumanMessage)
	_ = s.es("")
	l := reader.next()
	if l.err != nil || l.frames[len(l.frames)-1].Event != "reconnect" {
		t.Fatalf("the reader's stream ended with %v after %q", l.err, l.kinds())
	}
	last, _ := s.store.LastEventSeq(context.Background())
	if l.lastID != fmt.Sprint(last) {
		t.Fatalf("the reader resumes after %s, the newest event is %d", l.lastID, last)
	}
}

// unackedBytes is what c's peer has not acknowledged (SIOCOUTQ, tcp(7)).
func unackedBytes(t *testing.T, c *net.TCPConn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil || ierr != nil {
		t.Fatal(err, ierr)
	}
	return n
}
