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
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBoundStream: on a server that keeps its connections (ConnContext),
// a stream's connection gets the fixed send buffer; a stream cut off by a
// write's deadline, its client not reading, ends in a reset, which
// discards what the client was not sent; one that ends in good order
// closes as usual, everything sent.
func TestBoundStream(t *testing.T) {
	type result struct {
		sndbuf int
		err    error // of the stream's last write
	}
	done := make(chan result, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		end := BoundStream(r)
		defer end()
		res := result{sndbuf: sendBuffer(t, ConnOf(r))}
		defer func() { done <- res }()
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		if r.URL.Query().Has("end") {
			w.Header().Set("Connection", "close")
			_, res.err = io.WriteString(w, ": the end\n\n")
			return
		}
		// Until the client, which does not read, takes no more.
		for res.err == nil {
			_ = rc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			if _, res.err = io.WriteString(w, ": "+strings.Repeat("x", 16<<10)+"\n\n"); res.err == nil {
				res.err = rc.Flush()
			}
		}
	}))
	srv.Config.ConnContext = ConnContext
	srv.Start()
	defer srv.Close()

	for _, cut := range []bool{true, false} {
		t.Run(fmt.Sprintf("cut=%v", cut), func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			path := "/events"
			if !cut {
				path += "?end"
			}
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
			res := <-done
			// Linux doubles the size asked for (socket(7)); without it,
			// a connection starts with tcp_wmem's default, 16 KiB.
			if res.sndbuf < StreamSendBuffer || res.sndbuf > 2*StreamSendBuffer {
				t.Errorf("SO_SNDBUF %d, want %d (or twice that)", res.sndbuf, StreamSendBuffer)
			}
			if cut != errors.Is(res.err, os.ErrDeadlineExceeded) {
				t.Fatalf("the stream ended with %v", res.err)
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			if _, err := http.ReadResponse(br, nil); err != nil {
				t.Fatal(err)
			}
			_, err = io.Copy(io.Discard, br) // to the connection's end
			if cut != errors.Is(err, syscall.ECONNRESET) || !cut && err != nil {
				t.Errorf("reading to the connection's end: %v; want a reset: %v", err, cut)
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
