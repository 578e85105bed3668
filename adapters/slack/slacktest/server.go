package slacktest

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/internal/fakeserver"
)

// Options configure a Server.
type Options struct {
	// Limits enforces Slack's rate limits (see the package doc): over a
	// limit the answer is HTTP 429 with a Retry-After header (whole
	// seconds, rounded up) and {"ok":false,"error":"ratelimited"}.
	Limits bool
	// Scopes are the bot token's scopes, answered by auth.test in the
	// X-OAuth-Scopes header and checked by every method; nil means
	// DefaultScopes.
	Scopes []string
	// AppScopes are the app-level token's scopes; nil means
	// ["connections:write"], which apps.connections.open needs.
	AppScopes []string
	// AckTimeout is how long a Socket Mode envelope waits for its ack
	// before it is redelivered; 0 means 3s, as at Slack.
	AckTimeout time.Duration
	// Streaming makes chat.startStream, chat.appendStream and
	// chat.stopStream work; without it they are refused with
	// StreamingRefusal, as in a workspace or app Slack does not offer them
	// to.
	Streaming bool
	// StreamingRefusal is the error code of the streaming methods when
	// Streaming is off: "" means "unknown_method" (Slack's "This method is
	// currently not available"); "access_denied", "no_permission" and
	// "channel_type_not_supported" are the other refusals Slack documents
	// for them.
	StreamingRefusal string
	// StreamLifetime is how long a stream lasts after chat.startStream
	// before Slack ends it on its own (appends and stops then answer
	// message_not_in_streaming_state, and the message keeps what it
	// showed); 0 means 5 minutes, as observed at Slack (appends do not
	// extend it).
	StreamLifetime time.Duration
	// AssistantThreads makes assistant.threads.setStatus work; without it
	// it answers "not_allowed", as in a workspace or app without the
	// Agents & AI Apps feature.
	AssistantThreads bool
	// Listener, when set, is where the server serves (URL and the Socket
	// Mode URL are made of its address), e.g. an in-memory listener, so
	// that a test runs the fake and its client on a testing/synctest
	// bubble's fake clock; a loopback port by default. The server closes
	// it when the test ends.
	Listener net.Listener
}

// DefaultScopes are the bot scopes a Server grants when Options.Scopes is
// nil: everything parley's Slack app asks for.
var DefaultScopes = []string{
	"app_mentions:read", "assistant:write", "channels:history", "channels:read", "chat:write",
	"commands", "files:read", "files:write", "groups:history", "groups:read", "im:history",
	"im:read", "im:write", "reactions:read", "reactions:write", "users:read",
}

// The identity of the fake workspace and app.
const (
	botToken   = "xoxb-1000000001-2000000002-ParleyFakeBotToken0001"
	appToken   = "xapp-1-A0PARLEYAP1-3000000003-ParleyFakeAppToken0001"
	teamID     = "T0PARLEY001"
	teamDomain = "parley-test"
	appID      = "A0PARLEYAP1"
	botUserID  = "U0PARLEYBT1"
	botID      = "B0PARLEYBT1"
	botName    = "parley"
	// verificationToken is the deprecated token Slack still puts in
	// payloads.
	verificationToken = "fakeVerificationToken0001"
)

// Server is a fake Slack: the Web API under URL, file uploads and
// downloads, response URLs, and a Socket Mode websocket. Its methods are
// safe for concurrent use.
type Server struct {
	// URL is the Web API base with a trailing slash, for
	// slack.OptionAPIURL: "http://127.0.0.1:PORT/api/".
	URL string
	// BotToken is the bot token ("xoxb-…") the Web API accepts.
	BotToken string
	// AppToken is the app-level token ("xapp-…") apps.connections.open
	// accepts.
	AppToken string
	// BotUserID is the bot's user id: the author of what the bot posts.
	BotUserID string
	// BotID is the bot's bot id ("B…"), carried by its messages as bot_id.
	BotID string
	// TeamID is the workspace's id.
	TeamID string

	opts Options
	tb   testing.TB
	hs   *httptest.Server
	base string // "http://127.0.0.1:PORT"
	done chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	signal    fakeserver.Signal // fired on every change
	scopes    map[string]bool
	appScopes map[string]bool
	users     map[string]*user
	channels  map[string]*channel
	dms       map[string]string // user id → DM channel id
	seq       map[byte]int      // next id per id prefix
	lastTS    time.Time
	calls     []Call
	failures  map[string][]Error
	limiter   limiter
	limited   int
	files     map[string]*file
	uploads   map[string]*file // upload ticket → file awaiting its bytes
	responses map[string]*responseURL
	statuses  map[string]string // channel + "/" + thread ts → assistant status
	sock      socketState
	events    httpState // the Events API over HTTP, once DeliverEvents
	faults    faultState
}

