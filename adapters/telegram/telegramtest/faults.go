package telegramtest

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parley-chat/parley/adapters/internal/fakeserver"
)

// Fault is a way a Bot API call can fail on its way to Telegram and back,
// as clients see it in production.
type Fault int

// The faults InjectFaults and SetOutage choose from. Except for
// FaultLostAnswer, a faulted call has no effect at all: the server does not
// act on it, the rate limits do not count it, so a client that retries it
// shows the message exactly once.
const (
	// FaultTooMany answers 429 "Too Many Requests: retry after N" with
	// parameters.retry_after N (see Faults.MaxRetryAfter), as Telegram's
	// flood control does.
	FaultTooMany Fault = iota + 1
	// FaultInternal answers 500 {"ok":false,"error_code":500,
	// "description":"Internal Server Error"}, as the Bot API does when
	// Telegram's backend fails.
	FaultInternal
	// FaultBadGateway answers 502 with an HTML page, as a reverse proxy in
	// front of the Bot API does: the body is not JSON.
	FaultBadGateway
	// FaultReset closes the connection with a TCP reset (SO_LINGER 0)
	// without answering.
	FaultReset
	// FaultHang never answers: the request is held until the client gives
	// up (its context ends or it closes the connection) or the server
	// closes.
	FaultHang
	// FaultLostAnswer performs the call and then resets the connection, so
	// the call took effect but the client cannot know. Without
	// idempotency a retry then shows the message twice, so it is not in
	// DefaultFaults.
	FaultLostAnswer
)

var faultNames = map[Fault]string{
	0: "none", FaultTooMany: "429", FaultInternal: "500", FaultBadGateway: "502",
	FaultReset: "reset", FaultHang: "hang", FaultLostAnswer: "lost answer",
}

func (f Fault) String() string {
	if n, ok := faultNames[f]; ok {
		return n
	}
	return "Fault(" + strconv.Itoa(int(f)) + ")"
}

// DefaultFaults are the faults injected when Faults.Kinds is empty: every
// fault that leaves no trace on the server.
var DefaultFaults = []Fault{FaultTooMany, FaultInternal, FaultBadGateway, FaultReset, FaultHang}

// DefaultExempt are the methods no fault touches unless Faults.Exempt says
// otherwise: long polling (the inbound side has its own retry loop and is
// not what fault tests are about) and the calls a client makes once at
// start-up to check its configuration, so that a daemon under test starts
// without a retry loop of its own for them.
var DefaultExempt = []string{
	"getUpdates", "getMe", "logOut", "close", "setWebhook", "deleteWebhook", "getWebhookInfo",
	"getChat", "getChatMember", "getChatAdministrators", "setMyCommands", "getMyCommands", "deleteMyCommands",
}

// Faults configure the failures a Server injects (see InjectFaults).
type Faults struct {
	// Every makes each call fail with probability 1/Every: on average one
	// call in Every. Zero or less injects none (SetOutage still works).
	Every int
	// Seed seeds the generator (math/rand/v2's PCG) that decides which
	// calls fail and how: the same seed and the same sequence of calls give
	// the same faults. Calls arriving concurrently take their decisions in
	// arrival order, which the scheduler may vary.
	Seed uint64
	// Kinds are the faults chosen from, uniformly; DefaultFaults when empty.
	Kinds []Fault
	// OutageKinds are how calls fail during an outage, chosen uniformly;
	// FaultBadGateway and FaultReset when empty.
	OutageKinds []Fault
	// MaxRetryAfter bounds the retry_after of an injected 429, chosen from
	// 1 to MaxRetryAfter seconds; 2 when zero or less.
	MaxRetryAfter int
	// Exempt are the methods (Telegram's spelling) never faulted, by
	// InjectFaults nor by SetOutage; DefaultExempt when nil. An empty,
	// non-nil slice exempts nothing, getUpdates included.
	Exempt []string
}

// faultState is the Server's fault configuration and decider.
type faultState struct {
	cfg Faults
	fakeserver.Faults[Fault]
}

func newFaultState(f Faults) faultState {
	if len(f.Kinds) == 0 {
		f.Kinds = DefaultFaults
	}
	if len(f.OutageKinds) == 0 {
		f.OutageKinds = []Fault{FaultBadGateway, FaultReset}
	}
	if f.MaxRetryAfter <= 0 {
		f.MaxRetryAfter = 2
	}
	if f.Exempt == nil {
		f.Exempt = DefaultExempt
	}
	exempt := make([]string, len(f.Exempt))
	for i, m := range f.Exempt {
		exempt[i] = strings.ToLower(m)
	}
	return faultState{cfg: f, Faults: fakeserver.NewFaults(f.Every, f.Seed, f.Kinds, f.OutageKinds, exempt)}
}

// InjectFaults makes calls fail as f says from now on, replacing earlier
// settings (and restarting the generator from f.Seed). The zero Faults
// stops injecting. FailNext failures come first: a call that takes one is
// not faulted.
func (s *Server) InjectFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := newFaultState(f)
	s.faults.Restart(next.Faults)
	s.faults.cfg = next.cfg
}

// SetOutage switches a total outage on or off: while on, every call not
// exempt (see Faults.Exempt) fails with one of Faults.OutageKinds, without
// effect, as when the Bot API or the network in front of it is down.
func (s *Server) SetOutage(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Outage = on
	s.changed()
}

