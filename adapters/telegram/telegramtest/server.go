package telegramtest

import (
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/parley-chat/parley/adapters/internal/fakeserver"
)

// DefaultToken is the bot token when Options.Token is empty.
const DefaultToken = "123456789:TEST-fake-token"

// Options configure a Server.
type Options struct {
	// Token is the bot's token; requests with another one get 401. Its
	// number before the colon is the bot's user id.
	Token string
	// RichMessages makes the server speak Bot API 10.1 rich messages
	// (sendRichMessage, sendRichMessageDraft, rich_message on
	// editMessageText). Without it sendRichMessage answers 404 and
	// editMessageText ignores rich_message, like an older server.
	RichMessages bool
	// Limits enforces Telegram's rate limits (see Rates), answering 429.
	Limits bool
	// Rates overrides the limits enforced with Limits; zero fields keep
	// Telegram's values.
	Rates Rates
	// Now is the server's clock (message dates, rate windows, draft
	// expiry); time.Now by default. Long polling waits in real time.
	Now func() time.Time
	// BotUsername is the bot's @username, "parley_test_bot" by default.
	BotUsername string
	// WebhookClient delivers webhook updates; an http.Client with a short
	// timeout by default.
	WebhookClient *http.Client
	// Listener, when set, is where the server serves (URL is made of its
	// address), e.g. an in-memory listener, so that a test runs the fake
	// and its client on a testing/synctest bubble's fake clock; a loopback
	// port by default. The server closes it when the test ends.
	Listener net.Listener
}

// Server is a fake Telegram Bot API server. Its methods are safe for
// concurrent use.
type Server struct {
	// URL is the base URL to give bot.WithServerURL.
	URL string
	// Token is the bot token the server accepts.
	Token string

	opts  Options
	tb    testing.TB
	hs    *httptest.Server
	done  chan struct{}
	wg    sync.WaitGroup
	bot   models.User
	names map[string]string // lower-case method name → Telegram's spelling

	mu        sync.Mutex
	signal    fakeserver.Signal // fired on every change
	chats     map[int64]*chat
	chatOrder []int64
	nextGroup int64
	calls     []Call
	failures  map[string][]Error
	limiter   limiter
	limited   int
	files     map[string]*fileEntry
	paths     map[string]*fileEntry
	nextFile  int
	documents []Document
	callbacks map[string]*callback
	nextQuery int64
	commands  map[CommandScope][]models.BotCommand
	drafts    []*draft
	updates   updateQueue
	webhook   webhook
	faults    faultState
}

// Call is one Bot API request the server received (getUpdates and file
// downloads are not recorded).
type Call struct {
	Time      time.Time // when the request arrived
	Method    string    // Telegram's spelling, e.g. "sendMessage"
	Chat      int64
	Thread    int
	MessageID int
	Code      int    // error_code (HTTP status); 0 on success or without an answer
	Err       string // description of the error; "" on success
	// RetryAfter is parameters.retry_after of a 429 answer.
	RetryAfter int
	// Fault is the failure injected into the call (InjectFaults,
	// SetOutage); 0 for a call answered normally or by FailNext.
	Fault Fault
}

// Error is an answer the server can be told to give (see FailNext).
type Error struct {
	Code        int // HTTP status and error_code, e.g. 400, 429, 500
	Description string
	RetryAfter  int // parameters.retry_after, for 429
}

