package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/core/uistate"
)

// freshness bounds how long a snapshot waits for the bus feed to catch up
// with the store (see states.waitApplied).
const freshness = 2 * time.Second

func (a *Adapter) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/health", a.health)
	mux.HandleFunc("GET /api/sessions", a.withBackend(a.listSessions))
	mux.HandleFunc("POST /api/sessions", a.withBackend(a.createSession))
	mux.HandleFunc("POST /api/chat", a.withBackend(a.chat))
	mux.HandleFunc("POST /api/sessions/{id}/messages", a.withBackend(a.postMessage))
	mux.HandleFunc("POST /api/sessions/{id}/answer", a.withBackend(a.answer))
	mux.HandleFunc("GET /api/sessions/{id}/state", a.withBackend(a.state))
	mux.HandleFunc("POST /api/sessions/{id}/title", a.withBackend(a.rename))
	mux.HandleFunc("POST /api/sessions/{id}/archive", a.withBackend(a.archive))
	mux.HandleFunc("GET /api/events", a.withBackend(a.events))
	mux.HandleFunc("GET /api/agents", a.agents)
	mux.HandleFunc("GET /api/agents/run", a.runAgents)
	mux.HandleFunc("POST /api/backup", a.serveBackup)
	pairing := a.pairingRoutes()
	mux.Handle("/api/pairing", pairing)
	mux.Handle("/api/pairing/", pairing)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{"no such API endpoint: " + r.Method + " " + r.URL.Path})
	})
	mux.Handle("/", pageHandler())
	return mux
}

// call is what an API handler needs: where to read and whom to ask.
type call struct {
	back    *backend
	handler core.Handler
}

// withBackend answers 503 while the adapter is not attached to a store and
// bus or has no Handler yet (before Run, after it ended).
func (a *Adapter) withBackend(fn func(http.ResponseWriter, *http.Request, call)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, h := a.back.Load(), a.handler.Load()
		if b == nil || h == nil {
			writeJSON(w, http.StatusServiceUnavailable, errorBody{"parley is starting or stopping; try again"})
			return
		}
		fn(w, r, call{back: b, handler: h.h})
	}
}

// sessionView is a session as the API shows it: what a client needs, not
// where it lives on each platform.
type sessionView struct {
	ID              core.SessionID     `json:"id"`
	Title           string             `json:"title"`
	Status          core.Status        `json:"status"`
	Created         time.Time          `json:"created"`
	Updated         time.Time          `json:"updated"`
	LastInputOrigin core.Origin        `json:"last_input_origin,omitempty"`
	Turn            uint64             `json:"turn"`
	Questions       []core.Question    `json:"questions,omitempty"`
	Adapters        []core.AdapterName `json:"adapters"`
	// Agent names the agent parley runs the session with, absent for the
	// default one.
	Agent string `json:"agent,omitempty"`
}

func viewOf(s core.Session) sessionView {
	v := sessionView{ID: s.ID, Title: s.Title, Status: s.Status, Created: s.Created, Updated: s.Updated,
		LastInputOrigin: s.LastInputOrigin, Turn: s.Turn, Questions: s.Questions, Adapters: []core.AdapterName{}, Agent: s.Agent}
	for name := range s.Bindings {
		v.Adapters = append(v.Adapters, name)
	}
	slices.Sort(v.Adapters)
	return v
}

// createSession serves POST /api/sessions {title?, agent?} (origin api):
// agent names the agent parley runs it with (GET /api/agents/run lists
// them; an unknown name is a 400 naming them).
func (a *Adapter) createSession(w http.ResponseWriter, r *http.Request, c call) {
	var req struct {
		Title    string `json:"title"`
		Agent    string `json:"agent"`
		ClientID string `json:"client_id"`
	}
	if !a.decode(w, r, &req, true) {
		return
	}
	res, err := c.handler.Handle(r.Context(), core.Command{Kind: core.CreateSession, Origin: core.OriginAPI,
		Title: req.Title, Agent: req.Agent, PlatformID: clientKey("session", req.ClientID)})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := c.back.store.Session(r.Context(), res.Session)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, viewOf(s))
}

// posted is the answer to a message posted through the API.
type posted struct {
	Session   core.SessionID `json:"session_id"`
	ID        core.MessageID `json:"id"`
	Time      time.Time      `json:"ts"`
	Queued    bool           `json:"queued,omitempty"`
	Duplicate bool           `json:"duplicate,omitempty"`
}

func postedOf(res core.Result) posted {
	return posted{Session: res.Session, ID: res.Message.ID, Time: res.Message.Time,
		Queued: res.Queued, Duplicate: res.Duplicate}
}

// chat serves POST /api/chat {session_id?, text, client_id?}: a message
// from a tool (origin api), in a new session when none is given. client_id,
// when set, makes a retried request land once.
func (a *Adapter) chat(w http.ResponseWriter, r *http.Request, c call) {
	var req struct {
		Session  core.SessionID `json:"session_id"`
		Text     string         `json:"text"`
		ClientID string         `json:"client_id"`
	}
	if !a.decode(w, r, &req, false) {
		return
	}
	if strings.TrimSpace(req.Text) == "" {
		writeJSON(w, http.StatusBadRequest, errorBody{"text is empty"})
		return
	}
	if req.Session == "" {
		res, err := c.handler.Handle(r.Context(), core.Command{Kind: core.CreateSession, Origin: core.OriginAPI,
			PlatformID: clientKey("chat-session", req.ClientID)})
		if err != nil {
			a.fail(w, r, err)
			return
		}
		req.Session = res.Session
	}
	res, err := c.handler.Handle(r.Context(), core.Command{Kind: core.SendMessage, Session: req.Session,
		Origin: core.OriginAPI, Text: req.Text, PlatformID: clientKey("chat", req.ClientID)})
	if err != nil {
		a.failFor(w, r, err, req.Session)
		return
	}
	writeJSON(w, http.StatusOK, postedOf(res))
}

