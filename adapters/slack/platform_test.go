package slack

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/platform"
)

// TestPlatformBuild: the Platform builds the adapter from its section; in
// events mode it mounts the request handler at events_path, which then
// answers Slack's signed url_verification; in Socket Mode it mounts
// nothing; a section New refuses is an error naming what to set.
func TestPlatformBuild(t *testing.T) {
	routes := map[string]http.Handler{}
	deps := platform.Deps{Authorizer: nobody, Logger: slog.New(slog.DiscardHandler),
		Route: func(path string, h http.Handler) { routes[path] = h }}
	build := func(c Config) error {
		t.Helper()
		s := Platform.Section().(*Config)
		*s = c
		a, err := Platform.New(context.Background(), s, deps)
		if err == nil && a.Name() != Name {
			t.Errorf("adapter named %q, want %q", a.Name(), Name)
		}
		return err
	}

	events := DefaultConfig()
	events.BotToken, events.Channel, events.Mode, events.SigningSecret, events.EventsPath = "xoxb-test", "C1", ModeEvents, secret, "/hooks/slack"
	if err := build(events); err != nil {
		t.Fatal(err)
	}
	h := routes["/hooks/slack"]
	if len(routes) != 1 || h == nil {
		t.Fatalf("routes %v, want the events handler at /hooks/slack", routes)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, signed(`{"type":"url_verification","token":"x","challenge":"ch4llenge"}`, "application/json", time.Now(), secret))
	if w.Code != http.StatusOK || w.Body.String() != "ch4llenge" {
		t.Errorf("url_verification through the mounted handler: %d %q, want 200 ch4llenge", w.Code, w.Body.String())
	}

	socket := DefaultConfig()
	socket.BotToken, socket.Channel, socket.AppToken = "xoxb-test", "C1", "xapp-test"
	clear(routes)
	if err := build(socket); err != nil {
		t.Fatal(err)
	}
	if len(routes) != 0 {
		t.Errorf("Socket Mode mounted %v, want nothing", routes)
	}

	socket.AppToken = ""
	if err := build(socket); err == nil || !strings.Contains(err.Error(), "PARLEY_SLACK_APP_TOKEN") {
		t.Errorf("Socket Mode without an app token: %v, want an error naming PARLEY_SLACK_APP_TOKEN", err)
	}
}
