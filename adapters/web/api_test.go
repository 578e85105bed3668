package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
)

func TestHealthAndSessions(t *testing.T) {
	s := newStack(t)
	if got := must[map[string]bool](t, http.StatusOK)(s.get("/api/health")); !got["ok"] {
		t.Fatalf("health = %v", got)
	}
	list := must[struct{ Sessions []sessionJSON }](t, http.StatusOK)(s.get("/api/sessions"))
	if list.Sessions == nil || len(list.Sessions) != 0 {
		t.Fatalf("sessions = %#v, want an empty list", list.Sessions)
	}

	created := must[sessionJSON](t, http.StatusCreated)(s.post("/api/sessions", `{"title":"Fix the build"}`))
	if created.Title != "Fix the build" || created.Status != core.StatusIdle || created.ID == "" {
		t.Fatalf("created %+v", created)
	}
	untitled := must[sessionJSON](t, http.StatusCreated)(s.post("/api/sessions", ``))
	if untitled.Title == "" {
		t.Fatalf("an untitled session gets a default title, got %+v", untitled)
	}

	// /api/chat without a session starts one; with one it posts there.
	first := must[postedJSON](t, http.StatusOK)(s.post("/api/chat", `{"text":"hello"}`))
	if first.Session == "" || first.Session == created.ID || first.ID == "" || first.Time.IsZero() {
		t.Fatalf("chat without session = %+v", first)
	}
	again := s.chat(first.Session, "again")
	if again.Session != first.Session || again.ID <= first.ID {
		t.Fatalf("chat with session = %+v after %+v", again, first)
	}
	list = must[struct{ Sessions []sessionJSON }](t, http.StatusOK)(s.get("/api/sessions"))
	if len(list.Sessions) != 3 {
		t.Fatalf("%d sessions, want 3: %+v", len(list.Sessions), list.Sessions)
	}
	msgs, err := s.store.Inbox(context.Background(), first.Session, "", 0)
	if err != nil || len(msgs) != 2 || msgs[0].Origin != core.OriginAPI || msgs[1].Content != "again" {
		t.Fatalf("inbox = %+v, %v", msgs, err)
	}
}

func TestClientIDMakesRetriesLandOnce(t *testing.T) {
	s := newStack(t)
	a := must[postedJSON](t, http.StatusOK)(s.post("/api/chat", `{"text":"once","client_id":"c1"}`))
	b := must[postedJSON](t, http.StatusOK)(s.post("/api/chat", `{"text":"once","client_id":"c1"}`))
	if a.Session != b.Session || a.ID != b.ID {
		t.Fatalf("retry landed twice: %+v then %+v", a, b)
	}
	id := a.Session
	p1 := must[postedJSON](t, http.StatusOK)(s.post("/api/sessions/"+string(id)+"/messages", `{"text":"x","client_id":"k"}`))
	p2 := must[postedJSON](t, http.StatusOK)(s.post("/api/sessions/"+string(id)+"/messages", `{"text":"x","client_id":"k"}`))
	if p1.ID != p2.ID {
		t.Fatalf("page retry landed twice: %s, %s", p1.ID, p2.ID)
	}
	msgs, _ := s.store.Inbox(context.Background(), id, "", 0)
	if len(msgs) != 2 {
		t.Fatalf("inbox has %d messages, want 2", len(msgs))
	}
}

