package httpguard

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// echo answers with the length of the body it read.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]int{"read": len(b)})
})

func TestBoundBodySize(t *testing.T) {
	srv := httptest.NewServer(boundBody(1<<20, mcpRefusal, echo))
	defer srv.Close()
	post := func(body io.Reader, length int64) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL, body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length // -1: chunked, the length unknown
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	tests := []struct {
		name   string
		size   int64
		length int64
		status int
		want   string
	}{
		{"small", 100, 100, http.StatusOK, `{"read":100}`},
		{"at the limit", 1 << 20, 1 << 20, http.StatusOK, `{"read":1048576}`},
		{"at the limit, chunked", 1 << 20, -1, http.StatusOK, `{"read":1048576}`},
		{"declared too large", 20 << 20, 20 << 20, http.StatusRequestEntityTooLarge,
			`{"error":{"code":-32600,"message":"the request body is larger than the limit of 1 MiB"},"id":null,"jsonrpc":"2.0"}`},
		{"too large, chunked", 20 << 20, -1, http.StatusRequestEntityTooLarge,
			`{"error":{"code":-32600,"message":"the request body is larger than the limit of 1 MiB"},"id":null,"jsonrpc":"2.0"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(io.LimitReader(zeros{}, tt.size), tt.length)
			if status != tt.status || body != tt.want {
				t.Errorf("status %d %s, want %d %s", status, body, tt.status, tt.want)
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestBoundBodySlow: a client that sends its body slowly is cut off after
// BodyTimeout, on a fake clock; one that sends it in time is served.
func TestBoundBodySlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		srv := &http.Server{Handler: boundBody(1<<20, apiRefusal, echo), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		stop := make(chan struct{})
		defer close(stop)

		send := func(gap time.Duration, parts ...string) <-chan *http.Response {
			conn := ln.dial()
			got := make(chan *http.Response, 1)
			go func() {
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					close(got)
					return
				}
				got <- resp
			}()
			go func() {
				for i, p := range parts {
					if i > 0 {
						select {
						case <-time.After(gap):
						case <-stop:
							return
						}
					}
					if _, err := conn.Write([]byte(p)); err != nil {
						return
					}
				}
			}()
			return got
		}
		head := "POST /api/chat HTTP/1.1\r\nHost: parley\r\nContent-Length: 10\r\n\r\n"

		// Four seconds between pieces: the last would come at 12 s.
		slow := send(4*time.Second, head, "01234", "5678", "9")
		// Three seconds between pieces: the body is whole at 6 s.
		prompt := send(3*time.Second, head, "01234", "56789")

		time.Sleep(BodyTimeout - time.Nanosecond)
		synctest.Wait()
		select {
		case resp := <-prompt:
			if resp == nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("a body sent within %s was refused: %v", BodyTimeout, resp)
			}
		default:
			t.Fatal("a body sent within the timeout got no answer")
		}
		select {
		case resp := <-slow:
			t.Fatalf("the slow body was answered before the timeout: %v", resp)
		default:
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		select {
		case resp := <-slow:
			if resp == nil || resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("the slow body got %v, want 408", resp)
			}
			b, _ := io.ReadAll(resp.Body)
			if want := `{"error":"the request body did not arrive within 10s"}`; strings.TrimSpace(string(b)) != want {
				t.Errorf("body %s, want %s", b, want)
			}
		default:
			t.Fatalf("the slow body was not cut off at %s", BodyTimeout)
		}
	})
}

// pipeListener serves in-memory connections, whose deadlines run on the
// bubble's fake clock.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial() net.Conn {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
	case <-l.done:
	}
	return client
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
