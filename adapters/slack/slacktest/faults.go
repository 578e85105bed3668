package slacktest

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/parley-chat/parley/adapters/internal/fakeserver"
)

// Fault is a way a Web API call can fail on its way to Slack and back, as
// clients see it in production.
type Fault int

// The faults InjectFaults and SetOutage choose from. Except for
// FaultLostAnswer, a faulted call has no effect at all: the server does not
// act on it and the limits do not count it, so a client that retries it
// shows the message exactly once.
const (
	// FaultTooMany answers 429 with Retry-After N (see
	// Faults.MaxRetryAfter) and {"ok":false,"error":"ratelimited"}.
	FaultTooMany Fault = iota + 1
	// FaultInternal answers 500 with an HTML page, as Slack's edge does
	// when its backend fails.
	FaultInternal
	// FaultBadGateway answers 502 with an HTML page.
	FaultBadGateway
	// FaultReset closes the connection with a TCP reset without
	// answering.
	FaultReset
	// FaultHang never answers: the request is held until the client gives
	// up (its context ends or it closes the connection) or the server
	// closes.
	FaultHang
	// FaultLostAnswer performs the call and then resets the connection:
	// the call took effect but the client cannot know. A retry then posts
	// the message twice, so it is not in DefaultFaults.
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
// otherwise: the calls a client makes at start-up to check its
// configuration, and opening Socket Mode connections (slack-go retries
// those itself, with a backoff that would slow tests down).
var DefaultExempt = []string{"auth.test", "apps.connections.open", "conversations.info"}

// Faults configure the failures a Server injects (see InjectFaults).
type Faults struct {
	// Every makes each call fail with probability 1/Every. Zero or less
	// injects none (SetOutage still works).
	Every int
	// Seed seeds the generator that decides which calls fail and how: the
	// same seed and the same sequence of calls give the same faults.
	Seed uint64
	// Kinds are the faults chosen from, uniformly; DefaultFaults when
	// empty.
	Kinds []Fault
	// OutageKinds are how calls fail during an outage; FaultBadGateway and
	// FaultReset when empty.
	OutageKinds []Fault
	// MaxRetryAfter bounds the Retry-After of an injected 429, chosen from
	// 1s to MaxRetryAfter in whole seconds; 2s when zero or less.
	MaxRetryAfter time.Duration
	// Exempt are the methods never faulted; DefaultExempt when nil. An
	// empty, non-nil slice exempts nothing.
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
		f.MaxRetryAfter = 2 * time.Second
	}
	if f.Exempt == nil {
		f.Exempt = DefaultExempt
	}
	return faultState{cfg: f, Faults: fakeserver.NewFaults(f.Every, f.Seed, f.Kinds, f.OutageKinds, f.Exempt)}
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

// SetOutage switches a total outage of the Web API on or off: while on,
// every call not exempt fails with one of Faults.OutageKinds, without
// effect. Socket Mode connections already open stay open.
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
// FaultTooMany it also picks Retry-After. Callers hold s.mu.
func (s *Server) pickFault(method string) (Fault, time.Duration) {
	kind, ok := s.faults.Pick(method)
	switch {
	case !ok:
		return 0, 0
	case kind == FaultTooMany:
		return kind, time.Duration(1+s.faults.IntN(retrySeconds(s.faults.cfg.MaxRetryAfter))) * time.Second
	}
	return kind, 0
}

// faultRecord is what Call.Error says of a call failed by kind.
func faultRecord(kind Fault) string {
	switch kind {
	case FaultTooMany:
		return "ratelimited"
	case FaultInternal:
		return "http 500"
	case FaultBadGateway:
		return "http 502"
	case FaultHang:
		return "no answer"
	}
	return "connection reset"
}

// errorPage is an HTML error page, as Slack's edge serves for 5xx.
func errorPage(status int) string {
	return "<html>\r\n<head><title>" + strconv.Itoa(status) + " " + http.StatusText(status) + "</title></head>\r\n<body>\r\n<center><h1>" +
		strconv.Itoa(status) + " " + http.StatusText(status) + "</h1></center>\r\n</body>\r\n</html>\r\n"
}

// serveFault fails a call as kind says, without acting on it.
func (s *Server) serveFault(w http.ResponseWriter, hr *http.Request, kind Fault, retryAfter time.Duration) {
	switch kind {
	case FaultTooMany:
		s.writeError(w, &apiError{code: "ratelimited", status: http.StatusTooManyRequests, retryAfter: retryAfter})
	case FaultInternal, FaultBadGateway:
		status := http.StatusInternalServerError
		if kind == FaultBadGateway {
			status = http.StatusBadGateway
		}
		page := errorPage(status)
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		w.WriteHeader(status)
		_, _ = io.WriteString(w, page)
	case FaultHang:
		s.hang(w, hr)
	default:
		fakeserver.ResetConn(w)
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
