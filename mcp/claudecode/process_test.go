//go:build linux

package claudecode

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
)

// turnTimeout bounds one turn of the real CLI against the instant fake;
// turns take well under a second here, much longer only on a starved box.
const turnTimeout = 60 * time.Second

type harness struct {
	api    *claudetest.API
	runner *Runner
	opts   Options
}

func newHarness(t *testing.T, ask bool, extraEnv ...string) *harness {
	t.Helper()
	cli := claudetest.CLI(t)
	api := claudetest.NewAPI(t)
	opts := Options{
		Command:        cli,
		Workdir:        t.TempDir(),
		Env:            []string{},
		ExtraEnv:       append(claudetest.Env(t, api.URL), extraEnv...),
		StateDir:       t.TempDir(),
		AskPermissions: ask,
		Logger:         slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	return &harness{api: api, runner: NewRunner(opts), opts: opts}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func (h *harness) start(t *testing.T, key, conv string, resume bool) *Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), turnTimeout)
	defer cancel()
	p, err := h.runner.Start(ctx, key, conv, resume)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { p.Stop() })
	return p
}

// until reads events until one satisfies stop, and returns them all.
func until(t *testing.T, p *Process, stop func(Event) bool) []Event {
	t.Helper()
	var got []Event
	timeout := time.After(turnTimeout)
	for {
		select {
		case e, ok := <-p.Events():
			if !ok {
				t.Fatalf("events closed (err %v) after %s", p.Err(), formatEvents(got))
			}
			got = append(got, e)
			if stop(e) {
				return got
			}
		case <-timeout:
			t.Fatalf("no end after %s", formatEvents(got))
		}
	}
}

func isResult(e Event) bool { _, ok := e.(Result); return ok }

func isPermission(e Event) bool { _, ok := e.(PermissionRequest); return ok }

// turn sends text and reads the turn's events up to its Result.
func turn(t *testing.T, p *Process, text string) []Event {
	t.Helper()
	if err := p.Send(t.Context(), text); err != nil {
		t.Fatalf("send: %v", err)
	}
	return until(t, p, isResult)
}

func TestMessageAnswered(t *testing.T) {
	h := newHarness(t, false)
	h.api.Say(claudetest.Chunks(0, "Hel", "lo ", "world"))
	conv := newUUID()
	p := h.start(t, "s1", conv, false)
	if _, err := os.Stat(filepath.Join(h.opts.StateDir, "s1.pid")); err != nil {
		t.Fatalf("no pidfile: %v", err)
	}
	events := turn(t, p, "hi there")

	var streamed strings.Builder
	for _, d := range only[TextDelta](events) {
		streamed.WriteString(d.Text)
	}
	texts := only[Text](events)
	res := only[Result](events)
	inits := only[Init](events)
	if streamed.String() != "Hello world" || len(texts) != 1 || texts[0].Text != "Hello world" {
		t.Fatalf("streamed %q, texts %+v", streamed.String(), texts)
	}
	if len(inits) != 1 || inits[0].SessionID != conv || len(res) != 1 || res[0].Subtype != "success" ||
		res[0].Text != "Hello world" || res[0].IsError {
		t.Fatalf("init %+v result %+v", inits, res)
	}
	reqs := h.api.ModelRequests()
	if len(reqs) != 1 || !strings.Contains(strings.Join(reqs[0].Texts("user"), "\n"), "hi there") {
		t.Fatalf("the model was not sent the message: %+v", reqs)
	}
	if err := p.Stop(); err != nil || p.Err() != nil {
		t.Fatalf("stop: %v, err %v", err, p.Err())
	}
	for range p.Events() {
		// Events closes after Stop; unread events may be dropped.
	}
	for _, f := range []string{filepath.Join(h.opts.StateDir, "s1.pid"), filepath.Join(h.opts.StateDir, "tmp", "s1")} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after Stop: %v", f, err)
		}
	}
}