// postMessage serves POST /api/sessions/{id}/messages {text, client_id?}:
// the page's composer, origin web.
func (a *Adapter) postMessage(w http.ResponseWriter, r *http.Request, c call) {
	var req struct {
		Text     string `json:"text"`
		ClientID string `json:"client_id"`
	}
	if !a.decode(w, r, &req, false) {
		return
	}
	id := core.SessionID(r.PathValue("id"))
	res, err := c.handler.Handle(r.Context(), core.Command{Kind: core.SendMessage, Session: id,
		Origin: core.Origin(Name), Actor: Actor, Place: place(id), Text: req.Text,
		PlatformID: clientKey("msg", req.ClientID)})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, postedOf(res))
}

// answer serves POST /api/sessions/{id}/answer {question_id, option, text?}:
// a click on one of a question's buttons (option is 1-based), origin web.
func (a *Adapter) answer(w http.ResponseWriter, r *http.Request, c call) {
	var req struct {
		QuestionID string `json:"question_id"`
		Option     int    `json:"option"`
		Text       string `json:"text"`
	}
	if !a.decode(w, r, &req, false) {
		return
	}
	if req.QuestionID == "" || req.Option < 0 {
		writeJSON(w, http.StatusBadRequest, errorBody{"question_id and a positive option (or text) are required"})
		return
	}
	id := core.SessionID(r.PathValue("id"))
	res, err := c.handler.Handle(r.Context(), core.Command{Kind: core.Answer, Session: id,
		Origin: core.Origin(Name), Actor: Actor, Place: place(id), QuestionID: req.QuestionID,
		Option: req.Option, Text: req.Text})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, postedOf(res))
}

// state serves GET /api/sessions/{id}/state: the UiState snapshot. It
// includes every event stored before the request arrived, so a client that
// opened /api/events first and then loads the snapshot misses nothing.
func (a *Adapter) state(w http.ResponseWriter, r *http.Request, c call) {
	id := core.SessionID(r.PathValue("id"))
	last, err := c.back.store.LastEventSeq(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c.back.states.waitApplied(r.Context(), last, freshness)
	st, err := c.back.states.get(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, uistate.Snapshot(st))
}

func clientKey(kind, id string) string {
	if id == "" {
		return ""
	}
	return kind + ":" + id
}

type errorBody struct {
	Error string `json:"error"`
}

// decode reads a JSON body of at most MaxBody bytes into v, answering the
// request itself when it cannot. An empty body is accepted when emptyOK.
// Unknown fields are refused by name, so a misspelt one is not silently
// dropped, and so is text that is not valid Unicode, which encoding/json
// would store as U+FFFD.
func (a *Adapter) decode(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.opts.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{"request body is larger than the limit of " +
			formatBytes(tooBig.Limit)})
		return false
	case err != nil:
		writeJSON(w, http.StatusBadRequest, errorBody{"request body could not be read"})
		return false
	case len(bytes.TrimSpace(body)) == 0:
		if emptyOK {
			return true
		}
		writeJSON(w, http.StatusBadRequest, errorBody{"request body is empty; send JSON"})
		return false
	}
	if err := core.CheckJSONText(body); err != nil {
		msg, _ := delivery.UserMessage(err)
		writeJSON(w, http.StatusBadRequest, errorBody{"request body refused: " + msg})
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{"request body is not valid JSON for this endpoint: " + core.JSONProblem(err)})
		return false
	}
	if dec.More() {
		writeJSON(w, http.StatusBadRequest, errorBody{"request body has data after its JSON object"})
		return false
	}
	return true
}

// fail answers with the status that fits err, in words for the client:
// the Handler's message for a refusal it explains, otherwise what the
// sentinel means. Package prefixes and store details stay in the log.
func (a *Adapter) fail(w http.ResponseWriter, r *http.Request, err error) {
	a.failFor(w, r, err, core.SessionID(r.PathValue("id")))
}

// failFor is fail for a request about session id (from its path or body),
// which an unknown-session answer names with where to find the right one.
func (a *Adapter) failFor(w http.ResponseWriter, r *http.Request, err error, id core.SessionID) {
	if r.Context().Err() != nil {
		return // the client is gone
	}
	status, msg := http.StatusInternalServerError, "internal error; see the daemon's log"
	switch {
	case errors.Is(err, core.ErrNotFound):
		status, msg = http.StatusNotFound, "not found"
	case errors.Is(err, core.ErrSessionClosed):
		status, msg = http.StatusConflict, "the session is closed; start a new one with POST /api/sessions"
	case errors.Is(err, core.ErrUnauthorized):
		status, msg = http.StatusForbidden, "not allowed"
	case errors.Is(err, core.ErrInvalid):
		status, msg = http.StatusBadRequest, "invalid request"
	}
	m, explained := delivery.UserMessage(err)
	switch {
	case status == http.StatusInternalServerError:
		a.log.Error("api", "method", r.Method, "path", r.URL.Path, "err", err)
	case status == http.StatusNotFound && id != "" && (!explained || m == "unknown session "+string(id)):
		msg = "unknown session " + string(id) + " (GET /api/sessions lists them)"
	case explained:
		msg = m
	}
	writeJSON(w, status, errorBody{msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
