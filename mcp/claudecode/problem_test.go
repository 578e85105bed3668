//go:build linux

package claudecode

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
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

// TestMissingCommand: a missing command is a Problem whose fix names
// where the command is set: [agent]'s by default, else CommandKey.
func TestMissingCommand(t *testing.T) {
	for _, cmd := range []string{"parley-no-such-claude", filepath.Join(t.TempDir(), "claude")} {
		for key, want := range map[string]string{"": "set [agent] command (PARLEY_AGENT_COMMAND)",
			"[agents.cc] command (PARLEY_AGENTS_CC_COMMAND)": "set [agents.cc] command (PARLEY_AGENTS_CC_COMMAND)"} {
			r := NewRunner(Options{Command: cmd, CommandKey: key, StateDir: t.TempDir()})
			_, err := r.Start(t.Context(), "s", newUUID(), false)
			var pr *Problem
			if !errors.As(err, &pr) || !strings.Contains(pr.Cause, "is not installed") || !strings.Contains(pr.Cause, cmd) ||
				!strings.HasSuffix(pr.Fix, want) {
				t.Fatalf("%s, key %q: %v", cmd, key, err)
			}
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

func TestMissingWorkdir(t *testing.T) {
	cli := claudetest.CLI(t)
	dir := filepath.Join(t.TempDir(), "gone")
	r := NewRunner(Options{Command: cli, Workdir: dir, StateDir: t.TempDir()})
	_, err := r.Start(t.Context(), "s", newUUID(), false)
	var pr *Problem
	if !errors.As(err, &pr) || !strings.Contains(pr.Cause, "working directory") || !strings.Contains(pr.Fix, "PARLEY_AGENT_WORKDIR") {
		t.Fatalf("err %v", err)
	}
}

// TestCrashReported: claude killed from outside ends Events, Err says how,
// and its files are gone.
func TestCrashReported(t *testing.T) {
	h := newHarness(t, false)
	p := h.start(t, "s", newUUID(), false)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range p.Events() {
	}
	var pr *Problem
	if err := p.Err(); err == nil || errors.As(err, &pr) || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.opts.StateDir, "s.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pidfile left: %v", err)
	}
	if err := p.Send(t.Context(), "hi"); err == nil {
		t.Error("sent to a dead process")
	}
}
