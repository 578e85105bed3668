package commands

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

// The agent's output: its messages (appended as the assistant's, routed to
// people), the live output of the current turn, the end of its turn and its
// questions; and notices, the system's feedback to a person (an adapter's
// "🎤 Transcribing…", a pairing code), which are events, not inbox messages.

// assistantPost appends the agent's message; it is routed to people.
func (s *Service) assistantPost(ctx context.Context, cmd core.Command) (core.Result, error) {
	if err := s.checkContent(cmd.Text, cmd.Attachments); err != nil {
		return core.Result{}, err
	}
	return s.inSession(ctx, cmd, func(sess core.Session) (change, error) {
		mime := cmd.Mime
		if mime == "" {
			mime = core.MimeMarkdown
		}
		msg := core.Message{Session: sess.ID, Role: core.RoleAssistant, Actor: cmd.Actor, Origin: cmd.Origin,
			Mime: mime, Content: cmd.Text, Attachments: cmd.Attachments}
		return change{
			op:     "assistant post",
			msg:    &msg,
			events: []core.Event{{Kind: core.EventAssistant, Session: sess.ID, Origin: cmd.Origin, Message: &msg}},
		}, nil
	})
}

// outputUpdate replaces the live output of the current turn.
func (s *Service) outputUpdate(ctx context.Context, cmd core.Command) (core.Result, error) {
	if len(cmd.Text) > s.opts.MaxContent*4 {
		return core.Result{}, invalid("the output is %d bytes, more than the limit of %d", len(cmd.Text), s.opts.MaxContent*4)
	}
	if !utf8.ValidString(cmd.Text) {
		return core.Result{}, invalid("the output is not valid UTF-8")
	}
	return s.update(ctx, cmd, func(ss *core.Session) []core.Event {
		events := []core.Event{{Kind: core.EventOutput, Session: ss.ID, Origin: cmd.Origin, Text: cmd.Text, Turn: ss.Turn, Final: cmd.Final}}
		if ss.Status == core.StatusIdle {
			events = append(events, statusEvent(*ss, core.StatusWorking, cmd.Origin))
			ss.Status = core.StatusWorking
		}
		ss.Output, ss.OutputFinal = cmd.Text, cmd.Final
		return events
	})
}

// yieldTurn completes the agent's turn: the live output becomes final (if
// the agent did not say so itself) and the session waits for the person.
func (s *Service) yieldTurn(ctx context.Context, cmd core.Command) (core.Result, error) {
	return s.update(ctx, cmd, func(ss *core.Session) []core.Event {
		var events []core.Event
		if ss.Output != "" && !ss.OutputFinal {
			events = append(events, core.Event{Kind: core.EventOutput, Session: ss.ID, Origin: cmd.Origin, Text: ss.Output, Turn: ss.Turn, Final: true})
		}
		events = append(events, core.Event{Kind: core.EventTurnComplete, Session: ss.ID, Origin: cmd.Origin, Turn: ss.Turn})
		if ss.Status != core.StatusIdle {
			events = append(events, statusEvent(*ss, core.StatusIdle, cmd.Origin))
		}
		ss.Turn++
		ss.Output, ss.OutputFinal = "", false
		ss.Status = core.StatusIdle
		return events
	})
}

// ask shows a question with options; the answer arrives as an Answer command.
func (s *Service) ask(ctx context.Context, cmd core.Command) (core.Result, error) {
	if err := s.checkContent(cmd.Text, nil); err != nil {
		return core.Result{}, err
	}
	if len(cmd.Options) == 0 || len(cmd.Options) > 20 {
		return core.Result{}, invalid("a question needs 1 to 20 options, got %d", len(cmd.Options))
	}
	for i, o := range cmd.Options {
		if strings.TrimSpace(o) == "" || len(o) > 200 {
			return core.Result{}, invalid("option %d must be 1 to 200 bytes", i+1)
		}
	}
	return s.inSession(ctx, cmd, func(sess core.Session) (change, error) {
		qid := cmd.QuestionID
		if qid == "" {
			var b [8]byte
			_, _ = rand.Read(b[:])
			qid = hex.EncodeToString(b[:])
		}
		if len(qid) > 32 {
			return change{}, invalid("the question id is longer than 32 bytes")
		}
		q := core.Question{ID: qid, Text: cmd.Text, Options: append([]string(nil), cmd.Options...), Asked: s.opts.Now()}
		msg := core.Message{Session: sess.ID, Role: core.RoleAssistant, Origin: cmd.Origin, Mime: core.MimeQuestion, Content: cmd.Text}
		events := []core.Event{{Kind: core.EventQuestion, Session: sess.ID, Origin: cmd.Origin, Message: &msg, QuestionID: qid, Options: q.Options}}
		if sess.Status != core.StatusWaiting {
			events = append(events, statusEvent(sess, core.StatusWaiting, cmd.Origin))
		}
		return change{
			op:  "ask",
			msg: &msg,
			update: func(ss *core.Session) {
				ss.Questions = append(removeQuestion(ss.Questions, qid), q)
				ss.Status = core.StatusWaiting
			},
			events: events,
		}, nil
	})
}

// notice publishes feedback for the person who caused it. Notices are not
// inbox messages (the agent has no use for "🎤 Transcribing…"), only events;
// they take no session lock, as they change no session.
func (s *Service) notice(ctx context.Context, cmd core.Command) (core.Result, error) {
	if err := s.checkContent(cmd.Text, nil); err != nil {
		return core.Result{}, err
	}
	lt := cmd.Lifetime
	if lt == "" {
		lt = core.LifetimeNextNotice
	}
	e := core.Event{Kind: core.EventNotice, Origin: cmd.Origin, Lifetime: lt, SourceOnly: true}
	sess, err := s.resolve(ctx, cmd)
	switch {
	case errors.Is(err, core.ErrNotFound) && cmd.Session == "" && cmd.Origin.IsUI() && !cmd.Place.IsZero():
		// No session lives there (a forum's General topic, a private chat
		// before its first message): the notice is addressed to the
		// place, and delivered durably through the outbox all the same.
		place := cmd.Place
		e.Place = &place
	case err != nil:
		return core.Result{}, err
	}
	e.Session = sess.ID
	e.Message = &core.Message{Session: sess.ID, Role: core.RoleSystem, Origin: cmd.Origin, Mime: core.MimeMarkdown, Content: cmd.Text, Time: s.opts.Now()}
	events, err := s.store.AppendEvents(ctx, e)
	if err != nil {
		return core.Result{}, fmt.Errorf("commands: notice: %w", err)
	}
	s.publish(events)
	return core.Result{Session: sess.ID}, nil
}
