package delivery

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"

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

// questions takes the buttons away from the messages showing a withdrawn
// question, and remembers the latest withdrawals and the messages shown
// late, so that a question message and its withdrawal meet whichever
// comes first.
type questions struct {
	store   core.Store
	router  *Router
	outbox  *Outbox
	journal *journal
	log     *slog.Logger

	// mu guards both memories together: a message shown late is either
	// edited at once (its withdrawal is remembered) or kept for the
	// withdrawal, never neither.
	mu sync.Mutex
	// closed and closedOrder remember the latest questions withdrawn, for
	// a question message sent after its withdrawal.
	closed      map[string]core.Event
	closedOrder []string
	// late are question messages sent after their question left the
	// session but before its withdrawal reached the dispatcher (it may
	// have been answered instead): withdraw edits them when it comes.
	late      map[string][]Sent
	lateOrder []string
}

func newQuestions(store core.Store, router *Router, outbox *Outbox, jr *journal, log *slog.Logger) *questions {
	return &questions{store: store, router: router, outbox: outbox, journal: jr, log: log,
		closed: map[string]core.Event{}, late: map[string][]Sent{}}
}

// shown records s.Ref in its open question; if the question is no
// longer open and was withdrawn, the message is edited at once.
func (q *questions) shown(ctx context.Context, s Sent) {
	open := false
	_, _, err := q.store.UpdateSession(context.WithoutCancel(ctx), s.Session, func(ss *core.Session) error {
		// The session may share its slices with the store's cache: only
		// assign, to copies.
		i := slices.IndexFunc(ss.Questions, func(x core.Question) bool { return x.ID == s.Question })
		open = i >= 0
		if open && !slices.Contains(ss.Questions[i].Shown, s.Ref) {
			qs := slices.Clone(ss.Questions)
			qs[i].Shown = append(slices.Clone(qs[i].Shown), s.Ref)
			ss.Questions = qs
		}
		return nil
	})
	if err != nil {
		q.log.Warn("could not record where a question is shown; a withdrawal will not reach it", "session", s.Session, "err", err)
		return
	}
	if open {
		return
	}
	q.mu.Lock()
	e, closed := q.closed[s.Question]
	if !closed {
		// Answered, or withdrawn with the withdrawal still on its way
		// here: keep it for withdraw, under the same lock.
		if _, ok := q.late[s.Question]; !ok {
			q.lateOrder = append(q.lateOrder, s.Question)
			if len(q.lateOrder) > maxClosedQs {
				delete(q.late, q.lateOrder[0])
				q.lateOrder = q.lateOrder[1:]
			}
		}
		q.late[s.Question] = append(q.late[s.Question], s)
	}
	q.mu.Unlock()
	if closed {
		e.Refs = []core.MessageRef{s.Ref}
		q.editClosed(s.Session, e, nil, 0)
	}
}

// withdraw edits every message showing a withdrawn question.
func (q *questions) withdraw(s core.Session, e core.Event, j *delivery) {
	q.mu.Lock()
	if _, ok := q.closed[e.QuestionID]; !ok {
		q.closedOrder = append(q.closedOrder, e.QuestionID)
		if len(q.closedOrder) > maxClosedQs {
			delete(q.closed, q.closedOrder[0])
			q.closedOrder = q.closedOrder[1:]
		}
	}
	q.closed[e.QuestionID] = core.Event{Session: e.Session, QuestionID: e.QuestionID, Text: e.Text, Message: e.Message}
	late := q.late[e.QuestionID]
	delete(q.late, e.QuestionID)
	q.mu.Unlock()
	for i := range e.Refs {
		q.editClosed(s.ID, e, j, i)
	}
	for _, sent := range late {
		if slices.Contains(e.Refs, sent.Ref) {
			continue
		}
		one := e
		one.Refs = []core.MessageRef{sent.Ref}
		q.editClosed(s.ID, one, nil, 0)
	}
}

// editClosed enqueues the edit of e.Refs[i] to show the question closed.
func (q *questions) editClosed(session core.SessionID, e core.Event, j *delivery, i int) {
	ref := e.Refs[i]
	a, ok := q.router.Adapter(ref.Adapter)
	if !ok || followsEvents(a) {
		return // the withdrawal event itself reaches one that follows events
	}
	ed, ok := a.(core.Editor)
	if !ok {
		return // nothing to take back; a late answer is refused all the same
	}
	key := opKey(a.Name(), "withdraw", i)
	if !q.journal.add(j, key) {
		return
	}
	text := ""
	if e.Message != nil {
		text = e.Message.Content
	}
	m := core.OutMessage{Kind: core.KindQuestion, Text: ClosedQuestionText(text, e.Text)}
	q.outbox.Enqueue(core.Op{Kind: core.OpEdit, Adapter: a.Name(), Place: ref.Place,
		Key: "withdraw\x00" + string(ref.Adapter) + "\x00" + ref.Place.Chat + "\x00" + ref.ID,
		Run: q.journal.guard(j, func(ctx context.Context, _ core.Place) error {
			err := ed.Edit(ctx, ref, m)
			if errors.Is(err, core.ErrMessageGone) || errors.Is(err, core.ErrNotModified) {
				return nil
			}
			return err
		}),
		Done: func(err error) {
			q.journal.confirm(j, a.Name(), key, err)
			if err != nil && !IsClosed(err) && !lostClaim(err) {
				q.log.Warn("could not take a withdrawn question's buttons away", "adapter", a.Name(), "session", session, "err", err)
			}
		}})
}
