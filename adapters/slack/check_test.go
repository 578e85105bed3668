package slack

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
)

func TestCheck(t *testing.T) {
	all := strings.Join(requiredScopes, ",")
	tests := []struct {
		name   string
		events bool
		setup  func(*fakeAPI)
		// want are words of the error; none means Check passes.
		want []string
		// down: the error is not a refusal of Slack's (core.Permanent)
		// and carries its fix apart (core.FixOf).
		down bool
	}{
		{name: "ready", setup: func(*fakeAPI) {}},
		{name: "events mode opens no connection", events: true, setup: func(f *fakeAPI) {
			f.on("apps.connections.open", func(url.Values) answer { return failAnswer("invalid_auth") })
		}},
		{name: "no scopes header: not checked", setup: func(f *fakeAPI) {
			f.on("auth.test", func(url.Values) answer { return okAnswer(map[string]any{"user_id": "UBOT", "user": "parley"}) })
		}},
		{name: "bad bot token", setup: func(f *fakeAPI) {
			f.on("auth.test", func(url.Values) answer { return failAnswer("invalid_auth") })
		}, want: []string{"invalid_auth", "[slack] bot_token", "OAuth & Permissions"}},
		{name: "missing scopes", setup: func(f *fakeAPI) {
			f.on("auth.test", func(url.Values) answer {
				a := okAnswer(map[string]any{"user_id": "UBOT", "user": "parley"})
				a.Header = map[string]string{"X-OAuth-Scopes": "chat:write, channels:read,groups:read,channels:history,groups:history,im:history,users:read,commands"}
				return a
			})
		}, want: []string{"lacks the scopes files:read, files:write, reactions:write", "Bot Token Scopes", "reinstall"}},
		{name: "unknown channel", setup: func(f *fakeAPI) {
			f.on("conversations.info", func(url.Values) answer { return failAnswer("channel_not_found") })
		}, want: []string{"channel C1 not found", "[slack] channel", "/invite @parley"}},
		{name: "not a member", setup: func(f *fakeAPI) {
			f.on("conversations.info", func(url.Values) answer {
				return okAnswer(map[string]any{"channel": map[string]any{"id": "C1", "name": "agents", "is_member": false}})
			})
		}, want: []string{"not a member of #agents", "/invite @parley"}},
		{name: "archived", setup: func(f *fakeAPI) {
			f.on("conversations.info", func(url.Values) answer {
				return okAnswer(map[string]any{"channel": map[string]any{"id": "C1", "name": "agents", "is_member": true, "is_archived": true}})
			})
		}, want: []string{"#agents (C1) is archived"}},
		{name: "app token without connections:write", setup: func(f *fakeAPI) {
			f.on("apps.connections.open", func(url.Values) answer { return failAnswer("missing_scope") })
		}, want: []string{"cannot open Socket Mode connections (missing_scope)", "connections:write", "[slack] app_token"}},
		{name: "Web API down", setup: func(f *fakeAPI) {
			f.on("auth.test", func(url.Values) answer { return answer{Status: 502, Body: "Bad Gateway"} })
		}, want: []string{"cannot reach the Web API"}, down: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI(t)
			api.on("auth.test", func(url.Values) answer {
				a := okAnswer(map[string]any{"user_id": "UBOT", "bot_id": "BBOT", "team_id": "T1", "user": "parley", "team": "Acme"})
				a.Header = map[string]string{"X-OAuth-Scopes": all + ",app_mentions:read"}
				return a
			})
			api.on("conversations.info", func(url.Values) answer {
				return okAnswer(map[string]any{"channel": map[string]any{"id": "C1", "name": "agents", "is_member": true}})
			})
			api.on("apps.connections.open", func(url.Values) answer { return okAnswer(map[string]any{"url": "wss://example.invalid/"}) })
			tt.setup(api)
			a := newTestAdapter(t, api, func(o *Options) {
				if tt.events {
					o.Events, o.SigningSecret = true, "s"
				}
			})
			a.self.Store(nil)
			err := a.Check(context.Background())
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if a.me().UserID != "UBOT" {
					t.Errorf("identity %+v not learnt", a.me())
				}
				return
			}
			if err == nil {
				t.Fatalf("Check passed, want an error saying %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			// The daemon retries a refusal slowly, a platform that is
			// down with backoff.
			if core.IsPermanent(err) == tt.down || tt.down && core.FixOf(err) == "" {
				t.Errorf("%q: permanent %v, fix %q", err, core.IsPermanent(err), core.FixOf(err))
			}
			if strings.Contains(err.Error(), "xoxb-test") || strings.Contains(err.Error(), "xapp-test") {
				t.Errorf("%q quotes a token", err)
			}
		})
	}
}