func TestErrorStatuses(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.web.MaxBody = 1 << 10 })
	open := s.newSession("open")
	closed := s.newSession("closed")
	s.handle(core.Command{Kind: core.Close, Session: closed, Origin: core.OriginAPI})
	big := `{"text":"` + strings.Repeat("x", 2<<10) + `"}`

	tests := []struct {
		name, method, path, body string
		want                     int
		msg                      string // the error says this
	}{
		{"empty chat text", "POST", "/api/chat", `{"text":"  "}`, http.StatusBadRequest, "text is empty"},
		{"chat to unknown session", "POST", "/api/chat", `{"session_id":"01NOSUCHSESSION0000000000","text":"x"}`, http.StatusNotFound, "unknown session 01NOSUCHSESSION0000000000 (GET /api/sessions lists them)"},
		{"chat not JSON", "POST", "/api/chat", `text=hi`, http.StatusBadRequest, ""},
		{"chat no body", "POST", "/api/chat", ``, http.StatusBadRequest, ""},
		{"chat too large", "POST", "/api/chat", big, http.StatusRequestEntityTooLarge, ""},
		{"chat to closed session", "POST", "/api/chat", `{"session_id":"` + string(closed) + `","text":"x"}`, http.StatusConflict, ""},
		{"message to unknown session", "POST", "/api/sessions/nope/messages", `{"text":"x"}`, http.StatusNotFound, "unknown session nope (GET /api/sessions lists them)"},
		{"empty message", "POST", "/api/sessions/" + string(open) + "/messages", `{"text":""}`, http.StatusBadRequest, ""},
		{"message too large", "POST", "/api/sessions/" + string(open) + "/messages", big, http.StatusRequestEntityTooLarge, ""},
		{"message to closed session", "POST", "/api/sessions/" + string(closed) + "/messages", `{"text":"x"}`, http.StatusConflict, "closed"},
		{"answer to no question", "POST", "/api/sessions/" + string(open) + "/answer", `{"question_id":"q9","option":1}`, http.StatusBadRequest, ""},
		{"answer without question id", "POST", "/api/sessions/" + string(open) + "/answer", `{"option":1}`, http.StatusBadRequest, ""},
		{"state of unknown session", "GET", "/api/sessions/nope/state", ``, http.StatusNotFound, "unknown session nope (GET /api/sessions lists them)"},
		{"title too long", "POST", "/api/sessions", `{"title":"` + strings.Repeat("t", 300) + `"}`, http.StatusBadRequest, ""},
		{"unknown endpoint", "GET", "/api/nope", ``, http.StatusNotFound, ""},
		{"bad Last-Event-ID", "GET", "/api/events?last_event_id=x", ``, http.StatusBadRequest, ""},
		// Hostile and careless bodies: refused by name, nothing stored.
		{"unknown field", "POST", "/api/sessions/" + string(open) + "/messages", `{"text":"x","txet":"y"}`, http.StatusBadRequest, `unknown field "txet"`},
		{"invalid UTF-8", "POST", "/api/sessions/" + string(open) + "/messages", "{\"text\":\"a\xffb\"}", http.StatusBadRequest, "not UTF-8 at byte 10"},
		{"lone surrogate", "POST", "/api/chat", `{"session_id":"` + string(open) + `","text":"a\ud800b"}`, http.StatusBadRequest, `lone UTF-16 surrogate \ud800`},
		{"lone low surrogate in title", "POST", "/api/sessions", `{"title":"\udc00"}`, http.StatusBadRequest, "surrogate"},
		{"data after the object", "POST", "/api/chat", `{"session_id":"` + string(open) + `","text":"x"} {"text":"y"}`, http.StatusBadRequest, "data after its JSON object"},
		{"wrong type", "POST", "/api/chat", `{"text":5}`, http.StatusBadRequest, `field "text" must be a JSON string, not number`},
		{"truncated", "POST", "/api/chat", `{"text":"x`, http.StatusBadRequest, "ends before the JSON does"},
	}
	before, err := s.store.LastEventSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.method == "POST" {
				body = strings.NewReader(tt.body)
			}
			status, data := s.request(tt.method, tt.path, body)
			if status != tt.want {
				t.Fatalf("status %d, want %d: %s", status, tt.want, data)
			}
			var e struct{ Error string }
			if err := json.Unmarshal(data, &e); err != nil || e.Error == "" {
				t.Fatalf("error body %q is not {\"error\": …}", data)
			}
			if !strings.Contains(e.Error, tt.msg) {
				t.Errorf("error %q does not say %q", e.Error, tt.msg)
			}
			for _, internal := range []string{"commands:", "bolt:", "core:", "json:", "web:"} {
				if strings.Contains(e.Error, internal) {
					t.Errorf("error %q shows the internal prefix %q", e.Error, internal)
				}
			}
		})
	}
	if after, err := s.store.LastEventSeq(context.Background()); err != nil || after != before {
		t.Errorf("refused requests stored events: seq %d → %d (%v)", before, after, err)
	}
}

func TestAnswerFromPage(t *testing.T) {
	s := newStack(t)
	id := s.newSession("ask")
	s.handle(core.Command{Kind: core.Ask, Session: id, Origin: core.OriginMCP, QuestionID: "q1",
		Text: "Deploy now?", Options: []string{"Yes", "Not yet"}})
	got := must[postedJSON](t, http.StatusOK)(s.post("/api/sessions/"+string(id)+"/answer", `{"question_id":"q1","option":2}`))
	if got.ID == "" {
		t.Fatalf("answer = %+v", got)
	}
	st := s.snapshot(id).State
	var q *uistate.UIItem
	for i := range st.Items {
		if st.Items[i].Type == uistate.UIItemQuestion {
			q = &st.Items[i]
		}
	}
	if q == nil || q.Answer == nil || q.Answer.Content != "Not yet" || q.Answer.Origin != "web" || q.Answer.Actor != web.Actor {
		t.Fatalf("question item = %+v", q)
	}
	// A second click finds the question answered.
	if status, body := s.post("/api/sessions/"+string(id)+"/answer", `{"question_id":"q1","option":1}`); status != http.StatusBadRequest {
		t.Fatalf("second answer: %d %s", status, body)
	}
}

