package commands_test

import (
	"context"
	"errors"
	"testing"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Withdraw closes an open question: the event carries where it is shown
// and why, the session stops waiting, and a later answer or a second
// withdrawal is refused as no longer open. Closing the session withdraws
// the questions still open.
func TestWithdraw(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.newSession()
	e.handle(core.Command{Kind: core.Ask, Session: id, Origin: core.OriginMCP, QuestionID: "q1", Text: "Go?", Options: []string{"yes", "no"}})
	ref := core.MessageRef{Adapter: "telegram", Place: core.Place{Chat: "1", Thread: "2"}, ID: "7"}
	if _, _, err := e.st.UpdateSession(context.Background(), id, func(s *core.Session) error {
		qs := append([]core.Question(nil), s.Questions...)
		qs[0].Shown = []core.MessageRef{ref}
		s.Questions = qs
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.events()

	if _, err := e.svc.Handle(context.Background(), core.Command{Kind: core.Withdraw, Session: id, Origin: core.OriginMCP,
		QuestionID: "q1", Text: "later"}); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("a withdrawal for no reason known: %v", err)
	}
	e.handle(core.Command{Kind: core.Withdraw, Session: id, Origin: core.OriginMCP, QuestionID: "q1", Text: core.QuestionExpired})
	closed := ofKind(e.events(), core.EventQuestionClosed)
	if len(closed) != 1 || closed[0].QuestionID != "q1" || closed[0].Text != core.QuestionExpired ||
		len(closed[0].Refs) != 1 || closed[0].Refs[0] != ref || closed[0].Message == nil || closed[0].Message.Content != "Go?" {
		t.Fatalf("closed events %+v", closed)
	}
	if s := e.session(id); len(s.Questions) != 0 || s.Status != core.StatusWorking {
		t.Fatalf("after the withdrawal: %s, %+v", s.Status, s.Questions)
	}
	for _, cmd := range []core.Command{
		{Kind: core.Answer, Session: id, Origin: core.OriginAPI, QuestionID: "q1", Option: 1},
		{Kind: core.Withdraw, Session: id, Origin: core.OriginMCP, QuestionID: "q1"},
	} {
		_, err := e.svc.Handle(context.Background(), cmd)
		if msg, _ := delivery.UserMessage(err); !errors.Is(err, core.ErrInvalid) || msg != "this question is no longer open" {
			t.Fatalf("%s after the withdrawal: %v", cmd.Kind, err)
		}
	}

	e.handle(core.Command{Kind: core.Ask, Session: id, Origin: core.OriginMCP, QuestionID: "q2", Text: "And now?", Options: []string{"ok"}})
	e.events()
	e.handle(core.Command{Kind: core.Close, Session: id, Origin: core.OriginAPI})
	closed = ofKind(e.events(), core.EventQuestionClosed)
	if len(closed) != 1 || closed[0].QuestionID != "q2" || closed[0].Text != core.QuestionCancelled || closed[0].Seq == 0 {
		t.Fatalf("closing the session withdrew %+v", closed)
	}
}
