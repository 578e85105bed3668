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
type refusal func(w http.ResponseWriter, status int, msg string)

// apiRefusal answers as /api does: {"error": "…"}.
func apiRefusal(w http.ResponseWriter, status int, msg string) {
	writeError(w, status, map[string]string{"error": msg})
}

// mcpRefusal answers as a JSON-RPC error without an id, which is how
// Streamable HTTP refuses a request it could not read.
func mcpRefusal(w http.ResponseWriter, status int, msg string) {
	writeError(w, status, map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32600, "message": msg}})
}

func writeError(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// boundBody reads a request's body before h sees it: at most limit bytes,
// within BodyTimeout. A larger body is refused with 413 (before a byte of
// it is read when its Content-Length says so), and a client that sends
// its body slowly is cut off, so neither a huge nor a trickling body ties
// up memory or a connection. The server's ReadTimeout cannot do this: it
// would also end the long-lived streams.
func boundBody(limit int64, refuse refusal, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > limit {
			refuse(w, http.StatusRequestEntityTooLarge, tooLarge(limit))
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(BodyTimeout))
		buf := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 0)+1))
		_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			refuse(w, http.StatusRequestEntityTooLarge, tooLarge(limit))
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			refuse(w, http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %s", BodyTimeout))
			return
		case err != nil:
			return // the client is gone
		}
		_ = rc.SetReadDeadline(time.Time{})
		r.Body = io.NopCloser(buf)
		r.ContentLength = int64(buf.Len())
		h.ServeHTTP(w, r)
	})
}

func tooLarge(limit int64) string {
	return fmt.Sprintf("the request body is larger than the limit of %d MiB", limit>>20)
}
