package core_test

import (
	"testing"

	"github.com/parley-chat/parley/core"
)

func TestAuthorizerFunc(t *testing.T) {
	// An allow-list of one person on one platform.
	var a core.Authorizer = core.AuthorizerFunc(func(origin core.Origin, actor core.Actor) bool {
		return origin == "telegram" && actor.ID == "42"
	})
	tests := []struct {
		name   string
		origin core.Origin
		actor  core.Actor
		want   bool
	}{
		{"listed", "telegram", core.Actor{ID: "42", Name: "Ada"}, true},
		{"another person", "telegram", core.Actor{ID: "43"}, false},
		{"same id elsewhere", "slack", core.Actor{ID: "42"}, false},
		{"nobody", core.OriginNone, core.Actor{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := a.Authorized(tt.origin, tt.actor); got != tt.want {
				t.Errorf("Authorized(%q, %+v) = %v, want %v", tt.origin, tt.actor, got, tt.want)
			}
		})
	}
}
