package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp"
	"github.com/parley-chat/parley/mcp/internal/pipenet"
	"github.com/parley-chat/parley/store/bolt"
)

// The tests run a real parley MCP stack — bbolt in a directory, the
// command service, the MCP server behind an HTTP server — in a synctest
// bubble: HTTP goes over in-memory pipes, so time is the fake clock and
// synctest.Wait settles everything.

func testLogger() *slog.Logger {
	if os.Getenv("PARLEY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// stack is parley's store, service and MCP server, served over pipes.
type stack struct {
	t      testing.TB
	store  *bolt.Store
	bus    *core.MemBus
	svc    *commands.Service
	srv    *mcp.Server
	hs     *http.Server
	l      *pipenet.Listener
	tr     *http.Transport
	cancel context.CancelFunc
	done   chan struct{}
	served chan struct{}
	closed bool
	token  atomic.Pointer[string]
}

// person is who acts in the tests, from a chat platform.
var (
	ann = core.Actor{ID: "1", Name: "Ann"}
	bob = core.Actor{ID: "2", Name: "Bob"}
)

const platform core.Origin = "telegram"

func newStack(t testing.TB, dir string) *stack {
	t.Helper()
	return newStackOn(t, dir, nil)
}

// newStackOn serves the stack on l (nil: in-memory pipes).
func newStackOn(t testing.TB, dir string, l net.Listener) *stack {
	t.Helper()
	store, err := bolt.Open(filepath.Join(dir, "parley.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	last, err := store.LastEventSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bus := core.NewMemBus(last + 1)
	// The agents of the tests that switch: the default, and codex.
	svc, err := commands.New(context.Background(), store, bus, commands.Options{Logger: testLogger(),
		Agents: []commands.Agent{{Name: core.DefaultAgent, Title: "Claude Code"}, {Name: "codex", Title: "Codex"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcp.New(mcp.Options{Handler: svc, Store: store, Bus: bus, Logger: testLogger(), Version: "test",
		NoAgentNotice: mcp.DefaultNoAgentNotice, Protected: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := &stack{t: t, store: store, bus: bus, svc: svc, srv: srv, cancel: cancel, done: make(chan struct{}),
		served: make(chan struct{})}
	st.tr = &http.Transport{}
	if l == nil {
		st.l = pipenet.NewListener()
		l = st.l
		st.tr.DialContext = st.l.Dial
	}
	go func() {
		defer close(st.done)
		srv.Run(ctx)
	}()
	mux := http.NewServeMux()
	mcpHandler := srv.Handler()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// As cmd/parley's token check does, when a token is set.
		if tok := st.token.Load(); tok != nil && r.Header.Get("Authorization") != "Bearer "+*tok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	st.hs = &http.Server{Handler: mux}
	go func() {
		defer close(st.served)
		_ = st.hs.Serve(l)
	}()
	t.Cleanup(st.close)
	return st
}

func (st *stack) client() *http.Client { return &http.Client{Transport: st.tr} }

// close stops the stack as cmd would and closes the store.
func (st *stack) close() {
	if st.closed {
		return
	}
	st.closed = true
	st.cancel()
	<-st.done
	st.srv.Close()
	_ = st.hs.Close()
	<-st.served
	st.tr.CloseIdleConnections()
	if err := st.store.Close(); err != nil {
		st.t.Error(err)
	}
}

func (st *stack) handle(cmd core.Command) core.Result {
	st.t.Helper()
	res, err := st.svc.Handle(context.Background(), cmd)
	if err != nil {
		st.t.Fatalf("%s: %v", cmd.Kind, err)
	}
	return res
}

func (st *stack) create() core.SessionID {
	st.t.Helper()
	return st.handle(core.Command{Kind: core.CreateSession, Origin: platform, Actor: ann}).Session
}

// say is a person's message, as an adapter hands it.
func (st *stack) say(id core.SessionID, who core.Actor, text string) core.Message {
	st.t.Helper()
	return st.handle(core.Command{Kind: core.SendMessage, Session: id, Origin: platform, Actor: who, Text: text}).Message
}

func (st *stack) control(id core.SessionID, kind core.CommandKind) {
	st.t.Helper()
	st.handle(core.Command{Kind: kind, Session: id, Origin: platform, Actor: ann})
}

// decide answers the session's open approval with option n (1 approve, 2
// deny and continue, 3 deny and abort), as a button click does.
func (st *stack) decide(id core.SessionID, n int) {
	st.t.Helper()
	sess := st.session(id)
	if len(sess.Questions) != 1 {
		st.t.Fatalf("%d open questions, want 1", len(sess.Questions))
	}
	st.handle(core.Command{Kind: core.Answer, Session: id, Origin: platform, Actor: ann,
		QuestionID: sess.Questions[0].ID, Option: n})
}

func (st *stack) session(id core.SessionID) core.Session {
	st.t.Helper()
	sess, err := st.store.Session(context.Background(), id)
	if err != nil {
		st.t.Fatal(err)
	}
	return sess
}

// events returns the session's logged events of the given kinds.
func (st *stack) events(id core.SessionID, kinds ...core.EventKind) []core.Event {
	st.t.Helper()
	var out []core.Event
	after := uint64(0)
	for {
		evs, err := st.store.EventsSince(context.Background(), after, 1000)
		if err != nil {
			st.t.Fatal(err)
		}
		for _, e := range evs {
			after = e.Seq
			if e.Session != id {
				continue
			}
			for _, k := range kinds {
				if e.Kind == k {
					out = append(out, e)
				}
			}
		}
		if len(evs) < 1000 {
			return out
		}
	}
}

// outputs returns the texts of the session's output events, and which of
// them were final.
func (st *stack) outputs(id core.SessionID) (texts []string, finals []string) {
	for _, e := range st.events(id, core.EventOutput) {
		texts = append(texts, e.Text)
		if e.Final {
			finals = append(finals, e.Text)
		}
	}
	return texts, finals
}

// assistant returns the contents of the assistant messages of the session.
func (st *stack) assistant(id core.SessionID) []string {
	var out []string
	for _, e := range st.events(id, core.EventAssistant) {
		out = append(out, e.Message.Content)
	}
	return out
}

// state returns the orchestrator's state kept for the session.
func (st *stack) state(id core.SessionID) string {
	st.t.Helper()
	v, err := st.store.Cursor(context.Background(), "agent/"+string(id)+"/"+stateKey)
	if err != nil {
		st.t.Fatal(err)
	}
	return v
}

// running is an orchestrator running on a stack.
type running struct {
	o      *Orchestrator
	cancel context.CancelFunc
	done   chan error
}

func startOrchestrator(t *testing.T, st *stack, fc *fakeClaude, mod func(*Options)) *running {
	t.Helper()
	// As cmd/parley does, the orchestrator is the MCP server's own client.
	name, value := st.srv.OwnClientHeader()
	opts := Options{Endpoint: "http://parley/mcp", HTTPClient: st.client(), Agents: claudeAgent(fc, true),
		Header: http.Header{name: {value}}, Logger: testLogger()}
	if mod != nil {
		mod(&opts)
	}
	o, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{o: o, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- o.Run(ctx) }()
	t.Cleanup(r.stop)
	synctest.Wait()
	return r
}

func (r *running) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		panic(err)
	}
}

// settle lets everything run that can, then time pass by d and settle again.
func settle(d time.Duration) {
	synctest.Wait()
	if d > 0 {
		time.Sleep(d)
		synctest.Wait()
	}
}

func contains(list []string, sub string) int {
	n := 0
	for _, s := range list {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

// failingClient is st's client whose first n requests fail as if nothing
// listened yet.
func failingClient(st *stack, n int32) *http.Client {
	f := &failing{rt: st.tr}
	f.left.Store(n)
	return &http.Client{Transport: f}
}

type failing struct {
	left atomic.Int32
	rt   http.RoundTripper
}

func (f *failing) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.left.Add(-1) >= 0 {
		return nil, errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	}
	return f.rt.RoundTrip(r)
}
