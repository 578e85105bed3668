//go:build unix

package httpguard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// TestBoundStream: on a server that keeps its connections (ConnContext),
// a stream's connection gets the fixed send buffer, and abort makes its
// close a reset, which discards what the client has not read.
func TestBoundStream(t *testing.T) {
	sndbuf := make(chan int, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		abort := BoundStream(r)
		sndbuf <- sendBuffer(t, ConnOf(r))
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Connection", "close") // the stream ends with its connection
		_, _ = io.WriteString(w, ": connected\n\n")
		_ = http.NewResponseController(w).Flush()
		if r.URL.Query().Has("abort") {
			abort()
		}
	}))
	srv.Config.ConnContext = ConnContext
	srv.Start()
	defer srv.Close()

	for _, abort := range []bool{false, true} {
		t.Run(fmt.Sprintf("abort=%v", abort), func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			path := "/events"
			if abort {
				path += "?abort"
			}
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
			// Linux doubles the size asked for (socket(7)); without it,
			// a connection starts with tcp_wmem's default, 16 KiB.
			if got := <-sndbuf; got < StreamSendBuffer || got > 2*StreamSendBuffer {
				t.Errorf("SO_SNDBUF %d, want %d (or twice that)", got, StreamSendBuffer)
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil && !abort {
				t.Fatal(err)
			}
			_, err = io.Copy(io.Discard, br) // to the connection's end
			if abort != errors.Is(err, syscall.ECONNRESET) || !abort && err != nil {
				t.Errorf("reading the stream to its end: %v; want a reset: %v", err, abort)
			}
		})
	}
}

// TestBoundStreamWithoutConn: a server without ConnContext leaves the
// connection alone.
func TestBoundStreamWithoutConn(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/events", nil)
	if ConnOf(r) != nil {
		t.Fatal("a connection without ConnContext")
	}
	BoundStream(r)()
}

// sendBuffer is c's SO_SNDBUF.
func sendBuffer(t *testing.T, c net.Conn) int {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		t.Errorf("the connection is a %T, not TCP", c)
		return 0
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Error(err)
		return 0
	}
	var size int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		size, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	}); err != nil || serr != nil {
		t.Error(err, serr)
	}
	return size
}
