package commands

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// People's input: what a person writes, answers or asks about reaches the
// agent as an inbox message (or, for /status, a notice back to them). Input
// marks the session working, records where the person wrote from
// (LastInputOrigin, the binding there) and a ledger row for their message,
// which the next input deletes.

// approvalHint is what a person is told when what they typed reads as a
// decision while an approval is open: it went to the agent as a message.
const approvalHint = "🔐 That went to the agent as a message. A tool call is approved only on its question: " +
	"its buttons, or where it has none, a reply to it or a reaction with the option's number."

// sendMessage appends a person's message to the inbox. A number answers
// the newest open question when that is a plain one (ui.ask); while it is
// an approval, nothing typed decides it: the message goes to the agent,
// and a person whose message reads as a decision is told how approvals
// are answered.
func (s *Service) sendMessage(ctx context.Context, cmd core.Command) (core.Result, error) {
	if err := s.checkContent(cmd.Text, cmd.Attachments); err != nil {
		return core.Result{}, err
	}
	hint := false
	res, err := s.inSession(ctx, cmd, func(sess core.Session) (change, error) {
		if q, opt, ok := numberedAnswer(sess, cmd.Text); ok {
			a := cmd
			a.QuestionID, a.Option, a.Text = q.ID, opt, ""
			return s.answerChange(sess, a)
		}
		hint = cmd.Origin.IsUI() && readsAsDecision(sess, cmd.Text)
		mime := cmd.Mime
		if mime == "" {
			mime = core.MimeMarkdown
		}
		msg := core.Message{Session: sess.ID, Role: core.RoleUser, Actor: cmd.Actor, Origin: cmd.Origin,
			Mime: mime, Content: cmd.Text, Attachments: cmd.Attachments, Ref: cmd.Ref}
		queued := sess.Status == core.StatusWorking
		title, retitle := autoTitle(sess, cmd.Text)
		if retitle {
			sess.Title = title
		}
		events := []core.Event{{Kind: core.EventHumanMessage, Session: sess.ID, Origin: cmd.Origin, Message: &msg}}
		if queued {
			events = append(events, core.Event{Kind: core.EventQueued, Session: sess.ID, Origin: cmd.Origin, Message: &msg})
		}
		if sess.Status != core.StatusWorking || retitle {
			events = append(events, statusEvent(sess, core.StatusWorking, cmd.Origin))
		}
		return change{
			op:      "append",
			msg:     &msg,
			cleanup: inputCleanup(sess.ID, cmd, s.opts.Now()),
			update: func(ss *core.Session) {
				s.noteInput(ss, cmd)
				ss.Status = core.StatusWorking
				if retitle {
					ss.Title = title
				}
			},
			events: events,
			queued: queued,
		}, nil
	})
	if err == nil && hint && !res.Duplicate {
		// Said after the message is stored, and only to where the person
		// wrote (a source-only notice): a crash in between loses a hint,
		// never the message.
		if _, err := s.notice(ctx, core.Command{Kind: core.Notice, Session: res.Session, Origin: cmd.Origin, Text: approvalHint}); err != nil {
			s.log.Warn("telling the person how approvals are answered failed", "session", res.Session, "err", err)
		}
	}
	return res, err
}

// startAt starts a session at the place a person wrote from when none lives
// there yet, or returns the one a concurrent message just started.
func (s *Service) startAt(ctx context.Context, cmd core.Command) (core.Session, error) {
	h := fnv.New32a()
	h.Write([]byte(string(cmd.Origin) + "\x00" + cmd.Place.Chat + "\x00" + cmd.Place.Thread))
	m := &s.placeLocks[h.Sum32()%uint32(len(s.placeLocks))]
	m.Lock()
	defer m.Unlock()
	if sess, err := s.resolve(ctx, cmd); !errors.Is(err, core.ErrNotFound) {
		return sess, err
	}
	now := s.opts.Now()
	sess, events, err := s.create(ctx, s.ids.New(now), core.Command{Origin: cmd.Origin, Place: cmd.Place}, now)
	if err != nil {
		return core.Session{}, err
	}
	s.publish(events)
	return sess, nil
}

// noteInput records where a person wrote from: the session's last input
// origin (UI origins only) and, for a place not yet bound, the binding.
func (s *Service) noteInput(ss *core.Session, cmd core.Command) {
	if !cmd.Origin.IsUI() {
		return
	}
	ss.LastInputOrigin = cmd.Origin
	ss.Updated = s.opts.Now()
	name := cmd.Origin.Adapter()
	if _, ok := ss.Bindings[name]; !ok && !cmd.Place.IsZero() {
		if ss.Bindings == nil {
			ss.Bindings = map[core.AdapterName]core.Binding{}
		}
		ss.Bindings[name] = core.Binding{Adapter: name, Place: cmd.Place, Output: core.OutputState{Turn: ss.Turn}}
	}
}

