package delivery_test

import (
	"context"
	"slices"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// stubAdapter is the least an adapter can be; binder makes it a Binder.
type stubAdapter struct{ name core.AdapterName }

func (a stubAdapter) Name() core.AdapterName                  { return a.name }
func (a stubAdapter) Capabilities() core.Capabilities         { return core.Capabilities{} }
func (a stubAdapter) Run(context.Context, core.Handler) error { return nil }
func (a stubAdapter) Send(context.Context, core.Place, core.OutMessage) (core.MessageRef, error) {
	return core.MessageRef{}, nil
}

type binderAdapter struct{ stubAdapter }

func (binderAdapter) Bind(context.Context, core.Session) (core.Binding, error) {
	return core.Binding{}, nil
}

func TestRouterTargets(t *testing.T) {
	tg := stubAdapter{"telegram"}
	sl := stubAdapter{"slack"}
	web := binderAdapter{stubAdapter{"web"}}
	bound := func(names ...core.AdapterName) map[core.AdapterName]core.Binding {
		m := map[core.AdapterName]core.Binding{}
		for _, n := range names {
			m[n] = core.Binding{Adapter: n, Place: core.Place{Chat: string(n)}}
		}
		return m
	}
	tests := []struct {
		name    string
		reflect bool
		session core.Session
		event   core.Event
		want    []core.AdapterName
	}{
		{
			name:    "UI origin: reply to the origin only",
			session: core.Session{LastInputOrigin: "slack", Bindings: bound("telegram", "slack")},
			event:   core.Event{Kind: core.EventAssistant, Origin: core.OriginMCP},
			want:    []core.AdapterName{"slack"},
		},
		{
			name:    "originless session: broadcast to every bound adapter and every binder",
			session: core.Session{Bindings: bound("telegram", "slack")},
			event:   core.Event{Kind: core.EventOutput, Origin: core.OriginMCP},
			want:    []core.AdapterName{"telegram", "slack", "web"},
		},
		{
			name:    "API as last origin is no UI origin: broadcast",
			session: core.Session{LastInputOrigin: core.OriginAPI, Bindings: bound("telegram")},
			event:   core.Event{Kind: core.EventAssistant},
			want:    []core.AdapterName{"telegram", "web"},
		},
		{
			name:    "source-only feedback with an originless session: dropped",
			session: core.Session{Bindings: bound("telegram")},
			event:   core.Event{Kind: core.EventNotice, Origin: core.OriginHook, SourceOnly: true},
			want:    nil,
		},
		{
			name:    "source-only feedback goes to its origin only",
			session: core.Session{LastInputOrigin: "slack", Bindings: bound("telegram", "slack")},
			event:   core.Event{Kind: core.EventNotice, Origin: "telegram", SourceOnly: true},
			want:    []core.AdapterName{"telegram"},
		},
		{
			name:    "origin adapter not bound (and cannot bind): broadcast",
			session: core.Session{LastInputOrigin: "slack", Bindings: bound("telegram")},
			event:   core.Event{Kind: core.EventAssistant},
			want:    []core.AdapterName{"telegram", "web"},
		},
		{
			name:    "origin adapter not registered: broadcast",
			session: core.Session{LastInputOrigin: "matrix", Bindings: bound("telegram", "matrix")},
			event:   core.Event{Kind: core.EventTurnComplete},
			want:    []core.AdapterName{"telegram", "web"},
		},
		{
			name:    "origin is a binder without binding yet: it binds lazily",
			session: core.Session{LastInputOrigin: "web", Bindings: bound("telegram")},
			event:   core.Event{Kind: core.EventOutput},
			want:    []core.AdapterName{"web"},
		},
		{
			name:    "person's input is not echoed without reflection",
			session: core.Session{LastInputOrigin: "telegram", Bindings: bound("telegram", "slack")},
			event:   core.Event{Kind: core.EventHumanMessage, Origin: "telegram"},
			want:    nil,
		},
		{
			name:    "person's input reflected to the other platforms",
			reflect: true,
			session: core.Session{LastInputOrigin: "telegram", Bindings: bound("telegram", "slack")},
			event:   core.Event{Kind: core.EventHumanMessage, Origin: "telegram"},
			want:    []core.AdapterName{"slack", "web"},
		},
		{
			name:    "input from the API is shown everywhere",
			session: core.Session{Bindings: bound("slack")},
			event:   core.Event{Kind: core.EventHumanMessage, Origin: core.OriginAPI},
			want:    []core.AdapterName{"slack", "web"},
		},
		{
			name:    "queued marker is never routed",
			session: core.Session{Bindings: bound("slack")},
			event:   core.Event{Kind: core.EventQueued, Origin: core.OriginAPI},
			want:    nil,
		},
		{
			name:    "title changes go to bound adapters only",
			session: core.Session{LastInputOrigin: "telegram", Bindings: bound("telegram", "slack")},
			event:   core.Event{Kind: core.EventSessionUpdated},
			want:    []core.AdapterName{"telegram", "slack"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := delivery.NewRouter(tg, sl, web)
			r.Reflect = tt.reflect
			got := r.Targets(tt.session, tt.event)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Targets = %v, want %v", got, tt.want)
			}
		})
	}
}
