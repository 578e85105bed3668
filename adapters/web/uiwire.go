package web

import (
	"context"

	"github.com/parley-chat/parley/core"
)

// uiOf is what an SSE message carries of its session's UiState.
//
// By default it is the whole state in a ui_state_updated envelope, as the
// UiState specification has it. The state is the session's current one,
// which may already include events after e: its envelope's seq says which
// (a client keeps the state with the highest seq, and may skip the states
// of later messages it already has). Following the whole state costs a copy
// of the session's items per event.
//
// With ?ui=delta (parley's extension, which the page uses) it is the
// core.UiUpdate the event produced, when the session's reducer was in
// memory as the event arrived, and nil otherwise: the client reloads the
// snapshot.
func (s *stream) uiOf(ctx context.Context, e core.Event) any {
	if s.delta {
		if u, ok := s.back.states.update(e.Seq); ok {
			return &u
		}
		return nil
	}
	st, err := s.back.states.get(ctx, e.Session)
	if err != nil {
		return nil
	}
	env := core.Updated(st)
	return &env
}
