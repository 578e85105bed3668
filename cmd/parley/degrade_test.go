package main

// Degrade, don't die (issue 16): a platform that cannot be reached, or
// refuses parley's configuration, at start takes only itself down. The
// page, the API and MCP serve; /api/health says which platform is down and
// why; the platform is started again with backoff, and what was queued
// for it goes out once it is up.

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

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
	m := servetest.Start(t, cfg, []platform.Platform{probe})
	err := servetest.WaitDown(t, m, "probe", core.PlatformRefused)
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
	m := servetest.Start(t, cfg, platforms.All())
	servetest.WaitDown(t, m, "telegram", core.PlatformUnreachable)
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
