package inbound_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/inbound"
	"github.com/parley-chat/parley/core"
)

var errBusy = errors.New("store busy")

// tries records when try was called, relative to the start, and fails the
// first n calls with err.
type tries struct {
	start time.Time
	at    []time.Duration
	n     int
	err   error
}

func (tr *tries) try(context.Context) error {
	tr.at = append(tr.at, time.Since(tr.start))
	if len(tr.at) <= tr.n {
		return tr.err
	}
	return nil
}

func durations(ms ...int) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A failing try is repeated after 100 ms, then after twice the previous
// wait, up to 10 s between tries, until it succeeds.
func TestRetryBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &tries{start: time.Now(), n: 9, err: errBusy}
		if err := (inbound.Retry{}).Do(t.Context(), tr.try); err != nil {
			t.Fatalf("Do = %v, want nil", err)
		}
		// Waits 100, 200, 400, …, 6400, then 10 000 twice.
		want := durations(0, 100, 300, 700, 1500, 3100, 6300, 12700, 22700, 32700)
		if !equal(tr.at, want) {
			t.Fatalf("tries at %v, want %v", tr.at, want)
		}
	})
}

// When ctx ends while it waits, Do returns ctx's error at once and tries
// no more: the update is not dealt with and must not be acknowledged.
func TestRetryStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		tr := &tries{start: time.Now(), n: 1000, err: errBusy}
		time.AfterFunc(250*time.Millisecond, cancel)
		err := (inbound.Retry{}).Do(ctx, tr.try)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %v, want context.Canceled", err)
		}
		if got := time.Since(tr.start); got != 250*time.Millisecond {
			t.Errorf("Do returned after %v, want at the cancel (250ms)", got)
		}
		if want := durations(0, 100); !equal(tr.at, want) {
			t.Errorf("tries at %v, want %v", tr.at, want)
		}
	})
}

// A try that fails because ctx ended is not retried, nor logged.
func TestRetryEndsWhenTheTryEndedWithContext(t *testing.T) {
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	err := inbound.Retry{Log: slog.New(slog.NewTextHandler(&logs, nil)), What: "update"}.Do(ctx, func(ctx context.Context) error {
		n++
		cancel()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Fatalf("Do = %v after %d tries, want context.Canceled after 1", err, n)
	}
	if logs.Len() != 0 {
		t.Errorf("logged %q", logs.String())
	}
}

// With SkipPermanent an error retrying cannot change ends the retrying and
// the update counts as dealt with; without it, it is retried like any
// other.
func TestRetrySkipPermanent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		r := inbound.Retry{Log: slog.New(slog.NewTextHandler(&logs, nil)), What: "sync event", SkipPermanent: true}
		tr := &tries{start: time.Now(), n: 1000, err: core.Permanent(errors.New("forbidden"))}
		if err := r.Do(t.Context(), tr.try); err != nil {
			t.Fatalf("Do = %v, want nil", err)
		}
		if len(tr.at) != 1 {
			t.Errorf("tried %d times, want once", len(tr.at))
		}
		if !strings.Contains(logs.String(), `msg="sync event refused for good; skipping it"`) {
			t.Errorf("log %q does not say the event is skipped", logs.String())
		}

		r.SkipPermanent = false
		tr = &tries{start: time.Now(), n: 2, err: core.Permanent(errors.New("forbidden"))}
		if err := r.Do(t.Context(), tr.try); err != nil {
			t.Fatalf("Do = %v, want nil", err)
		}
		if want := durations(0, 100, 300); !equal(tr.at, want) {
			t.Errorf("without SkipPermanent: tries at %v, want %v", tr.at, want)
		}
	})
}

// Attempt bounds each try with a deadline of its own.
func TestRetryAttemptDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var deadlines []time.Duration
		n := 0
		err := inbound.Retry{Attempt: 5 * time.Minute}.Do(t.Context(), func(ctx context.Context) error {
			d, ok := ctx.Deadline()
			if !ok {
				t.Fatal("a try has no deadline")
			}
			deadlines = append(deadlines, d.Sub(start))
			if n++; n == 1 {
				<-ctx.Done() // a try that hangs ends at its deadline
				return ctx.Err()
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Do = %v, want nil", err)
		}
		want := []time.Duration{5 * time.Minute, 5*time.Minute + 100*time.Millisecond + 5*time.Minute}
		if !equal(deadlines, want) {
			t.Errorf("deadlines %v, want %v", deadlines, want)
		}
	})
}

// Every failed try is logged with what the update is, its ids, the error
// and the wait.
func TestRetryLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
		tr := &tries{start: time.Now(), n: 2, err: errBusy}
		if err := (inbound.Retry{Log: log, What: "update"}).Do(t.Context(), tr.try, "update_id", 42); err != nil {
			t.Fatal(err)
		}
		want := `level=WARN msg="update not handled yet; retrying" update_id=42 err="store busy" in=100ms
level=WARN msg="update not handled yet; retrying" update_id=42 err="store busy" in=200ms
`
		if logs.String() != want {
			t.Errorf("logs:\n%s\nwant:\n%s", logs.String(), want)
		}
	})
}
