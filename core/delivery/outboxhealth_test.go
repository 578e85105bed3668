package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// logRecorder keeps the log records whose message is in watch.
type logRecorder struct {
	mu    sync.Mutex
	watch []string
	lines []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	if !slices.Contains(l.watch, r.Message) {
		return nil
	}
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "err" {
			line += " " + a.String()
		}
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	return nil
}

func (l *logRecorder) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// TestOutboxSaysWhenAPlatformFailsAndRecovers: one warning when a
// platform's operations start failing, not one per retry, and one line when
// they succeed again, with how long it took.
func TestOutboxSaysWhenAPlatformFailsAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logRecorder{watch: []string{"platform unhealthy: its operations are failing and being retried", "platform recovered"}}
		a := newFake(core.Capabilities{})
		o := newOutbox(a, delivery.OutboxOptions{Logger: slog.New(logs)})
		defer o.Close()
		for range 3 {
			a.FailNext("send", errors.New("502 Bad Gateway"))
		}
		r := newRecorder()
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "a"}, "one"))
		drain(t, o)
		// It fails at 0, 1 s and 3 s (three retry lines) and succeeds at 7 s.
		want := []string{
			"WARN platform unhealthy: its operations are failing and being retried adapter=fake op=send",
			"INFO platform recovered adapter=fake after=7s",
		}
		if got := logs.got(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("logged\n%q\nwant\n%q", got, want)
		}
	})
}

// TestOutboxSaysWhenWorkPilesUp: one warning when more than BacklogWarn
// operations wait for a platform, one line when it is back under half.
func TestOutboxSaysWhenWorkPilesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logRecorder{watch: []string{"outbox backlog is high: operations are waiting for a platform", "outbox backlog back to normal"}}
		a := newFake(limits(core.Limit{Scope: core.ScopeAccount, Rate: core.Rate{N: 1, Per: time.Second}}))
		o := newOutbox(a, delivery.OutboxOptions{Logger: slog.New(logs), BacklogWarn: 4})
		defer o.Close()
		r := newRecorder()
		for i := range 8 {
			o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: fmt.Sprint(i)}, fmt.Sprint(i)))
		}
		synctest.Wait()
		if b := o.Stats().Backlog["fake"]; b != 7 {
			t.Errorf("backlog %d while one runs, want 7", b)
		}
		drain(t, o)
		// Eight at once (one runs at once: seven wait), then one a
		// second: two wait after the fifth has run, at 4 s.
		want := []string{
			"WARN outbox backlog is high: operations are waiting for a platform adapter=fake pending=5 threshold=4",
			"INFO outbox backlog back to normal adapter=fake pending=2",
		}
		if got := logs.got(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("logged\n%q\nwant\n%q", got, want)
		}
		if b := o.Stats().Backlog; len(b) != 0 {
			t.Errorf("backlog %v after draining, want none", b)
		}
	})
}

// TestOutboxCountsOutcomes: every ended operation is counted once, by how
// it ended.
func TestOutboxCountsOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(limits(core.Limit{Scope: core.ScopeAccount, Rate: core.Rate{N: 1, Per: time.Second}}))
		o := newOutbox(a, delivery.OutboxOptions{})
		r := newRecorder()
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "a"}, "done"))
		o.Enqueue(r.op(a, core.OpEdit, "k", core.Place{Chat: "b"}, "old"))
		o.Enqueue(r.op(a, core.OpEdit, "k", core.Place{Chat: "b"}, "new")) // supersedes "old", done
		a.FailNext("send", core.Permanent(errors.New("chat not found")))
		synctest.Wait()
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "c"}, "refused"))
		typing := r.op(a, core.OpTyping, "", core.Place{Chat: "d"}, "typing")
		typing.Expires = time.Now().Add(time.Second / 2)
		o.Enqueue(typing)
		drain(t, o)
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "e"}, "ran"))
		drain(t, o)
		// Held back a second by the limit, and the outbox closes first.
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "e"}, "closed"))
		o.Close()
		synctest.Wait()
		want := map[string]uint64{delivery.OutcomeDone: 3, delivery.OutcomeSuperseded: 1, delivery.OutcomeRefused: 1,
			delivery.OutcomeExpired: 1, delivery.OutcomeClosed: 1}
		if got := o.Stats().Outcomes["fake"]; !maps.Equal(got, want) {
			t.Errorf("outcomes %v, want %v", got, want)
		}
	})
}
