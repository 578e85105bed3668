package httpguard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSettled: after a stream's last write, Settled reports whether its
// client acknowledged everything. One that reads has, soon; one that reads
// nothing, with a 4 KiB receive buffer, has not acknowledged most of the
// 32 KiB it was sent, and Settled says so once its time is up. A request
// without a TCP connection it cannot ask about, and it reports true.
func TestSettled(t *testing.T) {
	settled := make(chan bool, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer BoundStream(r)()
		_, _ = io.WriteString(w, strings.Repeat("x", 32<<10))
		_ = http.NewResponseController(w).Flush()
		// A client that reads is waited for as long as it may take; one
		// that does not is given up on after a second.
		wait := time.Second
		if r.URL.Query().Has("reads") {
			wait = time.Minute
		}
		settled <- Settled(r.Context(), r, time.Now().Add(wait))
	}))
	srv.Config.ConnContext = ConnContext
	srv.Start()
	defer srv.Close()
	for _, reads := range []bool{true, false} {
		t.Run(fmt.Sprintf("reads=%v", reads), func(t *testing.T) {
			d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
				var serr error
				err := c.Control(func(fd uintptr) {
					serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
				})
				return errors.Join(err, serr)
			}}
			c, err := d.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			path := "/"
			if reads {
				path += "?reads"
			}
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path)
			if reads {
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.CopyN(io.Discard, resp.Body, 32<<10); err != nil {
					t.Fatal(err)
				}
			}
			if got := <-settled; got != reads {
				t.Fatalf("Settled %v for a client that reads: %v", got, reads)
			}
		})
	}
	if !Settled(context.Background(), httptest.NewRequest(http.MethodGet, "/", nil), time.Now().Add(time.Second)) {
		t.Fatal("Settled false without a connection to ask")
	}
}
