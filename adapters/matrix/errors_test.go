package matrix

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"maunium.net/go/mautrix"

	"github.com/parley-chat/parley/core"
)

// httpErr builds the error mautrix returns for a homeserver's answer.
func httpErr(status int, code string, extra map[string]any, header http.Header) error {
	data := map[string]any{"errcode": code, "error": "x"}
	for k, v := range extra {
		data[k] = v
	}
	return mautrix.HTTPError{
		Response:  &http.Response{StatusCode: status, Header: header},
		RespError: &mautrix.RespError{ErrCode: code, Err: "x", ExtraData: data, StatusCode: status},
	}
}

func TestClassify(t *testing.T) {
	limit := httpErr(429, "M_LIMIT_EXCEEDED", map[string]any{"retry_after_ms": float64(2500)}, nil)
	var rl *core.RateLimitError
	if !errors.As(classify("send", opSend, limit, false), &rl) || rl.RetryAfter != 2500*time.Millisecond || rl.Scope != core.ScopeAccount {
		t.Errorf("M_LIMIT_EXCEEDED → %v, want a rate limit of 2.5s for the account", rl)
	}
	hdr := httpErr(429, "M_LIMIT_EXCEEDED", nil, http.Header{"Retry-After": {"3"}})
	if !errors.As(classify("send", opSend, hdr, false), &rl) || rl.RetryAfter != 3*time.Second {
		t.Errorf("429 with Retry-After: %v, want 3s", rl)
	}
	bare := httpErr(429, "M_LIMIT_EXCEEDED", nil, nil)
	if !errors.As(classify("send", opSend, bare, false), &rl) || rl.RetryAfter != time.Second {
		t.Errorf("429 without a time: %v, want 1s", rl)
	}

	notFound := httpErr(404, "M_NOT_FOUND", nil, nil)
	forbidden := httpErr(403, "M_FORBIDDEN", nil, nil)
	tests := []struct {
		name      string
		o         op
		err       error
		gone      bool
		sentinel  error
		permanent bool
	}{
		{"edit of an unknown event", opEdit, notFound, false, core.ErrMessageGone, false},
		{"redaction of an unknown event", opRedact, notFound, false, core.ErrMessageGone, false},
		{"send to an unknown room", opSend, notFound, false, core.ErrThreadGone, false},
		{"send to a room the bot left", opSend, forbidden, true, core.ErrThreadGone, false},
		{"room name of a room the bot left", opState, forbidden, true, core.ErrThreadGone, false},
		{"send refused by power levels", opSend, forbidden, false, nil, true},
		{"redaction refused", opRedact, forbidden, false, nil, true},
		{"too large", opSend, httpErr(413, "M_TOO_LARGE", nil, nil), false, nil, true},
		{"bad json", opSend, httpErr(400, "M_BAD_JSON", nil, nil), false, nil, true},
		{"server error", opSend, httpErr(502, "M_UNKNOWN", nil, nil), false, nil, false},
		{"token revoked", opSend, httpErr(401, "M_UNKNOWN_TOKEN", nil, nil), false, nil, false},
		{"network", opSend, mautrix.HTTPError{Message: "request error", WrappedError: errors.New("connection refused")}, false, nil, false},
	}
	for _, tt := range tests {
		got := classify("x", tt.o, tt.err, tt.gone)
		if tt.sentinel != nil && !errors.Is(got, tt.sentinel) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.sentinel)
		}
		if core.IsPermanent(got) != tt.permanent {
			t.Errorf("%s: %v permanent %v, want %v", tt.name, got, core.IsPermanent(got), tt.permanent)
		}
		if errors.As(got, &rl) {
			t.Errorf("%s: %v is a rate limit", tt.name, got)
		}
	}
	if classify("x", opSend, nil, false) != nil {
		t.Error("classify(nil) is not nil")
	}
}
