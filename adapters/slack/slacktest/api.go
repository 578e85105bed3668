package slacktest

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/parley-chat/parley/adapters/internal/fakeserver"
)

// obj is a JSON object in an answer.
type obj = map[string]any

// apiError is a Web API error answer.
type apiError struct {
	code       string
	status     int           // HTTP status; 0 means 200
	retryAfter time.Duration // 429 only
	needed     string        // missing_scope only
	provided   string
	errors     []string // invalid_blocks details
	limited    bool     // refused by the limits, counted by RateLimited
}

func errCode(code string) *apiError { return &apiError{code: code} }

// request is one Web API call being handled.
type request struct {
	method  string
	token   string
	p       map[string]string
	http    *http.Request
	now     time.Time
	channel string // what the call named, for the record
	thread  string // the thread_ts it named, for the record
}

// method is how the server handles one Web API method.
type method struct {
	handle func(*Server, *request) (obj, *apiError)
	// app marks a method for the app-level token; all others take the
	// bot token.
	app bool
	// scope is the scope the method needs ("" none, or checked by the
	// handler because it depends on the channel).
	scope string
	// rate is the method's limit per workspace with Options.Limits.
	rate quota
	// enabled reports whether the workspace offers the method; nil means
	// always.
	enabled func(Options) bool
	// disabledErr is the answer when it is not offered; refusal, when
	// set, picks it from the options instead.
	disabledErr string
	refusal     func(Options) string
}

// Slack's rate tiers, per method and workspace.
var (
	tier2 = quota{N: 20, Per: time.Minute}
	tier3 = quota{N: 50, Per: time.Minute}
	tier4 = quota{N: 100, Per: time.Minute}
)

var methods map[string]method

func init() {
	streaming := func(o Options) bool { return o.Streaming }
	streamRefusal := func(o Options) string { return o.StreamingRefusal }
	methods = map[string]method{
		"auth.test":                    {handle: (*Server).authTest},
		"apps.connections.open":        {handle: (*Server).connectionsOpen, app: true, scope: "connections:write"},
		"conversations.info":           {handle: (*Server).conversationsInfo, rate: tier3},
		"conversations.history":        {handle: (*Server).conversationsHistory, rate: tier3},
		"conversations.replies":        {handle: (*Server).conversationsReplies, rate: tier3},
		"users.info":                   {handle: (*Server).usersInfo, scope: "users:read", rate: tier4},
		"chat.postMessage":             {handle: (*Server).postMessage, scope: "chat:write"}, // limited per channel by its handler
		"chat.update":                  {handle: (*Server).updateMessage, scope: "chat:write", rate: tier3},
		"chat.delete":                  {handle: (*Server).deleteMessage, scope: "chat:write", rate: tier3},
		"chat.getPermalink":            {handle: (*Server).getPermalink, rate: tier4},
		"reactions.add":                {handle: (*Server).addReaction, scope: "reactions:write", rate: tier3},
		"reactions.remove":             {handle: (*Server).removeReaction, scope: "reactions:write", rate: tier3},
		"files.getUploadURLExternal":   {handle: (*Server).getUploadURL, scope: "files:write", rate: tier2},
		"files.completeUploadExternal": {handle: (*Server).completeUpload, scope: "files:write", rate: tier2},
		"files.info":                   {handle: (*Server).filesInfo, scope: "files:read", rate: tier2},
		"chat.startStream":             {handle: (*Server).startStream, scope: "chat:write", rate: tier2, enabled: streaming, refusal: streamRefusal},
		"chat.appendStream":            {handle: (*Server).appendStream, scope: "chat:write", rate: tier4, enabled: streaming, refusal: streamRefusal},
		"chat.stopStream":              {handle: (*Server).stopStream, scope: "chat:write", rate: tier2, enabled: streaming, refusal: streamRefusal},
		"assistant.threads.setStatus": {
			handle: (*Server).setStatus, scope: "chat:write,assistant:write", rate: tier3,
			enabled: func(o Options) bool { return o.AssistantThreads }, disabledErr: "not_allowed",
		},
	}
}

// serveAPI answers POST (or GET) /api/{method}.
func (s *Server) serveAPI(w http.ResponseWriter, hr *http.Request, name string) {
	r := &request{method: name, http: hr, now: s.now()}
	var e *apiError
	r.p, e = readParams(hr)
	m, known := methods[name]
	if e == nil && !known {
		e = errCode("unknown_method")
	}
	r.token = bearer(hr)
	if r.token == "" {
		r.token = r.p["token"]
	}
	s.mu.Lock()
	r.channel = firstOf(r.p, "channel", "channel_id")
	r.thread = r.p["thread_ts"]
	var fault Fault
	var faultRetry time.Duration
	if e == nil {
		e = s.takeFailure(name)
		if e == nil {
			fault, faultRetry = s.pickFault(name)
		}
	}
	if fault != 0 && fault != FaultLostAnswer {
		// A faulted call has no effect: it is recorded (on arrival, for a
		// hang) and never reaches its handler.
		s.record(r, faultRecord(fault), faultRetry, fault)
		s.mu.Unlock()
		s.serveFault(w, hr, fault, faultRetry)
		return
	}
	var result obj
	if e == nil {
		result, e = s.dispatch(r, m)
	}
	code, retry := "", time.Duration(0)
	if e != nil {
		code, retry = e.code, e.retryAfter
		if e.limited {
			s.limited++
		}
	}
	s.record(r, code, retry, fault)
	s.mu.Unlock()
	if fault == FaultLostAnswer {
		fakeserver.ResetConn(w)
		return
	}
	s.scopeHeaders(w, r.token, m.scope)
	if e != nil {
		s.writeError(w, e)
		return
	}
	result["ok"] = true
	writeJSON(w, http.StatusOK, result)
}

