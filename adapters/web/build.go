package web

import (
	"context"
	"errors"
	"fmt"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
)

// logPage is how many events one store read returns.
const logPage = 512

// build makes a session's UiState from the store.
//
// The event log normally reaches back to the session's creation: the state
// is then the reduction of the session's logged events, exactly what a
// reducer fed live would hold. The log is bounded, though, and an old
// session's beginning may be gone. Then the state is seeded from what the
// store keeps for good: the session's title and status and its inbox
// messages whose events were dropped, turned into synthetic events (Seq 0,
// so they leave the state's Seq alone), before the remaining logged events
// are applied. What the inbox does not keep is lost from the old part of the
// timeline: live outputs, notices, tool activity, the options of questions
// no longer open, and which question an old answer answered (it shows as a
// user message).
func build(ctx context.Context, store core.Store, id core.SessionID) (uistate.UIState, error) {
	events, complete, err := sessionEvents(ctx, store, id)
	if err != nil {
		return uistate.UIState{}, err
	}
	if complete {
		return uistate.ReduceAll(uistate.NewUIState(id), events), nil
	}
	// Read the session and its inbox before the log again: every message
	// the inbox shows then either still has its event in the log read
	// after, or is older than all of the session's logged events.
	sess, err := store.Session(ctx, id)
	if err != nil {
		return uistate.UIState{}, fmt.Errorf("web: session %s: %w", id, err)
	}
	msgs, err := store.Inbox(ctx, id, "", 0)
	if err != nil {
		return uistate.UIState{}, fmt.Errorf("web: inbox of %s: %w", id, err)
	}
	if events, _, err = sessionEvents(ctx, store, id); err != nil {
		return uistate.UIState{}, err
	}
	return uistate.ReduceAll(seed(sess, msgs, events), events), nil
}

// seed is the state of a session before its logged events, from the
// session record and the inbox messages whose events are gone.
func seed(sess core.Session, msgs []core.Message, logged []core.Event) uistate.UIState {
	st := uistate.NewUIState(sess.ID)
	// The output item of a turn is "output:<turn>": start at the turn the
	// first logged output or turn completion belongs to.
	st.Turn = sess.Turn
	for _, e := range logged {
		if e.Kind == core.EventOutput || e.Kind == core.EventTurnComplete {
			st.Turn = e.Turn
			break
		}
	}
	kept := map[core.MessageID]bool{}
	for _, e := range logged {
		if e.Message != nil {
			kept[e.Message.ID] = true
		}
	}
	open := map[string]core.Question{}
	for _, q := range sess.Questions {
		open[q.Text] = q
	}
	synth := []core.Event{{Kind: core.EventSessionCreated, Session: sess.ID, Time: sess.Created,
		Title: sess.Title, Status: sess.Status}}
	for i := range msgs {
		if kept[msgs[i].ID] {
			continue
		}
		m := msgs[i]
		e := core.Event{Session: sess.ID, Time: m.Time, Origin: m.Origin, Message: &m}
		switch {
		case m.Role == core.RoleAssistant && m.Mime == core.MimeQuestion:
			e.Kind = core.EventQuestion
			if q, ok := open[m.Content]; ok {
				e.QuestionID, e.Options = q.ID, q.Options
			}
		case m.Role == core.RoleAssistant:
			e.Kind = core.EventAssistant
		case m.Role == core.RoleSystem:
			e.Kind = core.EventNotice
		case m.Mime == core.MimeControl && m.Content == "cancel":
			e.Kind = core.EventCancel
		default:
			e.Kind = core.EventHumanMessage
		}
		synth = append(synth, e)
	}
	return uistate.ReduceAll(st, synth)
}

// sessionEvents returns the logged events of one session, oldest first, and
// whether they start with its creation.
func sessionEvents(ctx context.Context, store core.Store, id core.SessionID) ([]core.Event, bool, error) {
	var out []core.Event
	complete := false
	err := scanLog(ctx, store, 0, func(e core.Event) error {
		if e.Session == id {
			if e.Kind == core.EventSessionCreated && len(out) == 0 {
				complete = true
			}
			out = append(out, e)
		}
		return nil
	}, nil)
	if err != nil {
		return nil, false, fmt.Errorf("web: events of %s: %w", id, err)
	}
	return out, complete, nil
}

// scanLog calls fn for every logged event after seq after, in pages, up to
// the newest. When the log no longer holds the next event it calls
// truncated (if not nil) with the seq it skips to and carries on from the
// oldest event kept.
func scanLog(ctx context.Context, store core.Store, after uint64, fn func(core.Event) error, truncated func(from, to uint64) error) error {
	for {
		evs, err := store.EventsSince(ctx, after, logPage)
		if errors.Is(err, core.ErrEventsTruncated) {
			to, err := resumePoint(ctx, store, after)
			if err != nil {
				return err
			}
			if truncated != nil {
				if err := truncated(after, to); err != nil {
					return err
				}
			}
			after = to
			continue
		}
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
			after = e.Seq
		}
		if len(evs) < logPage {
			return nil
		}
	}
}

// resumePoint finds, for an after the log is truncated past, the seq to read
// on from: one before the oldest event kept. core.Store tells only whether a
// read is truncated, so it bisects between after (truncated) and the newest
// seq (never truncated).
func resumePoint(ctx context.Context, store core.Store, after uint64) (uint64, error) {
	hi, err := store.LastEventSeq(ctx)
	if err != nil {
		return 0, err
	}
	lo := after
	for hi > lo+1 {
		mid := lo + (hi-lo)/2
		_, err := store.EventsSince(ctx, mid, 1)
		switch {
		case errors.Is(err, core.ErrEventsTruncated):
			lo = mid
		case err != nil:
			return 0, err
		default:
			hi = mid
		}
	}
	return max(hi, after+1), nil
}
