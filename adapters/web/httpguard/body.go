package httpguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// refusal writes an error answer in the protocol of the endpoint.
type refusal func(w http.ResponseWriter, r *http.Request, status int, msg string)

// apiRefusal answers as /api does: {"error": "…"}.
func apiRefusal(w http.ResponseWriter, r *http.Request, status int, msg string) {
	refuse(w, r, status, map[string]string{"error": msg})
}

// mcpRefusal answers as a JSON-RPC error without an id, which is how
// Streamable HTTP refuses a request it could not read.
func mcpRefusal(w http.ResponseWriter, r *http.Request, status int, msg string) {
	refuse(w, r, status, map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32600, "message": msg}})
}

// refuse answers r with status and body, as JSON, and closes the
// connection as soon as the answer is written.
func refuse(w http.ResponseWriter, r *http.Request, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	closeAfter(w, r)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// closeAfter makes r's connection close once its answer is written,
// without waiting for the rest of its body. Connection: close alone does
// not do it: after the handler returns and the answer is sent, net/http
// reads up to 256 KiB of an unread body before it closes the connection,
// with no deadline unless one was set (the server has no ReadTimeout: it
// would end the long-lived streams). A refused client that declared a
// body and sends it slowly, or never, would hold its connection for as
// long as it liked. So the read side gets closeGrace: what arrives
// meanwhile is read and dropped, then the connection closes.
func closeAfter(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	if r.Body != nil && r.Body != http.NoBody {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(closeGrace))
	}
}

// closeGrace is how long a refused request's connection stays open after
// the answer, reading what the client still sends. Closing a socket with
// unread data resets it, and the reset can make the client's system drop
// the answer before the client has read it; net/http waits as long
// (rstAvoidanceDelay) after refusing a body too large to read for the same
// reason.
const closeGrace = 500 * time.Millisecond

// BodyDeadline gives the body of each request BodyTimeout to arrive,
// counted from when the handler starts: a client that declares a body and
// sends it slowly, or never, is cut off then, whether the handler reads
// the body or net/http drains it after the handler. The deadline ends as
// soon as the body has been read to its end, so a response that goes on
// after it (MCP answers a POST with a stream) is not cut. Requests without
// a body get none, which is what keeps the long-lived streams (GET
// /api/events and GET /mcp) open: net/http reads an idle connection to
// notice a client that went away, and a deadline would end that read and
// the request with it — which is why the server has no ReadTimeout, and
// bounds bodies here instead.
//
// It goes in front of everything the server serves; the headers have the
// server's ReadHeaderTimeout.
func BodyDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(BodyTimeout)) == nil {
				// A copy: net/http looks at its own request's body, a
				// *body, after the handler to decide how to finish the
				// connection.
				r = r.WithContext(r.Context())
				r.Body = &timedBody{ReadCloser: r.Body, rc: rc}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// timedBody is a request body under BodyDeadline: at its end it lifts the
// deadline.
type timedBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// boundBody reads a request's body before h sees it: at most limit bytes,
// within BodyTimeout (BodyDeadline). A larger body is refused with 413
// (before a byte of it is read when its Content-Length says so), and a
// client that sends its body slowly is cut off with 408, so neither a huge
// nor a trickling body ties up memory or a connection.
func boundBody(limit int64, refuse refusal, h http.Handler) http.Handler {
	return BodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > limit {
			refuse(w, r, http.StatusRequestEntityTooLarge, tooLarge(limit))
			return
		}
		buf := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 0)+1))
		_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			refuse(w, r, http.StatusRequestEntityTooLarge, tooLarge(limit))
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			refuse(w, r, http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %s", BodyTimeout))
			return
		case err != nil:
			return // the client is gone
		}
		r.Body = io.NopCloser(buf)
		r.ContentLength = int64(buf.Len())
		h.ServeHTTP(w, r)
	}))
}

func tooLarge(limit int64) string {
	return fmt.Sprintf("the request body is larger than the limit of %d MiB", limit>>20)
}
