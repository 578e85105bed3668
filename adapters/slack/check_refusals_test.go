package slack

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
)

// TestCheckRefusalsAndOutages: the answers of Check that TestCheck's
// table leaves out. One missing scope is named in the singular; a
// conversations.info that Slack refuses is permanent and one that does
// not answer is not, both with the fix apart; apps.connections.open not
// answering is an outage too.
func TestCheckRefusalsAndOutages(t *testing.T) {
	down := func(url.Values) answer { return answer{Status: 502, Body: "Bad Gateway"} }
	tests := []struct {
		name      string
		method    string
		answer    func(url.Values) answer
		want      string
		permanent bool
		fix       string // a word of the fix; "" when the error carries none
	}{
		{"one scope missing", "auth.test", func(url.Values) answer {
			a := okAnswer(map[string]any{"user_id": "UBOT", "user": "parley"})
			a.Header = map[string]string{"X-OAuth-Scopes": strings.Join(without(requiredScopes, "files:write"), ",")}
			return a
		}, "lacks the scope files:write: add it under OAuth & Permissions", true, ""},
		{"conversations.info refused", "conversations.info", func(url.Values) answer { return failAnswer("missing_scope") },
			"conversations.info C1", true, "channels:read and groups:read"},
		{"conversations.info unanswered", "conversations.info", down, "conversations.info C1", false, "network"},
		{"apps.connections.open unanswered", "apps.connections.open", down, "apps.connections.open", false, "keeps serving without Slack"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI(t)
			api.on("auth.test", func(url.Values) answer {
				a := okAnswer(map[string]any{"user_id": "UBOT", "bot_id": "BBOT", "team_id": "T1", "user": "parley", "team": "Acme"})
				a.Header = map[string]string{"X-OAuth-Scopes": strings.Join(requiredScopes, ",")}
				return a
			})
			api.on("conversations.info", func(url.Values) answer {
				return okAnswer(map[string]any{"channel": map[string]any{"id": "C1", "name": "agents", "is_member": true}})
			})
			api.on("apps.connections.open", func(url.Values) answer { return okAnswer(map[string]any{"url": "wss://example.invalid/"}) })
			api.on(tt.method, tt.answer)
			a := newTestAdapter(t, api)
			err := a.Check(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check: %v, want an error saying %q", err, tt.want)
			}
			if core.IsPermanent(err) != tt.permanent {
				t.Errorf("%q: permanent %v, want %v", err, core.IsPermanent(err), tt.permanent)
			}
			if fix := core.FixOf(err); tt.fix != "" && !strings.Contains(fix, tt.fix) {
				t.Errorf("%q: fix %q does not say %q", err, fix, tt.fix)
			}
		})
	}
}

// without is list less drop.
func without(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}
