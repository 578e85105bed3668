package httpguard

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// exchange is what a raw client saw of one connection, on the bubble's
// clock from when it sent its request.
type exchange struct {
	status int
	close  bool          // the answer said Connection: close
	answer time.Duration // -1: no answer
	closed time.Duration // when the server closed the connection
}

// rawRequest sends head (a request's line and headers, without the blank
// line) and then each part of the body after gap, on a new connection
// of ln, and reports what the client saw once the connection is closed.
// It never sends more than parts, whatever Content-Length says.
func rawRequest(ln *pipeListener, head string, gap time.Duration, parts ...string) <-chan exchange {
	conn := ln.dial()
	start := time.Now()
	got := make(chan exchange, 1)
	go func() {
		defer conn.Close()
		ex := exchange{answer: -1}
		br := bufio.NewReader(conn)
		if resp, err := http.ReadResponse(br, nil); err == nil {
			ex.status, ex.close, ex.answer = resp.StatusCode, resp.Close, time.Since(start)
			_, _ = io.Copy(io.Discard, resp.Body)
		}
		_, _ = io.Copy(io.Discard, br)
		ex.closed = time.Since(start)
		got <- ex
	}()
	go func() {
		if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
			return
		}
		for i, p := range parts {
			if i > 0 {
				time.Sleep(gap)
			}
			if _, err := io.WriteString(conn, p); err != nil {
				return
			}
		}
	}()
	return got
}

// TestRefusalsCloseAtOnce: a request the guard refuses is answered at
// once and its connection closed within closeGrace, although the client
// declared a body of 1000 bytes and sends only half of it: neither the
// answer nor the close waits for the rest. net/http would otherwise read
// for the rest of the body before closing (and, for an answer without
// Connection: close, before answering at all).
func TestRefusalsCloseAtOnce(t *testing.T) {
	g := New(Options{Token: "s3cret"})
	mux := http.NewServeMux()
	mux.Handle("/api/", g.API(echo))
	mux.Handle("/mcp", g.MCP(echo))
	const json, token = "Content-Type: application/json\r\n", "Authorization: Bearer s3cret\r\n"
	tests := []struct {
		name, path, header string
		status             int
	}{
		{"foreign Host", "/api/chat", "Host: evil.example\r\n" + json + token, http.StatusForbidden},
		{"foreign Host on /mcp", "/mcp", "Host: evil.example\r\n" + json + token, http.StatusForbidden},
		{"cross-site", "/api/chat", "Host: 127.0.0.1\r\nSec-Fetch-Site: cross-site\r\n" + json + token, http.StatusForbidden},
		{"not JSON", "/api/chat", "Host: 127.0.0.1\r\nContent-Type: text/plain\r\n" + token, http.StatusUnsupportedMediaType},
		{"no token", "/api/chat", "Host: 127.0.0.1\r\n" + json, http.StatusUnauthorized},
		{"no token on /mcp", "/mcp", "Host: 127.0.0.1\r\n" + json, http.StatusUnauthorized},
	}
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		srv := &http.Server{Handler: BodyDeadline(g.Browser(mux)), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		got := make([]<-chan exchange, len(tests))
		for i, tt := range tests {
			head := fmt.Sprintf("POST %s HTTP/1.1\r\n%sContent-Length: 1000\r\n", tt.path, tt.header)
			got[i] = rawRequest(ln, head, 0, strings.Repeat("x", 500))
		}
		time.Sleep(BodyTimeout)
		synctest.Wait()
		for i, tt := range tests {
			select {
			case ex := <-got[i]:
				if ex.status != tt.status || ex.answer != 0 || !ex.close {
					t.Errorf("%s: status %d after %v (Connection: close %v), want %d at once, Connection: close",
						tt.name, ex.status, ex.answer, ex.close, tt.status)
				}
				if ex.closed > closeGrace {
					t.Errorf("%s: the connection closed after %v, want within %v", tt.name, ex.closed, closeGrace)
				}
			default:
				t.Errorf("%s: the connection is still open after %v", tt.name, BodyTimeout)
			}
		}
	})
}

// TestBodyDeadline: an accepted request's body has BodyTimeout to arrive,
// whether its handler reads it or not; once the body has arrived, or when
// there is none, the response goes on for as long as it needs.
func TestBodyDeadline(t *testing.T) {
	stream := func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for i := range 12 {
			if i > 0 {
				time.Sleep(time.Minute)
			}
			_, _ = fmt.Fprintf(w, "line %d\n", i)
			if http.NewResponseController(w).Flush() != nil {
				return
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ignores", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/reads", stream)
	const slow, long = 4 * time.Second, 12 * time.Minute
	tests := []struct {
		name, head string
		parts      []string
		closed     time.Duration // when the connection must close
		status     int
	}{
		{"a handler that ignores a slow body", "POST /ignores HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n", []string{"01234", "5678"}, BodyTimeout, http.StatusNoContent},
		{"a handler that reads a slow body", "POST /reads HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n", []string{"01234", "5678"}, BodyTimeout, http.StatusBadRequest},
		{"a chunked body that never ends", "POST /reads HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n", []string{"5\r\n01234\r\n", "4\r\n5678\r\n"}, BodyTimeout, http.StatusBadRequest},
		{"a long answer after a body in time", "POST /reads HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nConnection: close\r\n", []string{"01234", "56789"}, slow + 11*time.Minute, http.StatusOK},
		{"a long answer without a body", "GET /reads HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", nil, 11 * time.Minute, http.StatusOK},
	}
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		srv := &http.Server{Handler: BodyDeadline(mux), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		got := make([]<-chan exchange, len(tests))
		for i, tt := range tests {
			got[i] = rawRequest(ln, tt.head, slow, tt.parts...)
		}
		time.Sleep(long)
		synctest.Wait()
		for i, tt := range tests {
			select {
			case ex := <-got[i]:
				if ex.status != tt.status || ex.closed != tt.closed {
					t.Errorf("%s: status %d, closed after %v; want %d, closed after %v", tt.name, ex.status, ex.closed, tt.status, tt.closed)
				}
			default:
				t.Errorf("%s: the connection is still open after %v", tt.name, long)
			}
		}
	})
}
