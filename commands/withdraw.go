package commands

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/parley-chat/parley/core"
)

// withdraw closes an open question unanswered. The question leaves the
// session's open questions in the same update that logs the
// EventQuestionClosed, which carries the platform messages showing it (for
// the dispatcher to edit) and why it closed. An answer that comes after is
// refused as no longer open, like a second click. A question already
// answered or withdrawn is refused the same way, so the caller knows the
// answer won the race.
func (s *Service) withdraw(ctx context.Context, cmd core.Command) (core.Result, error) {
	why := cmd.Text
	switch why {
	case "":
		why = core.QuestionExpired
	case core.QuestionExpired, core.QuestionCancelled:
	default:
		return core.Result{}, invalid("a question is withdrawn as %q or %q, not %q", core.QuestionExpired, core.QuestionCancelled, why)
	}
	first := true
	return s.inSession(ctx, cmd, func(sess core.Session) (change, error) {
		i := slices.IndexFunc(sess.Questions, func(q core.Question) bool { return q.ID == cmd.QuestionID })
		switch {
		case i < 0 && first:
			return change{}, refusal(core.ErrInvalid, "this question is no longer open",
				fmt.Sprintf("question %q is not open (answered already?)", cmd.QuestionID))
		case i < 0:
			return change{}, refusal(core.ErrInvalid, "this question is no longer open", "question answered meanwhile")
		}
		first = false
		q := sess.Questions[i]
		events := []core.Event{closedEvent(sess, q, cmd.Origin, why)}
		// The agent's turn goes on (ui.ask returned to it): the session
		// stops waiting once no question is open.
		if len(sess.Questions) == 1 && sess.Status == core.StatusWaiting {
			events = append(events, statusEvent(sess, core.StatusWorking, cmd.Origin))
		}
		return change{
			op:     "withdraw",
			events: events,
			// The dispatcher records where the question is shown (Shown)
			// as its messages are sent, outside the session's lock: the
			// event must carry every message recorded up to the removal,
			// so a change in between decides the withdrawal again.
			moved: func(ss core.Session) error {
				j := slices.IndexFunc(ss.Questions, func(x core.Question) bool { return x.ID == q.ID })
				if j < 0 || !slices.Equal(ss.Questions[j].Shown, q.Shown) {
					return errShownMoved
				}
				return nil
			},
			update: func(ss *core.Session) {
				ss.Questions = removeQuestion(ss.Questions, q.ID)
				forgetApproval(ss, q.ID)
				if len(ss.Questions) == 0 && ss.Status == core.StatusWaiting {
					ss.Status = core.StatusWorking
				}
			},
		}, nil
	})
}

// errShownMoved: the question's messages changed while it was withdrawn.
var errShownMoved = errors.New("the question was shown somewhere new meanwhile")

// closedEvent is the EventQuestionClosed of q.
func closedEvent(sess core.Session, q core.Question, origin core.Origin, why string) core.Event {
	return core.Event{Kind: core.EventQuestionClosed, Session: sess.ID, Origin: origin, QuestionID: q.ID,
		Text: why, Options: q.Options, Refs: slices.Clone(q.Shown),
		Message: &core.Message{Session: sess.ID, Role: core.RoleAssistant, Origin: origin, Mime: core.MimeQuestion, Content: q.Text}}
}

// withdrawTimeout bounds logging the withdrawals of a closed session's
// questions, which runs once the close is durable.
const withdrawTimeout = 5 * time.Second

// withdrawAll withdraws the questions that were open in sess, just closed,
// so that their buttons go too. The close itself is durable already (it
// emptied the open questions); these events follow it in their own write,
// so a crash in between leaves the buttons shown, while a click on them is
// refused all the same (the session is closed).
func (s *Service) withdrawAll(ctx context.Context, sess core.Session) {
	if len(sess.Questions) == 0 {
		return
	}
	events := make([]core.Event, 0, len(sess.Questions))
	for _, q := range sess.Questions {
		events = append(events, closedEvent(sess, q, core.OriginSystem, core.QuestionCancelled))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), withdrawTimeout)
	defer cancel()
	events, err := s.store.AppendEvents(ctx, events...)
	if err != nil {
		s.log.Warn("the questions of a closed session keep their buttons", "session", sess.ID, "err", err)
		return
	}
	s.publish(events)
}
