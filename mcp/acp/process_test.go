package acp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/parley-chat/parley/mcp/agent"
)

// logRecorder is a slog.Handler keeping the messages logged, so a test
// can tell what was logged before a call returned. It does not write to
// the testing.T: a log after the test ended must fail an assertion, not
// panic the test binary.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Message)
	r.mu.Unlock()
	return nil
}

// logged says whether any of msgs was logged so far.
func (r *logRecorder) logged(msgs ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.msgs, func(m string) bool { return slices.Contains(msgs, m) })
}

// TestStartEndedBeforeInitialize: an agent whose stdin is closed before
// initialize is written (the write fails with EPIPE) is a Problem saying
// it exited as it started, with its exit status and the end of its stderr,
// and its watcher logged before Start returned. The agent is a script
// that says why on stderr, closes its stdin and tells the test through a
// FIFO; the driver writes initialize only once the test read that: after
// the exit ("exits": the FIFO's writer closes as the process exits), or
// while the process still holds its stdout ("closes its input"), so its
// output has not ended when the write fails.
func TestStartEndedBeforeInitialize(t *testing.T) {
	cases := []struct{ name, script, status string }{
		{"exits", `echo "fake: no model configured" >&2
exec 0<&- 3>"$FIFO"
exit 3
`, "exit status 3"},
		{"closes its input", `exec 0<&-
echo "fake: no model configured" >&2
echo closed >"$FIFO"
exec sleep 600
`, "signal: terminated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(dir, "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			script := filepath.Join(dir, "agent")
			if err := os.WriteFile(script, []byte("#!/bin/sh\n"+tc.script), 0o700); err != nil {
				t.Fatal(err)
			}
			rec := &logRecorder{}
			a := newFakeAgent(t, fakeCaps{})
			opts := a.options(t)
			opts.Command, opts.ExtraEnv = script, []string{"FIFO=" + fifo}
			opts.Logger = slog.New(rec)
			d := New(opts)
			defer d.Close()
			d.started = func(int) {
				// Opening blocks until the script opens its end.
				if f, err := os.Open(fifo); err == nil {
					io.ReadAll(f)
					f.Close()
				}
			}
			_, err := d.Start(t.Context(), agent.StartRequest{Session: "s1"})
			var pr *agent.Problem
			if !errors.As(err, &pr) || !strings.Contains(pr.Cause, "exited as it started") || pr.Err == nil ||
				!strings.Contains(pr.Err.Error(), tc.status) || !strings.Contains(pr.Err.Error(), "fake: no model configured") {
				t.Fatalf("err %v", err)
			}
			if !rec.logged("acp: the agent process stopped") {
				t.Fatal("Start returned before the process's watcher logged")
			}
		})
	}
}

// TestCloseWaitsForWatcher: once Close returned, the watcher of the
// process logged, whether Close stopped it or it had crashed.
func TestCloseWaitsForWatcher(t *testing.T) {
	for _, crash := range []bool{false, true} {
		rec := &logRecorder{}
		a := newFakeAgent(t, fakeCaps{})
		d, _ := newDriver(t, a, func(o *Options) { o.Logger = slog.New(rec) })
		start(t, d, agent.StartRequest{Session: "s1"})
		fp := a.nextProc(t)
		if crash {
			d.mu.Lock()
			p := d.cur
			d.mu.Unlock()
			fp.kill(t)
			<-p.proc.Done()
		}
		d.Close()
		if !rec.logged("acp: the agent process stopped", "acp: the agent process exited") {
			t.Fatalf("crash=%v: Close returned before the process's watcher logged", crash)
		}
	}
}
