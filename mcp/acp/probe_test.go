//go:build linux

package acp

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/agent"
)

// probeOptions are a's options without the test's logger: the process's
// watcher logs its end after Probe returned, when the test may be over.
func probeOptions(t *testing.T, a *fakeAgent) Options {
	opts := a.options(t)
	opts.Logger = nil
	return opts
}

// TestProbe: the probe does initialize and nothing else, reports what the
// agent answered, and leaves no process behind.
func TestProbe(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{load: true, http: true, close: true})
	info, err := Probe(t.Context(), probeOptions(t, a))
	if err != nil {
		t.Fatal(err)
	}
	want := Info{Name: "Fake", Version: "1.0", ProtocolVersion: 1, LoadSession: true, Close: true, MCPHTTP: true,
		Login: "Run `fake login` in a terminal"}
	if info != want {
		t.Fatalf("info %+v, want %+v", info, want)
	}
	p := a.nextProc(t)
	select {
	case <-p.gone:
	case <-time.After(waitLong):
		t.Fatal("the agent's connection is still open after the probe")
	}
	if err := syscall.Kill(p.hello.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the agent process %d is still there after the probe: %v", p.hello.PID, err)
	}
	var methods []string
	p.mu.Lock()
	for _, m := range p.received {
		methods = append(methods, m.Method)
	}
	p.mu.Unlock()
	if strings.Join(methods, ",") != "initialize" {
		t.Fatalf("the probe sent %v, want initialize alone", methods)
	}

	b := newFakeAgent(t, fakeCaps{})
	info, err = Probe(t.Context(), probeOptions(t, b))
	if err != nil || info.LoadSession || info.MCPHTTP || info.Resume || info.Close {
		t.Fatalf("an agent offering nothing: %+v, %v", info, err)
	}
}

// TestProbeProblems: what the start of the agent would fail with, the
// probe fails with, and stops what it started.
func TestProbeProblems(t *testing.T) {
	// An agent that answers initialize with an error (JSON-RPC's
	// internal error), as a wrapper might whose agent fails to start.
	script := filepath.Join(t.TempDir(), "agent")
	err := os.WriteFile(script, []byte(`#!/bin/sh
read line
id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"no model configured"}}\n' "$id"
read line
`), 0o700)
	if err != nil {
		t.Fatal(err)
	}
	// An agent that exits after reading initialize, with a word on stderr.
	exits := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(exits, []byte("#!/bin/sh\nread line\necho 'agent: no such mode' >&2\nexit 3\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		caps  fakeCaps
		edit  func(*Options)
		cause string
		err   string
	}{
		{"missing", fakeCaps{}, func(o *Options) { o.Command = "/nonexistent/opencode" }, "is not installed", ""},
		{"exits", fakeCaps{}, func(o *Options) { o.Command = exits }, "exited as it started", "exit status 3"},
		{"silent", fakeCaps{silent: true}, func(o *Options) { o.CallTimeout = 200 * time.Millisecond }, "did not answer ACP's initialize within 200ms", ""},
		{"version", fakeCaps{version: 2}, nil, "speaks ACP version 2", ""},
		{"error", fakeCaps{}, func(o *Options) { o.Command = script }, "refused ACP's initialize", "no model configured"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newFakeAgent(t, tc.caps)
			opts := probeOptions(t, a)
			if tc.edit != nil {
				tc.edit(&opts)
			}
			_, err := Probe(t.Context(), opts)
			var pr *agent.Problem
			if !errors.As(err, &pr) || !strings.Contains(pr.Cause, tc.cause) || pr.Fix == "" {
				t.Fatalf("err %v", err)
			}
			if tc.err != "" && (pr.Err == nil || !strings.Contains(pr.Err.Error(), tc.err)) {
				t.Fatalf("err %v, want it to say %q", pr.Err, tc.err)
			}
			if _, err := os.Stat(filepath.Join(opts.StateDir, "agent.pid")); err == nil && tc.name != "missing" {
				// The pidfile goes with the process (agentproc).
				t.Fatalf("the agent's pidfile is left after the probe")
			}
		})
	}
}

// TestProbeOpenCode: the real OpenCode answers the probe with its name,
// its version and what the driver relies on.
func TestProbeOpenCode(t *testing.T) {
	oc := newOpenCode(t)
	oc.opts.Logger = nil
	info, err := Probe(t.Context(), oc.opts)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "OpenCode" || info.Version != OpenCodeVersion || info.ProtocolVersion != 1 ||
		!info.LoadSession || !info.MCPHTTP || !info.Resume || !info.Close {
		t.Fatalf("info %+v", info)
	}
	if reqs := oc.api.Requests(); len(reqs) != 0 {
		t.Fatalf("the probe reached the model: %+v", reqs)
	}
}