func TestNotReadyAnswers503(t *testing.T) {
	w := web.New(web.Options{})
	srv := httptest.NewServer(w.Handler())
	defer srv.Close()
	for _, path := range []string{"/api/health", "/api/sessions", "/api/events"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s before Run: %d, want 503", path, resp.StatusCode)
		}
	}
	// The page itself is there from the start.
	resp, err := srv.Client().Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("page before Run: %d", resp.StatusCode)
	}
}

func TestPageFiles(t *testing.T) {
	s := newStack(t)
	for _, tt := range []struct{ path, ctype, contains string }{
		{"/", "text/html", `<script src="app.js"`},
		{"/app.js", "text/javascript", "EventSource"},
		{"/style.css", "text/css", "#timeline"},
		{"/markdown.js", "text/javascript", "function markdown("},
	} {
		resp, err := s.srv.Client().Get(s.srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), tt.ctype) ||
			!strings.Contains(string(body), tt.contains) {
			t.Errorf("%s: %d %q", tt.path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s: CSP %q", tt.path, csp)
		}
	}
	if status, _ := s.get("/nope.js"); status != http.StatusNotFound {
		t.Errorf("missing file: %d", status)
	}
}

// binder is a minimal second UI adapter that records what it is sent.
type binder struct {
	mu   sync.Mutex
	sent []core.OutMessage
}

func (b *binder) Name() core.AdapterName                        { return "other" }
func (b *binder) Capabilities() core.Capabilities               { return core.Capabilities{Markup: core.MarkupPlain} }
func (b *binder) Run(ctx context.Context, _ core.Handler) error { <-ctx.Done(); return nil }
func (b *binder) Bind(context.Context, core.Session) (core.Binding, error) {
	return core.Binding{Place: core.Place{Chat: "c"}}, nil
}
func (b *binder) Send(_ context.Context, p core.Place, m core.OutMessage) (core.MessageRef, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sent = append(b.sent, m)
	return core.MessageRef{Adapter: "other", Place: p, ID: "m"}, nil
}

func (b *binder) count() int { b.mu.Lock(); defer b.mu.Unlock(); return len(b.sent) }

// A message typed on the page makes web the session's last input origin,
// so the agent's reply goes to the page and not to the other platform.
func TestRepliesRouteBackToPage(t *testing.T) {
	other := &binder{}
	s := newStack(t, func(o *stackOptions) { o.extras = []core.Adapter{other} })
	id := s.newSession("route")
	must[postedJSON](t, http.StatusOK)(s.post("/api/sessions/"+string(id)+"/messages", `{"text":"hello from the page"}`))
	s.handle(core.Command{Kind: core.AssistantPost, Session: id, Origin: core.OriginMCP, Text: "hello, **human**"})
	s.idle()

	sess, err := s.store.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if sess.LastInputOrigin != "web" {
		t.Fatalf("last input origin %q, want web", sess.LastInputOrigin)
	}
	if b, ok := sess.Bindings[web.Name]; !ok || b.Place != (core.Place{Chat: string(id)}) {
		t.Fatalf("web binding = %+v", sess.Bindings)
	}
	reply := core.Event{Kind: core.EventAssistant, Session: id}
	if got := s.router.Targets(sess, reply); len(got) != 1 || got[0] != web.Name {
		t.Fatalf("reply targets %v, want [web]", got)
	}
	if n := other.count(); n != 0 {
		t.Fatalf("the other platform was sent %d messages; replies belong to the page", n)
	}
	st := s.snapshot(id).State
	if len(st.Items) != 2 || st.Items[0].Type != uistate.UIItemUser || st.Items[0].Content != "hello from the page" ||
		st.Items[0].Origin != "web" || st.Items[1].Type != uistate.UIItemAssistant || st.Items[1].Content != "hello, **human**" {
		t.Fatalf("timeline = %+v", st.Items)
	}
}

func TestAdapterBasics(t *testing.T) {
	w := web.New(web.Options{})
	c := w.Capabilities()
	if c.Markup != core.MarkupMarkdown || c.MaxLength != 0 || !c.Buttons || !c.DeleteOthers || len(c.Limits) != 0 {
		t.Fatalf("capabilities %+v", c)
	}
	bound, err := w.Bind(context.Background(), core.Session{ID: "S1"})
	p := bound.Place
	if err != nil || p != (core.Place{Chat: "S1"}) {
		t.Fatalf("bind = %v, %v", p, err)
	}
	a, _ := w.Send(context.Background(), p, core.OutMessage{Text: "x"})
	b, _ := w.Send(context.Background(), p, core.OutMessage{Text: "y"})
	if a.ID == "" || a.ID == b.ID || a.Adapter != web.Name || a.Place != p {
		t.Fatalf("refs %+v %+v", a, b)
	}
	if w.Edit(context.Background(), a, core.OutMessage{}) != nil || w.Delete(context.Background(), a) != nil {
		t.Fatal("edit and delete are no-ops that succeed")
	}
}