// NewServer starts a fake Bot API server on a loopback port (or on
// Options.Listener); it is closed when the test ends.
func NewServer(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if opts.Token == "" {
		opts.Token = DefaultToken
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.BotUsername == "" {
		opts.BotUsername = "parley_test_bot"
	}
	if opts.WebhookClient == nil {
		opts.WebhookClient = &http.Client{Timeout: 10 * time.Second}
	}
	botID, _ := strconv.ParseInt(strings.SplitN(opts.Token, ":", 2)[0], 10, 64)
	s := &Server{
		Token:     opts.Token,
		opts:      opts,
		tb:        tb,
		done:      make(chan struct{}),
		bot:       models.User{ID: botID, IsBot: true, FirstName: "Parley Test Bot", Username: opts.BotUsername, CanJoinGroups: true, CanReadAllGroupMessages: true},
		names:     map[string]string{},
		chats:     map[int64]*chat{},
		nextGroup: 1001000000000,
		failures:  map[string][]Error{},
		limiter:   newLimiter(opts.Rates),
		files:     map[string]*fileEntry{},
		paths:     map[string]*fileEntry{},
		callbacks: map[string]*callback{},
		nextQuery: 4242000000000000000,
		commands:  map[CommandScope][]models.BotCommand{},
		updates:   newUpdateQueue(),
		faults:    newFaultState(Faults{}),
	}
	for name := range handlers {
		s.names[strings.ToLower(name)] = name
	}
	s.names["getupdates"] = "getUpdates"
	if opts.Listener != nil {
		s.hs = &httptest.Server{Listener: opts.Listener, Config: &http.Server{Handler: s}}
		s.hs.Start()
	} else {
		s.hs = httptest.NewServer(s)
	}
	s.URL = s.hs.URL
	s.wg.Add(1)
	go s.deliverWebhooks()
	tb.Cleanup(func() {
		close(s.done)
		s.hs.Close()
		s.wg.Wait()
	})
	return s
}

// Bot is the bot's own user, as getMe answers.
func (s *Server) Bot() models.User { return s.bot }

// Calls returns every recorded request so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// RateLimited is how many requests were refused with 429 by the limits
// (failures injected with FailNext not included).
func (s *Server) RateLimited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limited
}

// FailNext makes the next request of method (Telegram's name, e.g.
// "sendMessage") fail with e instead of acting. Failures queue up.
func (s *Server) FailNext(method string, e Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(method)
	s.failures[key] = append(s.failures[key], e)
}

// Await waits until cond holds, re-checking it whenever the server's state
// changes, and fails the test after timeout. cond may call the inspectors.
func (s *Server) Await(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	s.signal.Await(tb, "telegramtest", timeout, what, cond)
}

// changed wakes everything waiting for a change. Callers hold s.mu.
func (s *Server) changed() { s.signal.Changed() }

func (s *Server) now() time.Time { return s.opts.Now() }

// request is one Bot API call being handled.
type request struct {
	method string
	p      params
	http   *http.Request
	now    time.Time
	// What the call touched, for the record.
	chat   int64
	thread int
	msgID  int
	// description accompanies a successful result (setWebhook's "Webhook
	// was set").
	description string
}

type handler func(s *Server, r *request) (any, *Error)

// handlers maps each method, by Telegram's spelling, to its handler.
// getUpdates is handled apart: it waits without holding the lock.
var handlers = map[string]handler{}

func init() {
	for name, h := range map[string]handler{
		"getMe":                  (*Server).getMe,
		"logOut":                 func(*Server, *request) (any, *Error) { return true, nil },
		"close":                  func(*Server, *request) (any, *Error) { return true, nil },
		"setWebhook":             (*Server).setWebhook,
		"deleteWebhook":          (*Server).deleteWebhook,
		"getWebhookInfo":         (*Server).getWebhookInfo,
		"getChat":                (*Server).getChat,
		"getChatMember":          (*Server).getChatMember,
		"getChatAdministrators":  (*Server).getChatAdministrators,
		"sendMessage":            (*Server).sendMessage,
		"sendRichMessage":        (*Server).sendRichMessage,
		"sendMessageDraft":       (*Server).sendMessageDraft,
		"sendRichMessageDraft":   (*Server).sendRichMessageDraft,
		"editMessageText":        (*Server).editMessageText,
		"editMessageReplyMarkup": (*Server).editMessageReplyMarkup,
		"deleteMessage":          (*Server).deleteMessage,
		"deleteMessages":         (*Server).deleteMessages,
		"sendChatAction":         (*Server).sendChatAction,
		"createForumTopic":       (*Server).createForumTopic,
		"editForumTopic":         (*Server).editForumTopic,
		"closeForumTopic":        (*Server).closeForumTopic,
		"reopenForumTopic":       (*Server).reopenForumTopic,
		"deleteForumTopic":       (*Server).deleteForumTopic,
		"setMyCommands":          (*Server).setMyCommands,
		"getMyCommands":          (*Server).getMyCommands,
		"deleteMyCommands":       (*Server).deleteMyCommands,
		"answerCallbackQuery":    (*Server).answerCallbackQuery,
		"getFile":                (*Server).getFile,
		"sendDocument":           (*Server).sendDocument,
		"sendPhoto":              (*Server).sendPhoto,
	} {
		handlers[name] = h
	}
}

