package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/parley-chat/parley/core"
)

// PreparedEvent is an event encoded outside an engine's write transaction;
// inside it only its Seq (the key) and, for a reference, the message id
// are filled in. Both engines store events this way.
type PreparedEvent struct {
	Event core.Event // Seq zero; Message nil when Ref
	Ref   bool       // the event carries the message of its Append
	Body  []byte     // JSON of Event
}

// PrepareEvents fills defaults (Time now, Session session when empty) and
// encodes the events. With msgRef, events with a Message will carry the
// message their Append stores instead of the one given. The prepared
// events share nothing with the caller's.
func PrepareEvents(now time.Time, session core.SessionID, events []core.Event, msgRef bool) ([]PreparedEvent, error) {
	if len(events) == 0 {
		return nil, nil
	}
	out := make([]PreparedEvent, len(events))
	for i, e := range events {
		e.Seq = 0
		if e.Time.IsZero() {
			e.Time = now
		}
		if e.Session == "" {
			e.Session = session
		}
		ref := msgRef && e.Message != nil
		if ref {
			e.Message = nil
		} else if e.Message != nil {
			m := CloneMessage(*e.Message)
			e.Message = &m
		}
		e.Options = slices.Clone(e.Options)
		if e.Tool != nil {
			t := *e.Tool
			e.Tool = &t
		}
		body, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		out[i] = PreparedEvent{Event: e, Ref: ref, Body: body}
	}
	return out, nil
}

// FinishEvents returns the caller's copy of stored events: Seq set from
// seqs and, for references, a copy of msg each.
func FinishEvents(evs []PreparedEvent, seqs []uint64, msg *core.Message) []core.Event {
	if len(evs) == 0 {
		return nil
	}
	out := make([]core.Event, len(evs))
	for i, e := range evs {
		out[i] = e.Event
		out[i].Seq = seqs[i]
		if e.Ref && msg != nil {
			m := CloneMessage(*msg)
			out[i].Message = &m
		}
	}
	return out
}

// CloneMessage copies m so that the copy shares no slice with it.
func CloneMessage(m core.Message) core.Message {
	m.Attachments = slices.Clone(m.Attachments)
	return m
}
