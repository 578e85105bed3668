package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
)

func newOutbox(t *testing.T, a core.Adapter, opts core.OutboxOptions) *core.Outbox {
	t.Helper()
	o := core.NewOutbox(opts, a)
	t.Cleanup(o.Close)
	return o
}

func drain(t *testing.T, o *core.Outbox, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := o.Drain(ctx); err != nil {
		t.Fatalf("outbox did not drain within %s: %v", within, err)
	}
}

// sendOp sends text at place, recording the order ops ran in.
func sendOp(a *fake.Adapter, kind core.OpKind, key string, place core.Place, text string, log *[]string, mu *sync.Mutex) core.Op {
	return core.Op{Kind: kind, Adapter: a.Name(), Place: place, Key: key, Run: func(ctx context.Context, _ core.Place) error {
		mu.Lock()
		*log = append(*log, text)
		mu.Unlock()
		_, err := a.Send(ctx, place, core.OutMessage{Text: text})
		return err
	}}
}

func TestOutboxPriorityAndCoalescing(t *testing.T) {
	a := fake.New("fake", core.Capabilities{Limits: core.Limits{Global: core.Rate{N: 20, Per: time.Second}}})
	o := newOutbox(t, a, core.OutboxOptions{})
	place := core.Place{Chat: "c"}
	var (
		mu  sync.Mutex
		ran []string
	)
	// The first op takes the only token; everything after it waits and
	// is then ordered by priority, with same-key edits coalesced.
	o.Enqueue(sendOp(a, core.OpSend, "", place, "first", &ran, &mu))
	o.Enqueue(sendOp(a, core.OpEdit, "out", place, "edit 1", &ran, &mu))
	o.Enqueue(sendOp(a, core.OpRename, "", place, "rename", &ran, &mu))
	o.Enqueue(sendOp(a, core.OpDelete, "", place, "delete", &ran, &mu))
	o.Enqueue(sendOp(a, core.OpEdit, "out", place, "edit 2", &ran, &mu))
	o.Enqueue(sendOp(a, core.OpSend, "", place, "send", &ran, &mu))
	o.Enqueue(sendOp(a, core.OpEdit, "out", place, "edit 3", &ran, &mu))
	drain(t, o, 5*time.Second)
	want := []string{"first", "send", "delete", "edit 3", "rename"}
	if fmt.Sprint(ran) != fmt.Sprint(want) {
		t.Errorf("ran %v, want %v", ran, want)
	}
}

func TestOutboxHonorsRetryAfter(t *testing.T) {
	a := fake.New("fake", core.Capabilities{})
	o := newOutbox(t, a, core.OutboxOptions{})
	place := core.Place{Chat: "group", Thread: "1"}
	a.FailNext("send", &core.RateLimitError{RetryAfter: 2 * time.Second})
	var (
		mu  sync.Mutex
		ran []string
	)
	o.Enqueue(sendOp(a, core.OpSend, "out", place, "v1", &ran, &mu))
	// Wait for the refused attempt, then supersede its content.
	waitFor(t, func() bool { return len(a.Ops()) == 1 })
	o.Enqueue(sendOp(a, core.OpSend, "out", place, "v2", &ran, &mu))
	o.Enqueue(sendOp(a, core.OpSend, "", core.Place{Chat: "group", Thread: "2"}, "same group", &ran, &mu))
	o.Enqueue(sendOp(a, core.OpSend, "", core.Place{Chat: "other"}, "other group", &ran, &mu))
	drain(t, o, 10*time.Second)

	ops := a.Ops()
	refused := ops[0]
	if refused.Err == nil {
		t.Fatalf("first op should have been refused: %+v", refused)
	}
	var sentV2 bool
	for _, op := range ops[1:] {
		if op.Place.Chat == "group" && op.Time.Sub(refused.Time) < 2*time.Second-50*time.Millisecond {
			t.Errorf("op %q to the rate-limited group %s after the 429, want ≥ 2s", op.Text, op.Time.Sub(refused.Time))
		}
		if op.Text == "v1" && op.Err == nil {
			t.Errorf("stale content v1 was sent after being superseded")
		}
		sentV2 = sentV2 || (op.Text == "v2" && op.Err == nil)
	}
	if !sentV2 {
		t.Errorf("latest content v2 never sent: %+v", ops)
	}
	var other time.Time
	for _, op := range ops {
		if op.Place.Chat == "other" {
			other = op.Time
		}
	}
	if other.Sub(refused.Time) > time.Second {
		t.Errorf("another group waited %s: a 429 must only pause its own group", other.Sub(refused.Time))
	}
}

