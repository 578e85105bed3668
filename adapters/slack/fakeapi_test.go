package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/files"
)

// fakeAPI is a small Web API for the tests where a call's wire behaviour
// matters: each method answers what the test sets with on, and every call
// is recorded. The full fake Slack (slacktest) is for end-to-end tests.
type fakeAPI struct {
	URL string
	mu  sync.Mutex
	// calls are the Web API calls received, oldest first.
	calls    []apiCall
	handlers map[string]func(url.Values) answer
	// files are served at /files/NAME.
	files map[string][]byte
	// ws, when set, serves /ws (a Socket Mode websocket).
	ws http.HandlerFunc
}

// apiCall is one call: the method and its parameters.
type apiCall struct {
	Method string
	Form   url.Values
}

// answer is what a method answers: HTTP status (0 = 200), headers and a
// JSON body.
type answer struct {
	Status int
	Header map[string]string
	Body   any
}

func okAnswer(fields map[string]any) answer {
	body := map[string]any{"ok": true}
	for k, v := range fields {
		body[k] = v
	}
	return answer{Body: body}
}

func failAnswer(code string) answer {
	return answer{Body: map[string]any{"ok": false, "error": code}}
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{handlers: map[string]func(url.Values) answer{}, files: map[string][]byte{}}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.URL = srv.URL + "/api/"
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ws" && f.ws != nil {
		f.ws(w, r)
		return
	}
	if name, ok := strings.CutPrefix(r.URL.Path, "/files/"); ok {
		f.mu.Lock()
		data, found := f.files[name]
		f.mu.Unlock()
		if !found || r.Header.Get("Authorization") != "Bearer xoxb-test" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
		return
	}
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(r.URL.RawQuery)
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		for k, v := range m {
			form.Set(k, fmt.Sprint(v))
		}
	} else if extra, err := url.ParseQuery(string(body)); err == nil {
		for k, vs := range extra {
			form[k] = vs
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, apiCall{Method: method, Form: form})
	h := f.handlers[method]
	f.mu.Unlock()
	a := okAnswer(nil)
	if h != nil {
		a = h(form)
	}
	for k, v := range a.Header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	if a.Status != 0 {
		w.WriteHeader(a.Status)
	}
	_ = json.NewEncoder(w).Encode(a.Body)
}

// on sets what method answers.
func (f *fakeAPI) on(method string, h func(url.Values) answer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers[method] = h
}

// called returns the calls of method (all calls for "").
func (f *fakeAPI) called(method string) []apiCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []apiCall
	for _, c := range f.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// fileURL serves data at a download URL on the API's host.
func (f *fakeAPI) fileURL(name string, data []byte) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[name] = data
	return strings.TrimSuffix(f.URL, "api/") + "files/" + name
}

// newFiles is a store of files in a temporary directory.
func newFiles(t *testing.T) *files.Store {
	t.Helper()
	fs, err := files.New(t.TempDir(), files.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// newTestAdapter is an adapter on api (nil: an unreachable one, for tests
// that make no call), knowing its identity. It admits nobody unless a mod
// gives it an Authorizer (withAuthorizer).
func newTestAdapter(t *testing.T, api *fakeAPI, mod ...func(*Options)) *Adapter {
	t.Helper()
	opts := Options{BotToken: "xoxb-test", AppToken: "xapp-test", Channel: "C1", Files: newFiles(t),
		APIURL: "http://127.0.0.1:1/api/", Logger: slog.New(slog.DiscardHandler), Authorizer: nobody}
	if api != nil {
		opts.APIURL = api.URL
	}
	for _, m := range mod {
		m(&opts)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	a.self.Store(&identity{UserID: "UBOT", BotID: "BBOT", TeamID: "T1"})
	a.names.Store("U1", "Ann")
	a.names.Store("U2", "Bob")
	return a
}

// withAuthorizer gives the adapter its allow-list, most often the test's
// recorder, so that the adapter asks the same list the handler keeps.
func withAuthorizer(az core.Authorizer) func(*Options) {
	return func(o *Options) { o.Authorizer = az }
}

// nobody admits no one: the allow-list of adapters whose tests hand them
// no input.
var nobody = core.AuthorizerFunc(func(core.Origin, core.Actor) bool { return false })

// recorder is a Handler that records commands, answers as the test says,
// and admits the actors in allow.
type recorder struct {
	mu     sync.Mutex
	cmds   []core.Command
	allow  map[string]bool
	answer func(core.Command) (core.Result, error)
}

func newRecorder(allowed ...string) *recorder {
	r := &recorder{allow: map[string]bool{}}
	for _, id := range allowed {
		r.allow[id] = true
	}
	return r
}

func (r *recorder) Handle(_ context.Context, cmd core.Command) (core.Result, error) {
	r.mu.Lock()
	r.cmds = append(r.cmds, cmd)
	answer := r.answer
	r.mu.Unlock()
	if answer != nil {
		return answer(cmd)
	}
	if cmd.Kind == core.CreateSession {
		return core.Result{Session: "S1"}, nil
	}
	return core.Result{Session: "S1"}, nil
}

func (r *recorder) Authorized(o core.Origin, a core.Actor) bool { return o == origin && r.allow[a.ID] }

// commands returns what was handled.
func (r *recorder) commands() []core.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.Command(nil), r.cmds...)
}

var _ core.Authorizer = (*recorder)(nil)