// richOnly are the methods a server without rich messages does not know.
var richOnly = map[string]bool{"sendRichMessage": true, "sendRichMessageDraft": true}

// ServeHTTP implements http.Handler: POST (or GET) /bot{token}/{method}
// and GET /file/bot{token}/{path}.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	if rest, ok := strings.CutPrefix(hr.URL.Path, "/file/bot"); ok {
		s.serveFile(w, rest)
		return
	}
	rest, ok := strings.CutPrefix(hr.URL.Path, "/bot")
	if !ok {
		writeError(w, &Error{Code: 404, Description: "Not Found"})
		return
	}
	token, method, ok := strings.Cut(rest, "/")
	if !ok {
		writeError(w, &Error{Code: 404, Description: "Not Found"})
		return
	}
	if token != s.Token {
		writeError(w, &Error{Code: 401, Description: "Unauthorized"})
		return
	}
	method = strings.TrimPrefix(method, "test/")
	name, known := s.names[strings.ToLower(method)]
	if !known {
		name = method
	}
	r := &request{method: name, http: hr, now: s.now()}
	if name == "getUpdates" {
		if e := s.takeFailure(name); e != nil {
			writeError(w, e)
			return
		}
		p, e := readParams(hr)
		if e != nil {
			writeError(w, e)
			return
		}
		r.p = p
		s.mu.Lock()
		fault, retryAfter := s.pickFault(name)
		s.mu.Unlock()
		if fault != 0 && fault != FaultLostAnswer {
			s.serveFault(w, hr, fault, retryAfter)
			return
		}
		result, e := s.getUpdates(r)
		if fault == FaultLostAnswer {
			fakeserver.ResetConn(w)
			return
		}
		if e != nil {
			writeError(w, e)
			return
		}
		writeResult(w, result, "")
		return
	}

	var (
		result     any
		e          *Error
		failed     bool // by FailNext
		fault      Fault
		retryAfter int
	)
	switch {
	case !known || richOnly[name] && !s.opts.RichMessages:
		e = &Error{Code: 404, Description: "Not Found"}
	default:
		r.p, e = readParams(hr)
		if e == nil {
			e = s.takeFailure(name)
			failed = e != nil
		}
	}
	s.mu.Lock()
	switch {
	case failed:
		s.faultScope(r)
	case e == nil:
		fault, retryAfter = s.pickFault(name)
	}
	if fault != 0 && fault != FaultLostAnswer {
		// A faulted call has no effect: it is recorded (on arrival, for a
		// hang) and never reaches its handler.
		s.faultScope(r)
		call := Call{Time: r.now, Method: name, Chat: r.chat, Thread: r.thread, MessageID: r.msgID, Fault: fault, RetryAfter: retryAfter}
		call.Code, call.Err = faultRecord(fault, retryAfter)
		s.calls = append(s.calls, call)
		s.changed()
		s.mu.Unlock()
		s.serveFault(w, hr, fault, retryAfter)
		return
	}
	if e == nil {
		result, e = handlers[name](s, r)
	}
	call := Call{Time: r.now, Method: name, Chat: r.chat, Thread: r.thread, MessageID: r.msgID, Fault: fault}
	if e != nil {
		call.Code, call.Err, call.RetryAfter = e.Code, e.Description, e.RetryAfter
	}
	s.calls = append(s.calls, call)
	s.changed()
	s.mu.Unlock()
	if fault == FaultLostAnswer {
		fakeserver.ResetConn(w)
		return
	}
	if e != nil {
		writeError(w, e)
		return
	}
	writeResult(w, result, r.description)
}