// TestPermission answers a Bash call that needs permission (touch writes)
// in the three ways people can.
func TestPermission(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decision Decision
	}{
		{"allow", Decision{Allow: true}},
		{"deny", Decision{Message: "The person denied this call; do not retry it."}},
		{"abort", Decision{Message: "The person denied this call and ended the turn.", Interrupt: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, true)
			h.api.Say(claudetest.Bash("touch f", "Create f"))
			// After the call the model answers "done" (an abort asks it
			// nothing more: the next turn gets it).
			h.api.Say(claudetest.Text("done"))
			p := h.start(t, "s", newUUID(), false)
			if err := p.Send(t.Context(), "make a file f"); err != nil {
				t.Fatal(err)
			}
			before := until(t, p, isPermission)
			req := before[len(before)-1].(PermissionRequest)
			use := only[ToolUse](before)
			if len(use) != 1 || use[0].Name != "Bash" || req.ToolUseID != use[0].ID || req.ToolName != "Bash" ||
				req.Description != "Create f" || !strings.Contains(string(req.Input), "touch f") {
				t.Fatalf("request %+v after %s", req, formatEvents(before))
			}
			if err := p.Answer(req.RequestID, tc.decision); err != nil {
				t.Fatal(err)
			}
			if err := p.Answer(req.RequestID, tc.decision); err == nil {
				t.Error("a request was answered twice")
			}
			events := until(t, p, isResult)
			results := only[ToolResult](events)
			res := only[Result](events)[0]
			_, statErr := os.Stat(filepath.Join(h.opts.Workdir, "f"))
			reqs := h.api.ModelRequests()
			if len(results) != 1 || results[0].ToolUseID != req.ToolUseID {
				t.Fatalf("results %+v", results)
			}
			switch tc.name {
			case "allow":
				if statErr != nil || results[0].IsError || results[0].ExitCode == nil || *results[0].ExitCode != 0 ||
					res.Text != "done" || len(reqs) != 2 {
					t.Fatalf("allowed: file %v, result %+v, turn %+v, %d requests", statErr, results[0], res, len(reqs))
				}
			case "deny":
				tr := reqs[len(reqs)-1].ToolResults()
				if statErr == nil || !results[0].IsError || results[0].Stderr != tc.decision.Message ||
					res.Text != "done" || len(tr) != 1 || !tr[0].IsError || tr[0].Text != tc.decision.Message {
					t.Fatalf("denied: file %v, result %+v, turn %+v, model saw %+v", statErr, results[0], res, tr)
				}
			case "abort":
				if statErr == nil || !results[0].IsError || res.TerminalReason != "aborted_tools" || len(reqs) != 1 {
					t.Fatalf("aborted: file %v, result %+v, turn %+v, %d requests", statErr, results[0], res, len(reqs))
				}
				// The process lives on for the next turn.
				if r := only[Result](turn(t, p, "again")); r[0].Text != "done" {
					t.Fatalf("turn after an abort: %+v", r)
				}
			}
		})
	}
}

func TestInterruptMidStream(t *testing.T) {
	h := newHarness(t, false)
	pieces := make([]string, 200)
	for i := range pieces {
		pieces[i] = fmt.Sprintf("w%d ", i)
	}
	h.api.Say(claudetest.Chunks(20*time.Millisecond, pieces...))
	p := h.start(t, "s", newUUID(), false)
	if err := p.Send(t.Context(), "tell a long story"); err != nil {
		t.Fatal(err)
	}
	until(t, p, func(e Event) bool { _, ok := e.(TextDelta); return ok })
	ctx, cancel := context.WithTimeout(t.Context(), turnTimeout)
	defer cancel()
	began := time.Now()
	if err := p.Interrupt(ctx); err != nil {
		t.Fatal(err)
	}
	events := until(t, p, isResult)
	res := only[Result](events)[0]
	t.Logf("interrupt acknowledged and turn ended in %v", time.Since(began))
	if res.TerminalReason != "aborted_streaming" || len(only[TextDelta](events)) >= len(pieces)-1 {
		t.Fatalf("result %+v after %d deltas", res, len(only[TextDelta](events)))
	}
	h.api.Say(claudetest.Text("short"))
	if r := only[Result](turn(t, p, "shorter please")); r[0].Text != "short" {
		t.Fatalf("turn after an interrupt: %+v", r)
	}
}

func TestResume(t *testing.T) {
	h := newHarness(t, false)
	conv := newUUID()
	h.api.Say(claudetest.Text("the first answer"))
	p := h.start(t, "s", conv, false)
	turn(t, p, "the first question")
	p.Stop()

	h.api.Say(claudetest.Text("the second answer"))
	p = h.start(t, "s", conv, true)
	events := turn(t, p, "the second question")
	if inits := only[Init](events); len(inits) != 1 || inits[0].SessionID != conv {
		t.Fatalf("resumed as %+v", inits)
	}
	reqs := h.api.ModelRequests()
	last := reqs[len(reqs)-1]
	users := strings.Join(last.Texts("user"), "\n")
	assistant := strings.Join(last.Texts("assistant"), "\n")
	if !strings.Contains(users, "the first question") || !strings.Contains(users, "the second question") ||
		!strings.Contains(assistant, "the first answer") {
		t.Fatalf("the model did not see the earlier turn: user %q, assistant %q", users, assistant)
	}
}

func TestResumeUnknown(t *testing.T) {
	h := newHarness(t, false)
	_, err := h.runner.Start(t.Context(), "s", newUUID(), true)
	if !errors.Is(err, ErrNoConversation) {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.opts.StateDir, "s.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pidfile left: %v", err)
	}
	// The same key starts afresh at once.
	h.start(t, "s", newUUID(), false)
}

