package matrix

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
)

// TestTypingRenewal: a typing notification lasts typingFor; core's
// renewals within typingRenew of the last call make none, later ones do.
func TestTypingRenewal(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/typing/") {
			calls.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	a, err := New(Options{Homeserver: srv.URL, UserID: "@parley:example.org", AccessToken: "t", Cursors: nopCursors{}, Leases: nopCursors{}, Authorizer: adaptertest.Everyone})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	p := core.Place{Chat: "!r:example.org"}
	steps := []struct {
		after time.Duration
		call  bool
	}{{0, true}, {4500 * time.Millisecond, false}, {typingRenew - 4500*time.Millisecond - time.Millisecond, false}, {time.Millisecond, true}, {time.Second, false}}
	want := int32(0)
	for i, s := range steps {
		now = now.Add(s.after)
		err := a.Typing(t.Context(), p)
		if s.call {
			want++
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		} else if !errors.Is(err, core.ErrNoCall) {
			t.Fatalf("step %d: %v, want core.ErrNoCall", i, err)
		}
		if got := calls.Load(); got != want {
			t.Fatalf("step %d: %d calls, want %d", i, got, want)
		}
	}
}

type nopCursors struct{}

func (nopCursors) Cursor(context.Context, string) (string, error)  { return "", nil }
func (nopCursors) SetCursor(context.Context, string, string) error { return nil }

func (nopCursors) AcquireLease(_ context.Context, name string, _ time.Duration) (core.Lease, bool, error) {
	return core.Lease{Name: name, Holder: "test", Token: 1}, true, nil
}
func (nopCursors) RenewLease(_ context.Context, l core.Lease, _ time.Duration) (core.Lease, error) {
	return l, nil
}
func (nopCursors) ReleaseLease(context.Context, core.Lease) error                    { return nil }
func (nopCursors) Leases(context.Context) ([]core.LeaseInfo, error)                  { return nil, nil }
func (nopCursors) SetCursorFenced(context.Context, string, string, core.Lease) error { return nil }
