package delivery

import (
	"context"
	"errors"
	"slices"

	"github.com/parley-chat/parley/core"
)

// Questions that end. A question (ui.ask) is shown with buttons, or as a
// numbered list, on every platform it is routed to; each message showing it
// is recorded in the open question (Question.Shown) as it is sent. When the
// question is withdrawn unanswered (EventQuestionClosed: the ask timed out
// or was cancelled), each of those messages is edited, by its own adapter,
// to the question's text and a line saying it closed, without buttons. A
// question message that reaches its platform only after the withdrawal
// (it was still in the outbox) finds the question no longer open and is
// edited at once, from the withdrawals remembered in memory (the latest
// maxClosedQs). An answer that arrives later is refused by the Handler as
// no longer open, and the adapter says so to whoever clicked.

// maxClosedQs bounds the withdrawn questions the dispatcher remembers.
const maxClosedQs = 1024

// ClosedQuestionText is what a withdrawn question's messages show.
func ClosedQuestionText(question, why string) string {
	note := "⌛ This question expired without an answer; it is no longer open."
	if why == core.QuestionCancelled {
		note = "✖ This question was withdrawn; it is no longer open."
	}
	return question + "\n\n_" + note + "_"
}

// questionShown records s.Ref in its open question; if the question is no
// longer open and was withdrawn, the message is edited at once.
func (d *Dispatcher) questionShown(ctx context.Context, s Sent) {
	open := false
	_, _, err := d.store.UpdateSession(context.WithoutCancel(ctx), s.Session, func(ss *core.Session) error {
		// The session may share its slices with the store's cache: only
		// assign, to copies.
		i := slices.IndexFunc(ss.Questions, func(q core.Question) bool { return q.ID == s.Question })
		open = i >= 0
		if open && !slices.Contains(ss.Questions[i].Shown, s.Ref) {
			qs := slices.Clone(ss.Questions)
			qs[i].Shown = append(slices.Clone(qs[i].Shown), s.Ref)
			ss.Questions = qs
		}
		return nil
	})
	if err != nil {
		d.log.Warn("could not record where a question is shown; a withdrawal will not reach it", "session", s.Session, "err", err)
		return
	}
	if open {
		return
	}
	d.mu.Lock()
	e, closed := d.closedQs[s.Question]
	if !closed {
		// Answered, or withdrawn with the withdrawal still on its way
		// here: keep it for withdraw, under the same lock.
		if _, ok := d.lateShown[s.Question]; !ok {
			d.lateOrder = append(d.lateOrder, s.Question)
			if len(d.lateOrder) > maxClosedQs {
				delete(d.lateShown, d.lateOrder[0])
				d.lateOrder = d.lateOrder[1:]
			}
		}
		d.lateShown[s.Question] = append(d.lateShown[s.Question], s)
	}
	d.mu.Unlock()
	if closed {
		e.Refs = []core.MessageRef{s.Ref}
		d.editClosed(s.Session, e, nil, 0)
	}
}

// withdraw edits every message showing a withdrawn question.
func (d *Dispatcher) withdraw(s core.Session, e core.Event, j *delivery) {
	d.mu.Lock()
	if _, ok := d.closedQs[e.QuestionID]; !ok {
		d.closedOrder = append(d.closedOrder, e.QuestionID)
		if len(d.closedOrder) > maxClosedQs {
			delete(d.closedQs, d.closedOrder[0])
			d.closedOrder = d.closedOrder[1:]
		}
	}
	d.closedQs[e.QuestionID] = core.Event{Session: e.Session, QuestionID: e.QuestionID, Text: e.Text, Message: e.Message}
	late := d.lateShown[e.QuestionID]
	delete(d.lateShown, e.QuestionID)
	d.mu.Unlock()
	for i := range e.Refs {
		d.editClosed(s.ID, e, j, i)
	}
	for _, sent := range late {
		if slices.Contains(e.Refs, sent.Ref) {
			continue
		}
		one := e
		one.Refs = []core.MessageRef{sent.Ref}
		d.editClosed(s.ID, one, nil, 0)
	}
}

// editClosed enqueues the edit of e.Refs[i] to show the question closed.
func (d *Dispatcher) editClosed(session core.SessionID, e core.Event, j *delivery, i int) {
	ref := e.Refs[i]
	a, ok := d.router.Adapter(ref.Adapter)
	if !ok || followsEvents(a) {
		return // the withdrawal event itself reaches one that follows events
	}
	ed, ok := a.(core.Editor)
	if !ok {
		return // nothing to take back; a late answer is refused all the same
	}
	key := opKey(a.Name(), "withdraw", i)
	if !d.add(j, key) {
		return
	}
	text := ""
	if e.Message != nil {
		text = e.Message.Content
	}
	m := core.OutMessage{Kind: core.KindQuestion, Text: ClosedQuestionText(text, e.Text)}
	d.outbox.Enqueue(core.Op{Kind: core.OpEdit, Adapter: a.Name(), Place: ref.Place,
		Key: "withdraw\x00" + string(ref.Adapter) + "\x00" + ref.Place.Chat + "\x00" + ref.ID,
		Run: func(ctx context.Context, _ core.Place) error {
			err := ed.Edit(ctx, ref, m)
			if errors.Is(err, core.ErrMessageGone) || errors.Is(err, core.ErrNotModified) {
				return nil
			}
			return err
		},
		Done: func(err error) {
			d.confirm(j, a.Name(), key, err)
			if err != nil && !IsClosed(err) {
				d.log.Warn("could not take a withdrawn question's buttons away", "adapter", a.Name(), "session", session, "err", err)
			}
		}})
}
