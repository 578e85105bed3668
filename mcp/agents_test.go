package mcp

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// lineRecorder sends the info lines about agents to a channel.
type lineRecorder struct{ lines chan string }

func (l lineRecorder) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= slog.LevelInfo }
func (l lineRecorder) WithAttrs([]slog.Attr) slog.Handler             { return l }
func (l lineRecorder) WithGroup(string) slog.Handler                  { return l }
func (l lineRecorder) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "agent ") {
		return nil
	}
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "mcp_session", "connected_for", "listened_for": // vary
		default:
			line += " " + a.String()
		}
		return true
	})
	l.lines <- line
	return nil
}

func (l lineRecorder) next(tb testing.TB) string {
	tb.Helper()
	select {
	case line := <-l.lines:
		return line
	case <-time.After(waitFor):
		tb.Fatal("no log line about an agent")
		return ""
	}
}

// TestAgentsConnectAndGo: an operator sees one info line when an agent
// connects and one when it goes, for both protocol generations, and the
// count of agents follows.
func TestAgentsConnectAndGo(t *testing.T) {
	rec := lineRecorder{lines: make(chan string, 16)}
	st := newStack(t, t.TempDir(), stackOptions{logger: slog.New(rec)})
	id := st.createSession("s")

	legacy := mustDial(t, st.url, connOptions{})
	if got, want := rec.next(t), "agent connected client=parley-test version=1 protocol=2025-11-25"; got != want {
		t.Errorf("logged %q, want %q", got, want)
	}
	legacy.subscribe(t, SessionInboxURI(id))
	if n := st.srv.Agents(); n != 1 {
		t.Errorf("%d agents, want 1", n)
	}
	if err := legacy.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.next(t), "agent disconnected client=parley-test 1"; got != want {
		t.Errorf("logged %q, want %q", got, want)
	}

	modern := mustDial(t, st.url, connOptions{modern: true})
	modern.subscribe(t, SessionInboxURI(id))
	if got, want := rec.next(t), "agent listening inboxes=["+SessionInboxURI(id)+"]"; got != want {
		t.Errorf("logged %q, want %q", got, want)
	}
	if n := st.srv.Agents(); n != 1 {
		t.Errorf("%d agents, want 1", n)
	}
	if err := modern.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.next(t), "agent stopped listening inboxes=["+SessionInboxURI(id)+"]"; got != want {
		t.Errorf("logged %q, want %q", got, want)
	}
	if n := st.srv.Agents(); n != 0 {
		t.Errorf("%d agents after both went, want 0", n)
	}
}