// Call is one request to the Web API (or a response URL) the server
// answered.
type Call struct {
	Time    time.Time // arrival
	Method  string    // "chat.postMessage"; "response_url" for response URLs
	Channel string    // the channel the call named, if any
	// Thread is the thread_ts the call named, if any: the thread a reply
	// was posted in, or whose assistant status was set.
	Thread string
	// Error is Slack's error code, "" on success ("ratelimited" for a 429;
	// for a fault without a JSON answer, what the client saw instead).
	Error string
	// RetryAfter is the Retry-After of a 429 answer.
	RetryAfter time.Duration
	// Fault is the failure injected into the call (InjectFaults,
	// SetOutage); 0 for a call answered normally or by FailNext.
	Fault Fault
}

// Error is an answer the server can be told to give (see FailNext).
type Error struct {
	Code string // Slack's error code, e.g. "channel_not_found", "ratelimited"
	// Status is the HTTP status; 0 means 200, as Slack answers errors with
	// ok:false. With 429 the answer carries Retry-After.
	Status     int
	RetryAfter time.Duration
}

// NewServer starts a fake Slack on a loopback port (or on
// Options.Listener); it is closed when the test ends.
func NewServer(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if opts.AckTimeout <= 0 {
		opts.AckTimeout = 3 * time.Second
	}
	if opts.Scopes == nil {
		opts.Scopes = DefaultScopes
	}
	if opts.StreamingRefusal == "" {
		opts.StreamingRefusal = "unknown_method"
	}
	if opts.StreamLifetime <= 0 {
		opts.StreamLifetime = 5 * time.Minute
	}
	if opts.AppScopes == nil {
		opts.AppScopes = []string{"connections:write"}
	}
	s := &Server{
		BotToken:  botToken,
		AppToken:  appToken,
		BotUserID: botUserID,
		BotID:     botID,
		TeamID:    teamID,
		opts:      opts,
		tb:        tb,
		done:      make(chan struct{}),
		scopes:    setOf(opts.Scopes),
		appScopes: setOf(opts.AppScopes),
		users:     map[string]*user{},
		channels:  map[string]*channel{},
		dms:       map[string]string{},
		seq:       map[byte]int{},
		failures:  map[string][]Error{},
		limiter:   newLimiter(),
		files:     map[string]*file{},
		uploads:   map[string]*file{},
		responses: map[string]*responseURL{},
		statuses:  map[string]string{},
		sock:      newSocketState(),
		faults:    newFaultState(Faults{}),
	}
	s.users[botUserID] = &user{id: botUserID, name: botName, bot: true}
	if opts.Listener != nil {
		s.hs = &httptest.Server{Listener: opts.Listener, Config: &http.Server{Handler: s}}
		s.hs.Start()
	} else {
		s.hs = httptest.NewServer(s)
	}
	s.base = s.hs.URL
	s.URL = s.hs.URL + "/api/"
	tb.Cleanup(s.close)
	return s
}

// close stops everything: timers, websockets, held requests, the server.
func (s *Server) close() {
	s.mu.Lock()
	close(s.done)
	s.stopSocketsLocked()
	s.mu.Unlock()
	s.hs.Close()
	s.wg.Wait()
}

// Calls returns every call answered so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// RateLimited is how many calls the limits (Options.Limits) refused with
// 429; answers from FailNext and InjectFaults are not counted.
func (s *Server) RateLimited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limited
}

// FailNext makes the next call of method (e.g. "chat.update") fail with e
// instead of acting. Failures queue up.
func (s *Server) FailNext(method string, e Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], e)
}

// Await waits until cond holds, re-checking it whenever the server's state
// changes (a call, an envelope sent or acked, a connection), and fails the
// test after timeout. cond may call the inspectors.
func (s *Server) Await(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	s.signal.Await(tb, "slacktest", timeout, what, cond)
}

// changed wakes everything waiting for a change. Callers hold s.mu.
func (s *Server) changed() { s.signal.Changed() }

// ServeHTTP implements http.Handler: the Web API under /api/, the upload
// URLs, file downloads, response URLs and the Socket Mode websocket.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	path := hr.URL.Path
	switch {
	case strings.HasPrefix(path, "/api/"):
		s.serveAPI(w, hr, strings.TrimPrefix(path, "/api/"))
	case strings.HasPrefix(path, uploadPath):
		s.serveUpload(w, hr, strings.TrimPrefix(path, uploadPath))
	case strings.HasPrefix(path, filesPath):
		s.serveDownload(w, hr)
	case path == signinPath:
		serveSignin(w)
	case strings.HasPrefix(path, commandsPath), strings.HasPrefix(path, actionsPath):
		s.serveResponseURL(w, hr)
	case path == socketPath:
		s.serveSocket(w, hr)
	default:
		http.NotFound(w, hr)
	}
}

// writeJSON answers body as JSON with status.
func writeJSON(w http.ResponseWriter, status int, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		data = []byte(`{"ok":false,"error":"internal_error"}`)
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func setOf(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func (s *Server) now() time.Time { return time.Now() }