// TestEnvStripsClaudeVariables: the agent gets neither the variables of a
// Claude Code parley runs in nor parley's own configuration (its [http]
// token would open the whole API to it); the operator's [agent] env is
// given as written.
func TestEnvStripsClaudeVariables(t *testing.T) {
	r := NewRunner(Options{
		Env: []string{"PATH=/bin", "CLAUDECODE=1", "CLAUDE_CODE_ENTRYPOINT=cli", "TMPDIR=/tmp", "HOME=/h",
			markerVar + "=inherited", "PARLEY_HTTP_TOKEN=s3cret", "PARLEY_CONFIG=/etc/parley.toml"},
		ExtraEnv: []string{"CLAUDE_CODE_USE_BEDROCK=1", "TMPDIR=/elsewhere", markerVar + "=set"},
		StateDir: "/state",
	})
	got := strings.Join(r.env("/state/tmp/k", markerVar+"=m"), " ")
	want := "PATH=/bin HOME=/h CLAUDE_CODE_USE_BEDROCK=1 TMPDIR=/state/tmp/k " + markerVar + "=m"
	if got != want {
		t.Fatalf("env %q, want %q", got, want)
	}
}

func TestStartRejectsBadKeys(t *testing.T) {
	r := NewRunner(Options{StateDir: t.TempDir()})
	for _, key := range []string{"", "../x", "a/b", ".hidden"} {
		if _, err := r.Start(t.Context(), key, newUUID(), false); err == nil {
			t.Errorf("key %q accepted", key)
		}
	}
}

// TestSendWhileTurnRuns: a turn sent while another streams is queued by
// Claude Code and runs next, with the first in its history; an interrupt
// with no turn running is acknowledged and changes nothing.
func TestSendWhileTurnRuns(t *testing.T) {
	h := newHarness(t, false)
	h.api.Say(claudetest.Chunks(50*time.Millisecond, "a", "b", "c", "d"))
	h.api.Say(claudetest.Text("second"))
	p := h.start(t, "s", newUUID(), false)
	if err := p.Send(t.Context(), "one"); err != nil {
		t.Fatal(err)
	}
	until(t, p, func(e Event) bool { _, ok := e.(TextDelta); return ok })
	if err := p.Send(t.Context(), "two"); err != nil {
		t.Fatal(err)
	}
	first := only[Result](until(t, p, isResult))
	second := only[Result](until(t, p, isResult))
	if first[0].Text != "abcd" || second[0].Text != "second" {
		t.Fatalf("results %+v then %+v", first, second)
	}
	reqs := h.api.ModelRequests()
	if len(reqs) != 2 || !strings.Contains(strings.Join(reqs[1].Texts("user"), "\n"), "one") {
		t.Fatalf("requests %+v", reqs)
	}
	ctx, cancel := context.WithTimeout(t.Context(), turnTimeout)
	defer cancel()
	if err := p.Interrupt(ctx); err != nil {
		t.Fatalf("idle interrupt: %v", err)
	}
	h.api.Say(claudetest.Text("third"))
	if r := only[Result](turn(t, p, "three")); r[0].Text != "third" {
		t.Fatalf("after an idle interrupt: %+v", r)
	}
}

// TestInterruptWhileAsking: an interrupt while a permission prompt waits
// withdraws the prompt (PermissionCancel); the call does not run and the
// prompt can no longer be answered.
func TestInterruptWhileAsking(t *testing.T) {
	h := newHarness(t, true)
	h.api.Say(claudetest.Bash("touch f", "Create f"))
	p := h.start(t, "s", newUUID(), false)
	if err := p.Send(t.Context(), "make a file f"); err != nil {
		t.Fatal(err)
	}
	got := until(t, p, isPermission)
	req := got[len(got)-1].(PermissionRequest)
	ctx, cancel := context.WithTimeout(t.Context(), turnTimeout)
	defer cancel()
	if err := p.Interrupt(ctx); err != nil {
		t.Fatal(err)
	}
	events := until(t, p, isResult)
	cancels := only[PermissionCancel](events)
	if len(cancels) != 1 || cancels[0].RequestID != req.RequestID {
		t.Fatalf("cancels %+v in %s", cancels, formatEvents(events))
	}
	if err := p.Answer(req.RequestID, Decision{Allow: true}); err == nil {
		t.Error("a withdrawn prompt was answered")
	}
	if r := only[Result](events)[0]; r.TerminalReason != "aborted_tools" {
		t.Fatalf("result %+v", r)
	}
	if _, err := os.Stat(filepath.Join(h.opts.Workdir, "f")); err == nil {
		t.Fatal("the call ran")
	}
}
