package mcp

import (
	"context"
	"errors"
	"time"

	"github.com/parley-chat/parley/core"
)

// A ui.ask that ends without an answer (its timeout, the agent cancelling
// the call, the person's /cancel) withdraws its question, so that nobody
// answers into the void: the question's buttons go on every platform and a
// late answer is refused as no longer open (core's questions.go).

// withdrawTimeout bounds the withdrawal, which runs even when the call's
// own context has ended.
const withdrawTimeout = 10 * time.Second

// answerGrace is how long a withdrawal that lost the race to an answer
// waits for that answer's event.
const answerGrace = 5 * time.Second

// withdrawAsk withdraws question qid of session. When the question was
// answered first, it waits on outcome (if given) for the answer and
// returns it with true.
func (s *Server) withdrawAsk(ctx context.Context, session core.SessionID, qid, why string, outcome <-chan askOutcome) (askOutcome, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), withdrawTimeout)
	defer cancel()
	_, err := s.opts.Handler.Handle(ctx, core.Command{Kind: core.Withdraw, Session: session, Origin: core.OriginMCP,
		QuestionID: qid, Text: why})
	switch {
	case err == nil:
		return askOutcome{}, false
	case errors.Is(err, core.ErrInvalid) && outcome != nil:
		// Answered just before: its event is on its way.
		t := time.NewTimer(answerGrace)
		defer t.Stop()
		select {
		case o := <-outcome:
			return o, o.err == nil
		case <-t.C:
		}
	case !errors.Is(err, core.ErrInvalid) && !errors.Is(err, core.ErrSessionClosed):
		s.log.Warn("could not withdraw a question", "session", session, "question", qid, "err", err)
	}
	return askOutcome{}, false
}