func (s *Server) takeFailure(method string) *Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(method)
	q := s.failures[key]
	if len(q) == 0 {
		return nil
	}
	s.failures[key] = q[1:]
	e := q[0]
	return &e
}

func writeResult(w http.ResponseWriter, result any, description string) {
	body := struct {
		OK          bool   `json:"ok"`
		Result      any    `json:"result"`
		Description string `json:"description,omitempty"`
	}{true, result, description}
	writeJSON(w, http.StatusOK, body)
}

func writeError(w http.ResponseWriter, e *Error) {
	type parameters struct {
		RetryAfter int `json:"retry_after,omitempty"`
	}
	body := struct {
		OK          bool        `json:"ok"`
		ErrorCode   int         `json:"error_code"`
		Description string      `json:"description"`
		Parameters  *parameters `json:"parameters,omitempty"`
	}{OK: false, ErrorCode: e.Code, Description: e.Description}
	if e.RetryAfter > 0 {
		body.Parameters = &parameters{RetryAfter: e.RetryAfter}
	}
	writeJSON(w, e.Code, body)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		data = []byte(`{"ok":false,"error_code":500,"description":"Internal Server Error: ` + strings.ReplaceAll(err.Error(), `"`, `'`) + `"}`)
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func badRequest(desc string) *Error { return &Error{Code: 400, Description: "Bad Request: " + desc} }

func forbidden(desc string) *Error { return &Error{Code: 403, Description: "Forbidden: " + desc} }

// maxUpload is the Bot API's limit for files bots upload.
const maxUpload = 50 << 20

// params are a request's parameters: form fields as sent by go-telegram/bot
// (strings raw, everything else JSON), JSON bodies, or URL query.
type params struct {
	v     map[string]string
	files map[string]*multipart.FileHeader
}

func readParams(hr *http.Request) (params, *Error) {
	p := params{v: map[string]string{}, files: map[string]*multipart.FileHeader{}}
	for k, vs := range hr.URL.Query() {
		p.v[k] = vs[0]
	}
	ct, _, _ := mime.ParseMediaType(hr.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
		hr.Body = http.MaxBytesReader(nil, hr.Body, maxUpload+1<<20)
		if err := hr.ParseMultipartForm(32 << 20); err != nil {
			if strings.Contains(err.Error(), "too large") {
				return p, &Error{Code: 413, Description: "Request Entity Too Large"}
			}
			return p, badRequest("can't parse multipart/form-data: " + err.Error())
		}
		for k, vs := range hr.MultipartForm.Value {
			p.v[k] = vs[0]
		}
		for k, fs := range hr.MultipartForm.File {
			p.files[k] = fs[0]
		}
	case "application/json":
		data, err := io.ReadAll(hr.Body)
		if err != nil {
			return p, badRequest("can't read request body")
		}
		var raw map[string]json.RawMessage
		if len(data) > 0 {
			if err := json.Unmarshal(data, &raw); err != nil {
				return p, badRequest("can't parse JSON encoded request body")
			}
		}
		for k, v := range raw {
			var str string
			if json.Unmarshal(v, &str) == nil {
				p.v[k] = str
			} else if string(v) != "null" {
				p.v[k] = string(v)
			}
		}
	case "application/x-www-form-urlencoded":
		if err := hr.ParseForm(); err != nil {
			return p, badRequest("can't parse request body")
		}
		for k, vs := range hr.PostForm {
			p.v[k] = vs[0]
		}
	}
	return p, nil
}

func (p params) str(k string) string { return p.v[k] }

func (p params) has(k string) bool { _, ok := p.v[k]; return ok }

func (p params) int(k string) (int64, *Error) {
	v := strings.TrimSpace(p.v[k])
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, badRequest("invalid " + k + " specified")
	}
	return n, nil
}

func (p params) bool(k string) bool {
	switch strings.ToLower(p.v[k]) {
	case "true", "1", "yes":
		return true
	}
	return false
}

func (p params) json(k string, dst any) bool {
	v, ok := p.v[k]
	return ok && v != "" && json.Unmarshal([]byte(v), dst) == nil
}
