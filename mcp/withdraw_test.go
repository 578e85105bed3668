package mcp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// A ui.ask that times out withdraws its question: the closed event says
// so, the question is no longer open, and an answer after that is refused
// and appends nothing.
func TestAskTimeoutWithdraws(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("")
	events, cancel := st.bus.Subscribe(64, false)
	defer cancel()
	c := mustDial(t, st.url, connOptions{modern: true})
	c.fails(t, "ui.ask", map[string]any{"question": "Still there?", "options": []string{"yes", "no"}, "timeout_s": 0.2, "session_id": string(id)},
		"the question was withdrawn")

	var qid string
	deadline := time.After(10 * time.Second)
	for qid == "" {
		select {
		case e := <-events.C:
			if e.Kind == core.EventQuestionClosed {
				if e.Text != core.QuestionExpired || e.Message == nil || e.Message.Content != "Still there?" {
					t.Fatalf("closed event %+v", e)
				}
				qid = e.QuestionID
			}
		case <-deadline:
			t.Fatal("no question_closed event")
		}
	}
	sess, err := st.store.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(sess.Questions) != 0 || sess.Status == core.StatusWaiting {
		t.Fatalf("after the timeout: status %s, questions %+v", sess.Status, sess.Questions)
	}
	before, _ := st.store.Inbox(context.Background(), id, "", 0)
	_, err = st.svc.Handle(context.Background(), core.Command{Kind: core.Answer, Session: id, Origin: core.OriginAPI,
		QuestionID: qid, Option: 1})
	if msg, _ := delivery.UserMessage(err); !errors.Is(err, core.ErrInvalid) || msg != "this question is no longer open" {
		t.Fatalf("late answer: %v", err)
	}
	after, _ := st.store.Inbox(context.Background(), id, "", 0)
	if len(after) != len(before) {
		t.Fatalf("a late answer was appended: %d messages, were %d", len(after), len(before))
	}
}

// A person's /cancel while ui.ask waits ends the call and withdraws the
// question as cancelled.
func TestAskCancelledWithdraws(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("")
	events, cancel := st.bus.Subscribe(64, false)
	defer cancel()
	go func() {
		for e := range events.C {
			if e.Kind == core.EventQuestion {
				_, _ = st.svc.Handle(context.Background(), core.Command{Kind: core.Cancel, Session: id, Origin: core.OriginAPI})
				return
			}
		}
	}()
	c := mustDial(t, st.url, connOptions{})
	c.fails(t, "ui.ask", map[string]any{"question": "Go on?", "options": []string{"yes"}, "session_id": string(id)}, "cancelled")
	closed, cancel2 := st.bus.Subscribe(64, false)
	defer cancel2()
	deadline := time.After(10 * time.Second)
	for {
		sess, err := st.store.Session(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(sess.Questions) == 0 {
			break
		}
		select {
		case <-closed.C:
		case <-deadline:
			t.Fatalf("the cancelled question is still open: %+v", sess.Questions)
		}
	}
	evs, err := st.store.EventsSince(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == core.EventQuestionClosed {
			if e.Text != core.QuestionCancelled {
				t.Fatalf("withdrawn as %q", e.Text)
			}
			return
		}
	}
	t.Fatal("no question_closed event")
}