func TestOutboxRetriesTransientFailures(t *testing.T) {
	a := fake.New("fake", core.Capabilities{})
	o := newOutbox(t, a, core.OutboxOptions{MaxAttempts: 2})
	timeout := errors.New("timeout")
	for range 3 {
		a.FailNext("send", timeout)
	}
	var (
		mu   sync.Mutex
		ran  []string
		errs = make(chan error, 2)
	)
	op := sendOp(a, core.OpSend, "", core.Place{Chat: "a"}, "given up", &ran, &mu)
	op.Done = func(err error) { errs <- err }
	o.Enqueue(op)
	if err := <-errs; !errors.Is(err, timeout) {
		t.Fatalf("non-final op: got %v, want it given up with the timeout after 2 attempts", err)
	}
	final := sendOp(a, core.OpSend, "", core.Place{Chat: "a"}, "final", &ran, &mu)
	final.Final = true
	final.Done = func(err error) { errs <- err }
	o.Enqueue(final)
	select {
	case err := <-errs:
		if err != nil {
			t.Fatalf("final op: %v, want success after retries", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("final op not delivered")
	}
	if n := len(a.Messages(core.Place{Chat: "a"})); n != 1 {
		t.Errorf("%d messages shown, want 1", n)
	}
}

func TestOutboxPermanentFailureIsNotRetried(t *testing.T) {
	a := fake.New("fake", core.Capabilities{})
	o := newOutbox(t, a, core.OutboxOptions{})
	a.FailNext("send", core.Permanent(errors.New("bad request")))
	errs := make(chan error, 1)
	var (
		mu  sync.Mutex
		ran []string
	)
	op := sendOp(a, core.OpSend, "", core.Place{Chat: "a"}, "x", &ran, &mu)
	op.Final = true
	op.Done = func(err error) { errs <- err }
	o.Enqueue(op)
	if err := <-errs; !core.IsPermanent(err) {
		t.Fatalf("got %v, want the permanent error", err)
	}
	if n := len(a.Ops()); n != 1 {
		t.Errorf("%d platform calls, want 1", n)
	}
}

// TestOutboxSharesGroupBudgetFairly streams five conversations of one group
// through a shared budget: nobody starves, nothing exceeds the limit.
func TestOutboxSharesGroupBudgetFairly(t *testing.T) {
	limit := core.Rate{N: 10, Per: time.Second}
	a := fake.New("fake", core.Capabilities{Limits: core.Limits{PerGroup: limit}})
	o := newOutbox(t, a, core.OutboxOptions{})
	var (
		mu  sync.Mutex
		ran []string
	)
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		for s := range 5 {
			place := core.Place{Chat: "group", Thread: fmt.Sprint(s)}
			o.Enqueue(sendOp(a, core.OpEdit, place.Thread, place, fmt.Sprintf("s%d v%d", s, i), &ran, &mu))
		}
		time.Sleep(5 * time.Millisecond) // the agents' pace, not synchronisation
	}
	drain(t, o, 10*time.Second)
	counts := map[string]int{}
	for _, op := range a.Ops() {
		if op.Err != nil {
			t.Fatalf("platform refused an op: %v", op.Err)
		}
		counts[op.Place.Thread]++
	}
	for s := range 5 {
		if n := counts[fmt.Sprint(s)]; n < 3 {
			t.Errorf("session %d got %d ops of ~%d: not a fair share", s, n, 20/5)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-deadline:
			t.Fatal("condition not met within 10s")
		case <-time.After(5 * time.Millisecond):
		}
	}
}
