package main

// Degrade, don't die (issue 16): a platform that cannot be reached, or
// refuses parley's configuration, at start takes only itself down. The
// page, the API and MCP serve; /api/health says which platform is down and
// why; the platform is started again with backoff, and what was queued
// for it goes out once it is up.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/core"
)

// startServing opens and runs a Main on cfg (and table, when set, else
// the built-in platforms) and stops it at the end of the test.
func startServing(t *testing.T, cfg config.Config, table []platform.Platform) *Main {
	t.Helper()
	if table == nil {
		table = platforms()
	}
	return serveMain(t, &Main{Config: cfg, Platforms: table})
}

// healthBody is GET /api/health's answer.
type healthBody struct {
	OK        bool                      `json:"ok"`
	Platforms map[string]platformReport `json:"platforms"`
}

// waitHealth polls /api/health until cond holds of its 200 answer (a 503
// says parley is still starting), and returns that answer with its raw
// body.
func waitHealth(t *testing.T, addr, what string, cond func(healthBody) bool) (healthBody, string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/api/health")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			var h healthBody
			if err := json.Unmarshal(raw, &h); err != nil {
				t.Fatalf("/api/health: %v: %s", err, raw)
			}
			if cond(h) {
				return h, string(raw)
			}
		case http.StatusServiceUnavailable: // the page attaches a moment after Run starts
		default:
			t.Fatalf("/api/health answered %d: %s", resp.StatusCode, raw)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/health never said %s; last: %s", what, raw)
		}
		time.Sleep(20 * time.Millisecond) // polling an HTTP endpoint, as a probe does
	}
}

// waitDown waits until the platform is reported down in state, and
// returns the error that keeps it down, as the log has it.
func waitDown(t *testing.T, m *Main, name string, state core.PlatformState) error {
	t.Helper()
	h, raw := waitHealth(t, m.Addr(), name+" "+string(state), func(h healthBody) bool {
		p, ok := h.Platforms[name]
		return ok && !p.Up && p.Error == state
	})
	// The body gives whole seconds: a retry a second or less after the
	// platform went down can show the same second.
	if p := h.Platforms[name]; !h.OK || p.Since.IsZero() || p.NextRetry.IsZero() || p.NextRetry.Before(p.Since) {
		t.Errorf("health: %s", raw)
	}
	err := m.Daemon().PlatformError(core.AdapterName(name))
	if err == nil {
		t.Fatalf("%s down without an error", name)
	}
	if strings.Contains(raw, err.Error()) {
		t.Errorf("/api/health, which needs no token, quotes the error: %s", raw)
	}
	return err
}

// TestTelegramDownAtStartDegrades: with the Bot API down when parley
// starts, parley serves anyway: the page and the API answer, /api/health
// says Telegram is unreachable and when it is tried again, and an answer
// posted meanwhile waits. When the Bot API is back, Telegram is started,
// the waiting answer is delivered, and a message from Telegram reaches the
// session and its answer goes back.
func TestTelegramDownAtStartDegrades(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	srv.InjectFaults(telegramtest.Faults{Exempt: []string{}}) // getMe and getUpdates fail too
	srv.SetOutage(true)
	st := newTGStackOn(t, srv)
	st.start()
	addr := st.m.Addr()

	err := waitDown(t, st.m, "telegram", core.PlatformUnreachable)
	if !strings.Contains(err.Error(), "cannot reach the Bot API") || core.FixOf(err) == "" {
		t.Errorf("error %v, fix %q", err, core.FixOf(err))
	}
	// Metrics say so too.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `parley_platform_up{adapter="telegram"} 0`) {
		t.Errorf("/metrics lacks telegram down")
	}
	// The page and the API answer.
	resp, err = http.Get("http://" + addr + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the page: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Post("http://"+addr+"/api/chat", "application/json", strings.NewReader(`{"text":"from the page"}`))
	if err != nil {
		t.Fatal(err)
	}
	var posted struct {
		Session string `json:"session_id"`
	}
	json.NewDecoder(resp.Body).Decode(&posted)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || posted.Session == "" {
		t.Fatalf("POST /api/chat: %d %+v", resp.StatusCode, posted)
	}
	// MCP serves: the agent answers the page's session.
	st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": posted.Session, "content": "answered while Telegram was down"}, nil)
	for _, c := range srv.Calls() {
		if c.Method == "sendMessage" || c.Method == "createForumTopic" {
			t.Fatalf("a down Bot API was sent %s", c.Method)
		}
	}

	srv.SetOutage(false)
	waitHealth(t, addr, "telegram up", func(h healthBody) bool { return h.Platforms["telegram"].Up })
	if err := st.m.Daemon().PlatformError("telegram"); err != nil {
		t.Errorf("up, with error %v", err)
	}
	// What waited is delivered: the page's session gets its topic, with
	// the answer.
	st.await("the answer posted while Telegram was down", func() bool {
		for _, tp := range srv.Topics(st.forum) {
			if len(shown(srv, st.forum, tp.ID, "answered while Telegram was down")) == 1 {
				return true
			}
		}
		return false
	})
	// Telegram's input reaches a session, and the answer goes back.
	topic := st.newTopic("work")
	session, _ := st.ask(topic, "hello from Telegram", "")
	st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "hello from the agent"}, nil)
	st.showing(topic, "hello from the agent")
}