// dispatch authenticates r and runs m's handler. Callers hold s.mu.
func (s *Server) dispatch(r *request, m method) (obj, *apiError) {
	token := r.token
	switch {
	case token == "":
		return nil, errCode("not_authed")
	case token != s.BotToken && token != s.AppToken:
		return nil, errCode("invalid_auth")
	case m.app != (token == s.AppToken):
		return nil, errCode("not_allowed_token_type")
	}
	if m.enabled != nil && !m.enabled(s.opts) {
		if m.refusal != nil {
			return nil, errCode(m.refusal(s.opts))
		}
		return nil, errCode(m.disabledErr)
	}
	if m.scope != "" {
		if e := s.needScope(m.scope, m.app); e != nil {
			return nil, e
		}
	}
	if m.rate.N > 0 {
		if e := s.limit(r.now, methodWindow(s.TeamID, r.method, m.rate)); e != nil {
			return nil, e
		}
	}
	return m.handle(s, r)
}

// needScope refuses a call whose token lacks scope, naming what it needs
// and what the token has. Callers hold s.mu.
func (s *Server) needScope(scope string, app bool) *apiError {
	have := s.scopes
	if app {
		have = s.appScopes
	}
	for _, alt := range strings.Split(scope, ",") {
		if have[alt] {
			return nil
		}
	}
	provided := make([]string, 0, len(have))
	for sc := range have {
		provided = append(provided, sc)
	}
	sort.Strings(provided)
	return &apiError{code: "missing_scope", needed: scope, provided: strings.Join(provided, ",")}
}

// scopeHeaders sets X-OAuth-Scopes (the token's scopes) and
// X-Accepted-OAuth-Scopes (what the method takes), as Slack does on its
// answers to a valid token.
func (s *Server) scopeHeaders(w http.ResponseWriter, token, accepted string) {
	switch token {
	case s.BotToken:
		w.Header().Set("X-OAuth-Scopes", strings.Join(s.opts.Scopes, ","))
	case s.AppToken:
		w.Header().Set("X-OAuth-Scopes", strings.Join(s.opts.AppScopes, ","))
	default:
		return
	}
	if accepted != "" {
		w.Header().Set("X-Accepted-OAuth-Scopes", accepted)
	}
}

// record appends a call to the record. Callers hold s.mu.
func (s *Server) record(r *request, code string, retry time.Duration, fault Fault) {
	s.calls = append(s.calls, Call{Time: r.now, Method: r.method, Channel: r.channel, Thread: r.thread, Error: code, RetryAfter: retry, Fault: fault})
	s.changed()
}

// takeFailure pops the next FailNext failure of method. Callers hold s.mu.
func (s *Server) takeFailure(method string) *apiError {
	q := s.failures[method]
	if len(q) == 0 {
		return nil
	}
	s.failures[method] = q[1:]
	f := q[0]
	if f.Code == "" && f.Status == http.StatusTooManyRequests {
		f.Code = "ratelimited"
	}
	return &apiError{code: f.Code, status: f.Status, retryAfter: f.RetryAfter}
}

// writeError answers e as Slack does: 200 (or e.status) with ok:false and
// the code; a 429 with Retry-After in whole seconds.
func (s *Server) writeError(w http.ResponseWriter, e *apiError) {
	body := obj{"ok": false, "error": e.code}
	if e.needed != "" {
		body["needed"] = e.needed
		body["provided"] = e.provided
	}
	if len(e.errors) > 0 {
		body["errors"] = e.errors
		msgs := make([]string, len(e.errors))
		for i, m := range e.errors {
			msgs[i] = "[ERROR] " + m
		}
		body["response_metadata"] = obj{"messages": msgs}
	}
	status := e.status
	if status == 0 {
		status = http.StatusOK
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(e.retryAfter)))
	}
	writeJSON(w, status, body)
}

// retrySeconds is d in whole seconds, rounded up, at least 1.
func retrySeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// bearer is the token of an "Authorization: Bearer" header.
func bearer(hr *http.Request) string {
	v, ok := strings.CutPrefix(hr.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(v)
}

// readParams reads a call's arguments from the query and a form or JSON
// body. JSON values that are not strings are kept as JSON text, the way
// form posts carry blocks.
func readParams(hr *http.Request) (map[string]string, *apiError) {
	p := map[string]string{}
	for k, vs := range hr.URL.Query() {
		p[k] = vs[0]
	}
	ct, _, _ := mime.ParseMediaType(hr.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		data, err := io.ReadAll(io.LimitReader(hr.Body, 8<<20))
		if err != nil {
			return p, errCode("request_timeout")
		}
		if len(strings.TrimSpace(string(data))) == 0 {
			return p, nil
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(data, &raw); err != nil {
			return p, errCode("invalid_json")
		}
		for k, v := range raw {
			var str string
			if json.Unmarshal(v, &str) == nil {
				p[k] = str
			} else if string(v) != "null" {
				p[k] = string(v)
			}
		}
	case "application/x-www-form-urlencoded", "multipart/form-data":
		hr.Body = http.MaxBytesReader(nil, hr.Body, 8<<20)
		if err := hr.ParseMultipartForm(8 << 20); err != nil && err != http.ErrNotMultipart {
			return p, errCode("invalid_form_data")
		}
		for k, vs := range hr.PostForm {
			p[k] = vs[0]
		}
	}
	return p, nil
}

func firstOf(p map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := p[k]; v != "" {
			return v
		}
	}
	return ""
}

// flag reads a boolean argument the ways Slack accepts it.
func flag(p map[string]string, k string) bool {
	switch strings.ToLower(p[k]) {
	case "1", "true", "yes":
		return true
	}
	return false
}