// Hanging is how many requests FaultHang is holding right now.
func (s *Server) Hanging() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.Hanging
}

// pickFault decides whether a call of method fails, and how; for
// FaultTooMany it also picks retry_after. Callers hold s.mu.
func (s *Server) pickFault(method string) (Fault, int) {
	kind, ok := s.faults.Pick(strings.ToLower(method))
	switch {
	case !ok:
		return 0, 0
	case kind == FaultTooMany:
		return kind, 1 + s.faults.IntN(s.faults.cfg.MaxRetryAfter)
	}
	return kind, 0
}

// faultScope fills in the chat, thread and message a call names, for the
// record of a call that fails (by a fault or FailNext) before its handler
// looks at them. Callers hold s.mu.
func (s *Server) faultScope(r *request) {
	r.chat, _ = strconv.ParseInt(strings.TrimSpace(r.p.str("chat_id")), 10, 64)
	thread, _ := strconv.Atoi(strings.TrimSpace(r.p.str("message_thread_id")))
	id, _ := strconv.Atoi(strings.TrimSpace(r.p.str("message_id")))
	r.thread, r.msgID = thread, id
	if c := s.chats[r.chat]; c != nil && thread == 0 {
		if m := c.msgs[id]; m != nil {
			r.thread = m.thread
		}
	}
}

// badGatewayPage is what nginx answers when the Bot API behind it is down.
const badGatewayPage = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

// faultError is the answer of a fault that answers; nil for the others.
func faultError(kind Fault, retryAfter int) *Error {
	switch kind {
	case FaultTooMany:
		return &Error{Code: http.StatusTooManyRequests, Description: fmt.Sprintf("Too Many Requests: retry after %d", retryAfter), RetryAfter: retryAfter}
	case FaultInternal:
		return &Error{Code: http.StatusInternalServerError, Description: "Internal Server Error"}
	case FaultBadGateway:
		return &Error{Code: http.StatusBadGateway, Description: "Bad Gateway"}
	}
	return nil
}

// faultRecord is how a call failed by kind is recorded: its code and
// description, or what the client saw instead of an answer.
func faultRecord(kind Fault, retryAfter int) (int, string) {
	if e := faultError(kind, retryAfter); e != nil {
		return e.Code, e.Description
	}
	if kind == FaultHang {
		return 0, "no answer"
	}
	return 0, "connection reset"
}

// serveFault fails a call as kind says, without acting on it.
func (s *Server) serveFault(w http.ResponseWriter, hr *http.Request, kind Fault, retryAfter int) {
	switch kind {
	case FaultBadGateway:
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", strconv.Itoa(len(badGatewayPage)))
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, badGatewayPage)
	case FaultReset, FaultLostAnswer:
		fakeserver.ResetConn(w)
	case FaultHang:
		s.hang(w, hr)
	default:
		writeError(w, faultError(kind, retryAfter))
	}
}

// hang holds a request until its client goes away or the server closes,
// then drops the connection.
func (s *Server) hang(w http.ResponseWriter, hr *http.Request) {
	count := func(d int) func() {
		return func() {
			s.mu.Lock()
			s.faults.Hanging += d
			s.changed()
			s.mu.Unlock()
		}
	}
	fakeserver.Hang(w, hr, s.done, count(1), count(-1))
}

// EarlyCall is a call that arrived while a 429 the server had answered for
// its chat still asked to wait.
type EarlyCall struct {
	Call Call
	// TooMany is the 429 whose retry_after the call did not honor.
	TooMany Call
}

func (e EarlyCall) String() string {
	return fmt.Sprintf("%s to chat %d (thread %d) %v after a 429 with retry_after %d from %s in thread %d",
		e.Call.Method, e.Call.Chat, e.Call.Thread, e.Call.Time.Sub(e.TooMany.Time).Round(time.Millisecond),
		e.TooMany.RetryAfter, e.TooMany.Method, e.TooMany.Thread)
}

// TooManyAnswers returns every 429 the server answered (by its limits,
// FailNext or InjectFaults), oldest first; each Call has the chat, the
// arrival time and RetryAfter.
func (s *Server) TooManyAnswers() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if c.Code == http.StatusTooManyRequests {
			out = append(out, c)
		}
	}
	return out
}

// EarlyCalls returns the calls that arrived inside the retry_after of a 429
// the server answered for the same chat (the whole chat, all its topics:
// Telegram's flood control is not per topic; a 429 for a call without chat
// covers every chat). A call arriving within grace of the 429 is not
// counted: it may have been on its way before the client read the answer.
func (s *Server) EarlyCalls(grace time.Duration) []EarlyCall {
	s.mu.Lock()
	calls := slices.Clone(s.calls)
	s.mu.Unlock()
	var out []EarlyCall
	for i, tm := range calls {
		if tm.Code != http.StatusTooManyRequests || tm.RetryAfter <= 0 {
			continue
		}
		from, until := tm.Time.Add(grace), tm.Time.Add(time.Duration(tm.RetryAfter)*time.Second)
		// Calls are recorded when answered, so a later arrival may come
		// first in the slice: look at them all.
		for j, c := range calls {
			if j != i && (tm.Chat == 0 || c.Chat == tm.Chat) && c.Time.After(from) && c.Time.Before(until) {
				out = append(out, EarlyCall{Call: c, TooMany: tm})
			}
		}
	}
	return out
}
