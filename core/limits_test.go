package core_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

func TestRateUnlimited(t *testing.T) {
	tests := []struct {
		name      string
		rate      core.Rate
		unlimited bool
	}{
		{"zero", core.Rate{}, true},
		{"no window", core.Rate{N: 20}, true},
		{"no count", core.Rate{Per: time.Minute}, true},
		{"negative count", core.Rate{N: -1, Per: time.Minute}, true},
		{"negative window", core.Rate{N: 20, Per: -time.Minute}, true},
		{"telegram per group", core.Rate{N: 20, Per: time.Minute}, false},
		{"one per nanosecond", core.Rate{N: 1, Per: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rate.Unlimited(); got != tt.unlimited {
				t.Errorf("%+v.Unlimited() = %v, want %v", tt.rate, got, tt.unlimited)
			}
		})
	}
}

func TestLimitApplies(t *testing.T) {
	allKinds := []core.OpKind{core.OpSend, core.OpDelete, core.OpEdit, core.OpRename, core.OpTyping}
	tests := []struct {
		name  string
		limit core.Limit
		kinds []core.OpKind // the kinds it applies to; the others it does not
	}{
		{"every kind", core.Limit{Scope: core.ScopeAccount, Rate: core.Rate{N: 30, Per: time.Second}}, allKinds},
		{"named kinds", core.Limit{Scope: core.ScopeGroup, Kinds: []core.OpKind{core.OpSend, core.OpEdit}}, []core.OpKind{core.OpSend, core.OpEdit}},
		{"one kind", core.Limit{Kinds: []core.OpKind{core.OpTyping}}, []core.OpKind{core.OpTyping}},
		// A limit on methods counts calls, never operations.
		{"methods", core.Limit{Scope: core.ScopeAccount, Methods: []string{"chat.update"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range allKinds {
				want := false
				for _, a := range tt.kinds {
					want = want || a == k
				}
				if got := tt.limit.Applies(k); got != want {
					t.Errorf("Applies(%v) = %v, want %v", k, got, want)
				}
			}
		})
	}
}

func TestLimitNames(t *testing.T) {
	stream := core.Limit{Scope: core.ScopeAccount, Methods: []string{"chat.appendStream", "chat.stopStream"}}
	tests := []struct {
		name   string
		limit  core.Limit
		method string
		want   bool
	}{
		{"named", stream, "chat.appendStream", true},
		{"the other named", stream, "chat.stopStream", true},
		{"not named", stream, "chat.postMessage", false},
		{"names are exact", stream, "chat.appendstream", false},
		{"empty method", stream, "", false},
		{"a limit on kinds names no method", core.Limit{Kinds: []core.OpKind{core.OpEdit}}, "chat.update", false},
		{"a limit on everything names no method", core.Limit{}, "chat.update", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.limit.Names(tt.method); got != tt.want {
				t.Errorf("Names(%q) = %v, want %v", tt.method, got, tt.want)
			}
		})
	}
}

func TestScopeString(t *testing.T) {
	tests := []struct {
		scope core.Scope
		want  string
	}{
		{core.ScopeUnspecified, "unspecified"},
		{core.ScopeConversation, "conversation"},
		{core.ScopeGroup, "group"},
		{core.ScopeAccount, "account"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.scope.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if got := logged(t, "scope", tt.scope); got != tt.want {
				t.Errorf("logged as %q, want %q", got, tt.want)
			}
		})
	}
}

// logged returns how a JSON log line shows v as attribute key: the name
// a LogValuer gives, where JSON would otherwise show a number.
func logged(t *testing.T, key string, v any) any {
	t.Helper()
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("op", key, v)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	return line[key]
}
