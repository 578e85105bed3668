package claudecode

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestInvalidAPIKey(t *testing.T) {
	h := newHarness(t, false, "ANTHROPIC_API_KEY=sk-ant-wrong")
	p := h.start(t, "s", newUUID(), false)
	if err := p.Send(t.Context(), "hi"); err != nil {
		t.Fatal(err)
	}
	var retries []APIRetry
	for e := range p.Events() {
		if r, ok := e.(APIRetry); ok {
			retries = append(retries, r)
		}
	}
	var pr *Problem
	if !errors.As(p.Err(), &pr) || !strings.Contains(pr.Cause, "401") || !strings.Contains(pr.Fix, "ANTHROPIC_API_KEY") {
		t.Fatalf("err %v", p.Err())
	}
	if len(retries) == 0 || retries[0].Status != 401 {
		t.Fatalf("retries %+v", retries)
	}
}

func TestNotLoggedIn(t *testing.T) {
	h := newHarness(t, false)
	var env []string
	for _, kv := range h.opts.ExtraEnv {
		if !strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") {
			env = append(env, kv)
		}
	}
	h.opts.ExtraEnv = env
	h.runner = NewRunner(h.opts)
	p := h.start(t, "s", newUUID(), false)
	if err := p.Send(t.Context(), "hi"); err != nil {
		t.Fatal(err)
	}
	for range p.Events() {
	}
	var pr *Problem
	if !errors.As(p.Err(), &pr) || !strings.Contains(pr.Cause, "not logged in") {
		t.Fatalf("err %v", p.Err())
	}
}

func TestMissingCommand(t *testing.T) {
	for _, cmd := range []string{"parley-no-such-claude", filepath.Join(t.TempDir(), "claude")} {
		r := NewRunner(Options{Command: cmd, StateDir: t.TempDir()})
		_, err := r.Start(t.Context(), "s", newUUID(), false)
		var pr *Problem
		if !errors.As(err, &pr) || !strings.Contains(pr.Cause, "is not installed") || !strings.Contains(pr.Cause, cmd) ||
			!strings.Contains(pr.Fix, "PARLEY_AGENT_COMMAND") {
			t.Fatalf("%s: %v", cmd, err)
		}
	}
}

// TestAPIRetry: an overloaded API is retried by Claude Code (the events say
// so) and is no Problem of the driver's; the turn ends once it answers.
func TestAPIRetry(t *testing.T) {
	h := newHarness(t, false)
	h.api.Fail(529)
	p := h.start(t, "s", newUUID(), false)
	if err := p.Send(t.Context(), "hi"); err != nil {
		t.Fatal(err)
	}
	got := until(t, p, func(e Event) bool { _, ok := e.(APIRetry); return ok })
	if r := got[len(got)-1].(APIRetry); r.Status != 529 || r.Attempt != 1 || r.Delay <= 0 {
		t.Fatalf("retry %+v", r)
	}
	h.api.Fail(0)
	res := only[Result](until(t, p, isResult))
	if res[0].IsError || res[0].Text != "OK" {
		t.Fatalf("result %+v", res)
	}
}
