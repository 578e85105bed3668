package core_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

func TestRateLimitError(t *testing.T) {
	platform := errors.New("telegram: 429 Too Many Requests")
	tests := []struct {
		name     string
		err      *core.RateLimitError
		wantText string
		wantWrap error // nil: wraps nothing
	}{
		{"with the platform's error", &core.RateLimitError{RetryAfter: 3 * time.Second, Err: platform},
			"rate limited, retry after 3s: telegram: 429 Too Many Requests", platform},
		{"without", &core.RateLimitError{RetryAfter: 1500 * time.Millisecond, Scope: core.ScopeAccount},
			"rate limited, retry after 1.5s", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.wantText {
				t.Errorf("Error() = %q, want %q", got, tt.wantText)
			}
			if got := tt.err.Unwrap(); got != tt.wantWrap {
				t.Errorf("Unwrap() = %v, want %v", got, tt.wantWrap)
			}
			if tt.wantWrap != nil && !errors.Is(tt.err, tt.wantWrap) {
				t.Errorf("errors.Is(%v, the platform's error) = false", tt.err)
			}
			// Adapters return it wrapped; the outbox finds it with errors.As.
			wrapped := fmt.Errorf("telegram: send: %w", tt.err)
			rl, ok := errors.AsType[*core.RateLimitError](wrapped)
			if !ok || rl != tt.err {
				t.Fatalf("errors.As did not find the *RateLimitError in %v", wrapped)
			}
			if rl.RetryAfter != tt.err.RetryAfter || rl.Scope != tt.err.Scope {
				t.Errorf("found %+v, want %+v", rl, tt.err)
			}
		})
	}
}

func TestPermanent(t *testing.T) {
	bad := errors.New("slack: invalid_blocks")
	if core.Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
	p := core.Permanent(bad)
	if p.Error() != bad.Error() {
		t.Errorf("Permanent changed the message: %q, want %q", p.Error(), bad.Error())
	}
	if !errors.Is(p, bad) {
		t.Error("Permanent hides the error it marks from errors.Is")
	}
	if errors.Unwrap(p) != bad {
		t.Errorf("errors.Unwrap(Permanent(err)) = %v, want err", errors.Unwrap(p))
	}
	// The marker keeps what the error means: a permanent refusal of a
	// message that is gone is still ErrMessageGone.
	if gone := core.Permanent(fmt.Errorf("matrix: redact: %w", core.ErrMessageGone)); !errors.Is(gone, core.ErrMessageGone) {
		t.Error("Permanent hides a wrapped sentinel")
	}
	rl := &core.RateLimitError{RetryAfter: time.Second}
	if _, ok := errors.AsType[*core.RateLimitError](core.Permanent(rl)); !ok {
		t.Error("Permanent hides a wrapped *RateLimitError from errors.As")
	}
}

func TestIsPermanent(t *testing.T) {
	bad := errors.New("telegram: 400 Bad Request: chat not found")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error: a timeout or a 5xx", errors.New("slack: 503"), false},
		{"marked", core.Permanent(bad), true},
		{"marked, then wrapped", fmt.Errorf("outbox: send: %w", core.Permanent(bad)), true},
		{"wrapped, then marked", core.Permanent(fmt.Errorf("telegram: %w", bad)), true},
		{"joined with a marked one", errors.Join(errors.New("first"), core.Permanent(bad)), true},
		{"unsupported", core.ErrUnsupported, true},
		{"unsupported, wrapped", fmt.Errorf("slack: typing: %w", core.ErrUnsupported), true},
		{"invalid", fmt.Errorf("matrix: %w", core.ErrInvalid), true},
		{"rate limit", &core.RateLimitError{RetryAfter: time.Second}, false},
		{"thread gone: the outbox binds anew", core.ErrThreadGone, false},
		{"message gone", core.ErrMessageGone, false},
		{"outbox closed: replayed at the next start", core.ErrOutboxClosed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := core.IsPermanent(tt.err); got != tt.want {
				t.Errorf("IsPermanent(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestSentinelsAreDistinct guards the errors.Is tests callers make on the
// sentinels: no two of them may match each other, and each keeps matching
// through the context producers wrap it in.
func TestSentinelsAreDistinct(t *testing.T) {
	sentinels := []error{
		core.ErrNotFound, core.ErrExists, core.ErrUnauthorized, core.ErrSessionClosed,
		core.ErrInvalid, core.ErrMessageGone, core.ErrThreadGone, core.ErrNotModified,
		core.ErrUnsupported, core.ErrSchemaTooNew, core.ErrDamaged, core.ErrEventsTruncated,
		core.ErrSuperseded, core.ErrExpired, core.ErrNoCall, core.ErrOutboxClosed,
	}
	texts := map[string]bool{}
	for i, a := range sentinels {
		if texts[a.Error()] {
			t.Errorf("two sentinels say %q", a.Error())
		}
		texts[a.Error()] = true
		wrapped := fmt.Errorf("bolt: session 01ARZ3NDEK: %w", a)
		for j, b := range sentinels {
			if got := errors.Is(wrapped, b); got != (i == j) {
				t.Errorf("errors.Is(%q, %q) = %v", wrapped, b, got)
			}
		}
	}
}
