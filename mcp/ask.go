package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
)

// ui.ask waits for the answer event on the bus. The question id is made
// here and the waiter registered before the Ask command runs, so an answer
// cannot arrive before anyone waits for it.

var (
	errAskClosed    = errors.New("the session was closed before anyone answered")
	errAskCancelled = errors.New("the person cancelled (/cancel) before answering")
	errAskShutdown  = errors.New("parley is shutting down")
)

type askOutcome struct {
	msg core.Message
	err error
}

type asks struct {
	mu      sync.Mutex
	waiting map[string]askWaiter
}

type askWaiter struct {
	session core.SessionID
	ch      chan askOutcome // buffered 1; receives at most one outcome
}

func newAsks() *asks { return &asks{waiting: map[string]askWaiter{}} }

// newQuestionID returns a short random question id (12 hex digits).
func newQuestionID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// wait registers a waiter for question qid in session. done must be called
// when the caller stops waiting.
func (a *asks) wait(qid string, session core.SessionID) (<-chan askOutcome, func()) {
	ch := make(chan askOutcome, 1)
	a.mu.Lock()
	a.waiting[qid] = askWaiter{session: session, ch: ch}
	a.mu.Unlock()
	return ch, func() {
		a.mu.Lock()
		delete(a.waiting, qid)
		a.mu.Unlock()
	}
}

// answer completes the waiter of qid, if any.
func (a *asks) answer(qid string, m core.Message) {
	a.mu.Lock()
	w, ok := a.waiting[qid]
	delete(a.waiting, qid)
	a.mu.Unlock()
	if ok {
		w.ch <- askOutcome{msg: m}
	}
}

// fail completes every waiter of session with err.
func (a *asks) fail(session core.SessionID, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for qid, w := range a.waiting {
		if w.session == session {
			delete(a.waiting, qid)
			w.ch <- askOutcome{err: err}
		}
	}
}

// failAll completes every waiter with err.
func (a *asks) failAll(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for qid, w := range a.waiting {
		delete(a.waiting, qid)
		w.ch <- askOutcome{err: err}
	}
}

// Bounds of ui.ask's wait.
const (
	askDefaultTimeout = 300 * time.Second
	askMaxTimeout     = 3600 * time.Second
)

type askArgs struct {
	Question  string   `json:"question"`
	Options   []string `json:"options"`
	SessionID string   `json:"session_id"`
	TimeoutS  *float64 `json:"timeout_s"`
}

type askResult struct {
	Answer     string         `json:"answer"`
	Option     int            `json:"option,omitempty"` // 1-based, when the answer is one of the options
	QuestionID string         `json:"question_id"`
	MessageID  core.MessageID `json:"message_id"`
	SessionID  core.SessionID `json:"session_id"`
}

func (s *Server) ask(ctx context.Context, raw json.RawMessage) (any, error) {
	var a askArgs
	if err := bind(raw, &a); err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Question) == "" {
		return nil, toolError("question is empty")
	}
	if len(a.Options) == 0 {
		return nil, toolError("options is empty: give 1 to 20 answers to choose from")
	}
	timeout, err := askTimeout(a.TimeoutS)
	if err != nil {
		return nil, err
	}
	id, err := s.sessionFor(ctx, "ui.ask", a.SessionID, true)
	if err != nil {
		return nil, err
	}
	qid := newQuestionID()
	outcome, done := s.asks.wait(qid, id)
	defer done()
	if _, err := s.handle(ctx, core.Command{Kind: core.Ask, Session: id, Origin: core.OriginMCP,
		Text: a.Question, Options: a.Options, QuestionID: qid}); err != nil {
		return nil, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	answered := func(o askOutcome) (any, error) {
		if o.err != nil {
			return nil, toolError(o.err.Error())
		}
		res := askResult{Answer: o.msg.Content, QuestionID: qid, MessageID: o.msg.ID, SessionID: id}
		if i := slices.Index(a.Options, o.msg.Content); i >= 0 {
			res.Option = i + 1
		}
		return res, nil
	}
	select {
	case o := <-outcome:
		if errors.Is(o.err, errAskCancelled) {
			s.withdrawAsk(ctx, id, qid, core.QuestionCancelled, nil)
		}
		return answered(o)
	case <-timer.C:
		if o, ok := s.withdrawAsk(ctx, id, qid, core.QuestionExpired, outcome); ok {
			return answered(o)
		}
		return nil, toolError(fmt.Sprintf("no answer within %gs; the question was withdrawn (its buttons are gone, a late answer is refused)", timeout.Seconds()))
	case <-ctx.Done():
		if o, ok := s.withdrawAsk(ctx, id, qid, core.QuestionCancelled, outcome); ok {
			return answered(o)
		}
		return nil, fmt.Errorf("waiting for the answer: %w", ctx.Err())
	}
}

// askTimeout is a blocking tool's timeout_s argument: the default when
// absent, else more than 0 and at most askMaxTimeout.
func askTimeout(seconds *float64) (time.Duration, error) {
	if seconds == nil {
		return askDefaultTimeout, nil
	}
	t := time.Duration(*seconds * float64(time.Second))
	if t <= 0 || t > askMaxTimeout {
		return 0, toolError(fmt.Sprintf("timeout_s %g is out of range: more than 0, at most %d", *seconds, int(askMaxTimeout.Seconds())))
	}
	return t, nil
}