// TestPlatformCheckFailureKeepsServing: a platform whose check fails at
// start does not stop parley serve: Open succeeds, the API answers, the
// failure is reported, and the platform's check is tried again.
func TestPlatformCheckFailureKeepsServing(t *testing.T) {
	checks := 0
	probe := testPlatform("probe", probeSection{on: true},
		func(context.Context, probeSection, platform.Deps) (core.Adapter, error) {
			return probeAdapter{Adapter: fake.New("probe", core.Capabilities{}), checks: &checks, checkErr: core.Permanent(errors.New("probe: token refused"))}, nil
		})
	cfg := config.Default()
	cfg.DataDir, cfg.HTTP.Listen = t.TempDir(), "127.0.0.1:0"
	m := startServing(t, cfg, []platform.Platform{probe})
	err := waitDown(t, m, "probe", core.PlatformRefused)
	if !strings.Contains(err.Error(), "probe: token refused") {
		t.Errorf("error %v", err)
	}
	resp, err := http.Get("http://" + m.Addr() + "/api/sessions")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/sessions with a platform down: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestDoctorSaysWhichPlatformTheRunningParleyLacks: doctor asks a running
// parley's /api/health, and a platform it reports down is a finding, with
// when it is tried again and a fix.
func TestDoctorSaysWhichPlatformTheRunningParleyLacks(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	cfg := config.Default()
	cfg.DataDir, cfg.HTTP.Listen = t.TempDir(), "127.0.0.1:0"
	telegramConfig(&cfg).Token, telegramConfig(&cfg).APIURL, telegramConfig(&cfg).ChatID, telegramConfig(&cfg).AllowedUsers = "1:x", closed, -1, []int64{1}
	m := startServing(t, cfg, nil)
	waitDown(t, m, "telegram", core.PlatformUnreachable)
	_, fs := runDoctor(t, "PARLEY_DATA_DIR="+cfg.DataDir, "PARLEY_HTTP_LISTEN="+m.Addr(), "PARLEY_TELEGRAM_TOKEN=1:x",
		"PARLEY_TELEGRAM_API_URL="+closed, "PARLEY_TELEGRAM_CHAT_ID=-1", "PARLEY_TELEGRAM_ALLOWED_USERS=1")
	var reported *finding
	for _, f := range only(fs, "telegram") {
		if strings.Contains(f.Problem, "reports telegram down") {
			reported = &f
		}
	}
	if reported == nil {
		t.Fatalf("no finding of the running parley's telegram: %+v", fs)
	}
	for _, w := range []string{"(unreachable)", "it tries again at"} {
		if !strings.Contains(reported.Problem, w) {
			t.Errorf("problem %q does not say %q", reported.Problem, w)
		}
	}
	if reported.OK || !strings.Contains(reported.Fix, "reaches telegram") {
		t.Errorf("finding %+v", reported)
	}
	for _, f := range fs {
		if !f.OK && f.Fix == "" {
			t.Errorf("a failed finding without a fix: %+v", f)
		}
	}
}