// inputCleanup is the ledger row for a person's own message, deleted at
// their next input.
func inputCleanup(id core.SessionID, cmd core.Command, now time.Time) []core.CleanupEntry {
	if cmd.Ref.IsZero() || !cmd.Origin.IsUI() {
		return nil
	}
	ref := cmd.Ref
	if ref.Adapter == "" {
		ref.Adapter = cmd.Origin.Adapter()
	}
	return []core.CleanupEntry{{Session: id, Ref: ref, Lifetime: core.LifetimeNextInput, Others: true, Created: now}}
}

// numberedAnswer recognises "2" as the answer to the newest open
// question, for platforms without buttons — unless that question is an
// approval, which only a choice naming it answers.
func numberedAnswer(sess core.Session, text string) (core.Question, int, bool) {
	if len(sess.Questions) == 0 {
		return core.Question{}, 0, false
	}
	q := sess.Questions[len(sess.Questions)-1]
	if _, approval := approvalCall(sess, q); approval {
		return core.Question{}, 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(text))
	if err != nil || n < 1 || n > len(q.Options) {
		return core.Question{}, 0, false
	}
	return q, n, true
}

// readsAsDecision reports whether text, typed while one of sess's
// approvals is open, looks meant to decide it ("1", "Approve").
func readsAsDecision(sess core.Session, text string) bool {
	for _, q := range sess.Questions {
		if _, approval := approvalCall(sess, q); approval {
			if _, ok := delivery.DecisionOf(q.Options, text); ok {
				return true
			}
		}
	}
	return false
}

// answer records a person's answer to an open question.
func (s *Service) answer(ctx context.Context, cmd core.Command) (core.Result, error) {
	return s.inSession(ctx, cmd, func(sess core.Session) (change, error) {
		return s.answerChange(sess, cmd)
	})
}

// answerChange answers an open question of sess, for an Answer or a
// numbered reply.
func (s *Service) answerChange(sess core.Session, cmd core.Command) (change, error) {
	qi := -1
	for i, q := range sess.Questions {
		if q.ID == cmd.QuestionID {
			qi = i
		}
	}
	if qi < 0 {
		// A second click on an answered question, or a redelivered click:
		// nothing is appended twice, and the adapter can say so.
		return change{}, refusal(core.ErrInvalid, "this question is no longer open",
			fmt.Sprintf("question %q is not open (already answered?)", cmd.QuestionID))
	}
	q := sess.Questions[qi]
	text := strings.TrimSpace(cmd.Text)
	if cmd.Option > 0 {
		if cmd.Option > len(q.Options) {
			return change{}, refusal(core.ErrInvalid, fmt.Sprintf("the question has no option %d", cmd.Option),
				fmt.Sprintf("question %q has no option %d", q.ID, cmd.Option))
		}
		text = q.Options[cmd.Option-1]
	}
	if err := s.checkContent(text, nil); err != nil {
		return change{}, err
	}
	decided, decide, err := approvalAnswer(sess, q, text, cmd)
	if err != nil {
		return change{}, err
	}
	msg := core.Message{Session: sess.ID, Role: core.RoleUser, Actor: cmd.Actor, Origin: cmd.Origin,
		Mime: core.MimeAnswer, Content: text, Ref: cmd.Ref}
	events := []core.Event{
		{Kind: core.EventAnswer, Session: sess.ID, Origin: cmd.Origin, Message: &msg, QuestionID: q.ID, Options: q.Options},
	}
	events = append(events, decided...)
	if sess.Status != core.StatusWorking {
		events = append(events, statusEvent(sess, core.StatusWorking, cmd.Origin))
	}
	return change{
		op:      "answer",
		msg:     &msg,
		cleanup: inputCleanup(sess.ID, cmd, s.opts.Now()),
		update: func(ss *core.Session) {
			s.noteInput(ss, cmd)
			ss.Status = core.StatusWorking
			ss.Questions = removeQuestion(ss.Questions, q.ID)
			decide(ss)
		},
		events: events,
	}, nil
}

func removeQuestion(qs []core.Question, id string) []core.Question {
	out := make([]core.Question, 0, len(qs))
	for _, q := range qs {
		if q.ID != id {
			out = append(out, q)
		}
	}
	return out
}

// status answers /status with a notice for the person who asked.
func (s *Service) status(ctx context.Context, cmd core.Command) (core.Result, error) {
	sess, err := s.resolve(ctx, cmd)
	if err != nil {
		return core.Result{}, err
	}
	text := fmt.Sprintf("%s %s — %s, %d turn(s) completed", delivery.StatusMark(sess.Status), sess.Title, sess.Status, sess.Turn)
	if n := len(sess.Questions); n > 0 {
		text += fmt.Sprintf(", %d open question(s)", n)
	}
	if len(s.opts.Agents) > 0 {
		text += ", agent " + s.agentLabel(sess.Agent)
	}
	cmd.Text, cmd.Kind = text, core.Notice
	return s.notice(ctx, cmd)
}
