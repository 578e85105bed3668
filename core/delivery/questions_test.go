package delivery_test

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// ask stores an open question with buttons and dispatches it.
func (r *rig) ask(id core.SessionID, qid, text string) {
	r.t.Helper()
	r.update(id, func(s *core.Session) []core.Event {
		s.Questions = []core.Question{{ID: qid, Text: text, Options: []string{"yes", "no"}}}
		s.Status = core.StatusWaiting
		return []core.Event{{Kind: core.EventQuestion, Session: id, QuestionID: qid, Options: []string{"yes", "no"},
			Message: &core.Message{Session: id, Role: core.RoleAssistant, Mime: core.MimeQuestion, Content: text}}}
	})
}

// withdraw closes the question unanswered, as commands.Service does.
func (r *rig) withdraw(id core.SessionID, qid, why string) {
	r.t.Helper()
	r.update(id, func(s *core.Session) []core.Event {
		var refs []core.MessageRef
		text := ""
		for _, q := range s.Questions {
			if q.ID == qid {
				refs, text = q.Shown, q.Text
			}
		}
		s.Questions = nil
		return []core.Event{{Kind: core.EventQuestionClosed, Session: id, QuestionID: qid, Text: why, Refs: refs,
			Message: &core.Message{Session: id, Content: text}}}
	})
}

// questionShown is the fake platform's message showing text.
func questionShown(t *testing.T, r *rig, text string) (m struct {
	Text    string
	Buttons int
}) {
	t.Helper()
	for _, msg := range r.fk.Messages(dm) {
		if msg.Kind == core.KindQuestion && strings.HasPrefix(msg.Text, text) {
			m.Text, m.Buttons = msg.Text, len(msg.Buttons)
			return m
		}
	}
	t.Fatalf("no question %q on the platform: %+v", text, r.fk.Messages(dm))
	return m
}

// TestDispatchWithdrawnQuestion: where a question is shown is recorded
// with it, and its withdrawal edits that message to say it expired, without
// buttons.
func TestDispatchWithdrawnQuestion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFake(core.Capabilities{Buttons: true}), openStore(t), delivery.OutboxOptions{})
		id := r.newSession("ask", dm)
		r.ask(id, "q1", "Roll back?")
		r.settle()
		if q := questionShown(t, r, "Roll back?"); q.Buttons != 2 {
			t.Fatalf("the question shows %d buttons", q.Buttons)
		}
		if shown := r.session(id).Questions[0].Shown; len(shown) != 1 || shown[0].Adapter != "fake" {
			t.Fatalf("where the question is shown: %+v", shown)
		}
		r.withdraw(id, "q1", core.QuestionExpired)
		r.settle()
		if q := questionShown(t, r, "Roll back?"); q.Buttons != 0 || !strings.Contains(q.Text, "expired") {
			t.Fatalf("the withdrawn question shows %+v", q)
		}
	})
}

// TestDispatchQuestionSentAfterItsWithdrawal: a question still in the
// outbox (the platform is down) when it is withdrawn is edited as soon as
// it is shown.
func TestDispatchQuestionSentAfterItsWithdrawal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := newFake(core.Capabilities{Buttons: true})
		r := newRig(t, fk, openStore(t), delivery.OutboxOptions{})
		id := r.newSession("ask", dm)
		r.settle()
		fk.SetDown(errors.New("platform unreachable"))
		r.ask(id, "q2", "Deploy?")
		synctest.Wait()
		r.withdraw(id, "q2", core.QuestionCancelled)
		time.Sleep(time.Second)
		fk.SetDown(nil)
		r.settle()
		if q := questionShown(t, r, "Deploy?"); q.Buttons != 0 || !strings.Contains(q.Text, "withdrawn") {
			t.Fatalf("the question sent after its withdrawal shows %+v", q)
		}
	})
}
