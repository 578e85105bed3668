package web

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
)

// UiState on the event stream.
//
// By default (the UiState specification's protocol) a stream sends, after
// the events of a session, the session's whole state as its own message:
//
//	event: ui_state_updated
//	data: {"type":"ui_state_updated","v":"ui_state_v1","seq":N,"state":{…}}
//
// without an id (Last-Event-ID stays the last event's seq). States are
// coalesced: one per session changed, at most every stateEvery, so a burst
// of events costs one copy of the state rather than one per event (a whole
// state per event would make a long streamed session quadratic). seq is
// the seq of the last event the state includes; a client keeps the state
// with the highest seq.
//
// With ?ui=delta (parley's extension, which the page uses) each event
// message carries instead, as "ui", the uistate.UIUpdate the event produced,
// when the session's reducer was in memory as the event arrived; an event
// of a followed session without one means: reload the snapshot.

// stateEvery is the least time between two rounds of whole states on a
// stream.
const stateEvery = 200 * time.Millisecond

// uiOf is the delta an event message carries, in delta mode.
func (s *stream) uiOf(e core.Event) *uistate.UIUpdate {
	if !s.delta {
		s.noteState(e.Session)
		return nil
	}
	if u, ok := s.back.states.update(e.Seq); ok {
		return &u
	}
	return nil
}

// noteState marks a session whose state is to be sent.
func (s *stream) noteState(id core.SessionID) {
	if s.dirty == nil {
		s.dirty = map[core.SessionID]bool{}
	}
	s.dirty[id] = true
	if s.stateTimer == nil {
		s.stateTimer = time.NewTimer(stateEvery)
	}
}

// stateDue fires when whole states are to be sent; nil when none are.
func (s *stream) stateDue() <-chan time.Time {
	if s.stateTimer == nil {
		return nil
	}
	return s.stateTimer.C
}

// sendStates sends the state of every session marked since the last round.
func (s *stream) sendStates(ctx context.Context) error {
	if err := s.writeStates(ctx); err != nil {
		return err
	}
	return s.flush()
}

// writeStates buffers the state of every session marked since the last
// round.
func (s *stream) writeStates(ctx context.Context) error {
	s.stateTimer = nil
	ids := make([]core.SessionID, 0, len(s.dirty))
	for id := range s.dirty {
		ids = append(ids, id)
	}
	clear(s.dirty)
	slices.Sort(ids)
	for _, id := range ids {
		st, err := s.back.states.get(ctx, id)
		if err != nil {
			continue // a session the store no longer has: nothing to show
		}
		data, err := json.Marshal(uistate.Updated(st))
		if err != nil {
			return fmt.Errorf("web: encode the state of %s: %w", id, err)
		}
		fmt.Fprintf(&s.buf, "event: %s\ndata: %s\n\n", uistate.UIUpdateType, data)
	}
	return nil
}

// stopStates releases the timer of a stream that ends.
func (s *stream) stopStates() {
	if s.stateTimer != nil {
		s.stateTimer.Stop()
	}
}
