package commands

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/parley-chat/parley/core"
)

// Control: sessions are created, renamed, cancelled and closed by people
// (a platform's /new, /cancel, /close, the page's buttons) and by agents.
// A person's /cancel and /close are inbox messages for the agent to read;
// the agent's own are recorded as the system's, and are no human input.

// ReservationPrefix starts the name of every store cursor that reserves a
// session id for a platform update creating a session. Its value is the
// session id, whose time says when it was made; like a dedup key it only
// needs to outlive the platform's redeliveries, so the daemon prunes these
// cursors with the dedup keys (bolt.PruneOptions.CursorPrefixes).
const ReservationPrefix = "create\x00"

// createSession makes a session. A platform update that creates a session
// (Telegram's /new) is deduplicated through a reservation cursor written
// before the session: a redelivery finds the reserved id and returns (or
// completes) that session instead of creating a second one.
func (s *Service) createSession(ctx context.Context, cmd core.Command) (core.Result, error) {
	agent, err := s.agentName(cmd.Agent)
	if err != nil {
		return core.Result{}, err
	}
	cmd.Agent = agent
	now := s.opts.Now()
	id := s.ids.New(now)
	dup := false
	if key := dedupKey(cmd); key != "" {
		cursor := ReservationPrefix + key
		prev, err := s.store.Cursor(ctx, cursor)
		if err != nil {
			return core.Result{}, fmt.Errorf("commands: create session: %w", err)
		}
		if prev != "" {
			id, dup = core.SessionID(prev), true
		} else if err := s.store.SetCursor(ctx, cursor, string(id)); err != nil {
			return core.Result{}, fmt.Errorf("commands: create session: %w", err)
		}
	}
	if dup {
		if sess, err := s.store.Session(ctx, id); err == nil {
			return core.Result{Session: sess.ID, Duplicate: true}, nil
		}
	}
	sess, events, err := s.create(ctx, id, cmd, now)
	if err != nil {
		return core.Result{}, err
	}
	s.publish(events)
	return core.Result{Session: sess.ID}, nil
}

func (s *Service) create(ctx context.Context, id core.SessionID, cmd core.Command, now time.Time) (core.Session, []core.Event, error) {
	title := strings.TrimSpace(cmd.Title)
	if title == "" {
		title = placeholderTitle(now)
	}
	if len(title) > 256 {
		return core.Session{}, nil, invalid("the title is longer than 256 bytes")
	}
	sess := core.Session{ID: id, Title: title, Placeholder: placeholderOf(cmd, title), Status: core.StatusIdle, Created: now, Updated: now,
		Agent: cmd.Agent}
	if cmd.Origin.IsUI() && !cmd.Place.IsZero() {
		sess.Bindings = map[core.AdapterName]core.Binding{
			cmd.Origin.Adapter(): {Adapter: cmd.Origin.Adapter(), Place: cmd.Place},
		}
	}
	ev := core.Event{Kind: core.EventSessionCreated, Session: id, Origin: cmd.Origin, Status: sess.Status, Title: title}
	sess, events, err := s.store.CreateSession(ctx, sess, ev)
	if err != nil {
		return core.Session{}, nil, fmt.Errorf("commands: create session: %w", err)
	}
	return sess, events, nil
}

// control appends a person's /cancel or /close for the agent to read; close
// also closes the session, and then withdraws its open questions.
func (s *Service) control(ctx context.Context, cmd core.Command) (core.Result, error) {
	return s.inSession(ctx, cmd, func(sess core.Session) (change, error) {
		word := "cancel"
		if cmd.Kind == core.Close {
			word = "close"
		}
		// The agent's own control commands are recorded as the system's, and
		// are no human input: agents are not notified of what they did.
		byAgent := cmd.Origin == core.OriginMCP
		role := core.RoleUser
		if byAgent {
			role = core.RoleSystem
		}
		msg := core.Message{Session: sess.ID, Role: role, Actor: cmd.Actor, Origin: cmd.Origin,
			Mime: core.MimeControl, Content: word, Ref: cmd.Ref}
		var events []core.Event
		if !byAgent {
			kind := core.EventCancel
			if cmd.Kind == core.Close {
				kind = core.EventHumanMessage
			}
			events = append(events, core.Event{Kind: kind, Session: sess.ID, Origin: cmd.Origin, Message: &msg})
		}
		c := change{op: word, msg: &msg, update: func(ss *core.Session) { s.noteInput(ss, cmd) }}
		if cmd.Kind == core.Close {
			events = append(events, statusEvent(sess, core.StatusClosed, cmd.Origin))
			c.update = func(ss *core.Session) {
				s.noteInput(ss, cmd)
				ss.Status = core.StatusClosed
				ss.Questions = nil
			}
			c.after = func() { s.withdrawAll(ctx, sess) }
		}
		c.events, c.cleanup = events, inputCleanup(sess.ID, cmd, s.opts.Now())
		return c, nil
	})
}

// rename sets the session's title.
func (s *Service) rename(ctx context.Context, cmd core.Command) (core.Result, error) {
	title := strings.TrimSpace(cmd.Title)
	if title == "" {
		return core.Result{}, invalid("the title is empty")
	}
	if len(title) > 256 {
		return core.Result{}, invalid("the title is longer than 256 bytes")
	}
	return s.update(ctx, cmd, func(ss *core.Session) []core.Event {
		ss.Title = title
		return []core.Event{statusEvent(*ss, ss.Status, cmd.Origin)}
	})
}
