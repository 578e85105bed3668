package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

type platformHealth map[core.AdapterName]core.PlatformStatus

func (p platformHealth) Platforms() map[core.AdapterName]core.PlatformStatus { return p }

// TestHealthSaysWhichPlatformIsDown: the probe stays 200 with a platform
// down (parley runs), and its body says which platform is down and why in
// PlatformState's words only, with when it went down and when it is tried
// again; the page itself is not listed.
func TestHealthSaysWhichPlatformIsDown(t *testing.T) {
	s := newStack(t)
	since := time.Date(2026, 11, 26, 5, 43, 18, 500_000_000, time.UTC)
	s.web.SetPlatformHealth(platformHealth{
		"telegram": {State: core.PlatformUnreachable, Since: since, NextRetry: since.Add(4 * time.Second)},
		"slack":    {Up: true, Since: since},
		"web":      {Up: true, Since: since},
	})
	st, body := s.get("/api/health")
	if st != http.StatusOK {
		t.Fatalf("status %d: %s", st, body)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"ok": true,
		"platforms": map[string]any{
			"telegram": map[string]any{"up": false, "error": "unreachable", "since": "2026-11-26T05:43:18Z", "next_retry": "2026-11-26T05:43:22Z"},
			"slack":    map[string]any{"up": true, "since": "2026-11-26T05:43:18Z"},
		},
	}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("health\n got %s\nwant %s", g, w)
	}
}

// The probe says which instance answered and the leases it holds to a
// request admitted to the API, and nothing of them to others (they name a
// host and a bot); a store that cannot list them leaves the list out and
// the probe healthy.
func TestHealthSaysInstanceAndLeases(t *testing.T) {
	s := newStack(t)
	fail, admitted := false, true
	s.web.SetCluster("host-7-0a0b0c0d", func(context.Context) ([]string, error) {
		if fail {
			return nil, errors.New("database down")
		}
		return []string{"telegram/poll/1"}, nil
	}, func(*http.Request) bool { return admitted })
	for _, tc := range []struct {
		fail, admitted bool
		want           map[string]any
	}{
		{false, true, map[string]any{"ok": true, "instance": "host-7-0a0b0c0d", "leases": []any{"telegram/poll/1"}}},
		{true, true, map[string]any{"ok": true, "instance": "host-7-0a0b0c0d"}},
		{false, false, map[string]any{"ok": true}},
	} {
		fail, admitted = tc.fail, tc.admitted
		st, body := s.get("/api/health")
		if st != http.StatusOK {
			t.Fatalf("status %d: %s", st, body)
		}
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if g, w := mustJSON(t, got), mustJSON(t, tc.want); g != w {
			t.Errorf("health (leases failing: %v)\n got %s\nwant %s", tc.fail, g, w)
		}
	}
}
