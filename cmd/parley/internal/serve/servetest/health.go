package servetest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/core"
)

// Health is GET /api/health's answer, as a probe reads it.
type Health struct {
	OK        bool                      `json:"ok"`
	Platforms map[string]PlatformHealth `json:"platforms"`
}

// PlatformHealth is one platform's entry in Health.
type PlatformHealth struct {
	Up        bool               `json:"up"`
	Error     core.PlatformState `json:"error"`
	Since     time.Time          `json:"since"`
	NextRetry time.Time          `json:"next_retry"`
}

// WaitHealth polls /api/health at addr until cond holds of its 200 answer
// (a 503 says parley is still starting), and returns that answer with its
// raw body.
func WaitHealth(tb testing.TB, addr, what string, cond func(Health) bool) (Health, string) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/api/health")
		if err != nil {
			tb.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			var h Health
			if err := json.Unmarshal(raw, &h); err != nil {
				tb.Fatalf("/api/health: %v: %s", err, raw)
			}
			if cond(h) {
				return h, string(raw)
			}
		case http.StatusServiceUnavailable: // the page attaches a moment after Run starts
		default:
			tb.Fatalf("/api/health answered %d: %s", resp.StatusCode, raw)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("/api/health never said %s; last: %s", what, raw)
		}
		time.Sleep(20 * time.Millisecond) // polling an HTTP endpoint, as a probe does
	}
}

// WaitDown waits until m reports the platform down in state, checks what
// the probe says of it (since when, the next retry, and never the error's
// text: the probe needs no token), and returns the error that keeps it
// down, as the log has it.
func WaitDown(tb testing.TB, m *serve.Main, name string, state core.PlatformState) error {
	tb.Helper()
	h, raw := WaitHealth(tb, m.Addr(), name+" "+string(state), func(h Health) bool {
		p, ok := h.Platforms[name]
		return ok && !p.Up && p.Error == state
	})
	// The body gives whole seconds: a retry a second or less after the
	// platform went down can show the same second.
	if p := h.Platforms[name]; !h.OK || p.Since.IsZero() || p.NextRetry.IsZero() || p.NextRetry.Before(p.Since) {
		tb.Errorf("health: %s", raw)
	}
	err := m.Daemon().PlatformError(core.AdapterName(name))
	if err == nil {
		tb.Fatalf("%s down without an error", name)
	}
	if strings.Contains(raw, err.Error()) {
		tb.Errorf("/api/health, which needs no token, quotes the error: %s", raw)
	}
	return err
}
