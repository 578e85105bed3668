package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/adapters/web/httpguard"
	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/core/uistate"
	"github.com/parley-chat/parley/store/bolt"
)

// stack is parley wired by hand the way the daemon wires it (store, bus,
// command service, router, outbox, dispatcher) around the web adapter,
// served by an httptest server on loopback. The daemon package itself is
// internal to cmd/parley and cannot be imported from here.
type stack struct {
	t      testing.TB
	store  *bolt.Store
	bus    *core.MemBus
	svc    *commands.Service
	router *delivery.Router
	outbox *delivery.Outbox
	disp   *delivery.Dispatcher
	web    *web.Adapter
	srv    *httptest.Server
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

type stackOptions struct {
	store  bolt.Options
	web    web.Options
	extras []core.Adapter
	// connState, when set, is the server's http.Server.ConnState.
	connState func(net.Conn, http.ConnState)
	// agents are the agents parley runs (commands.Options.Agents).
	agents []commands.Agent
}

func newStack(tb testing.TB, tweak ...func(*stackOptions)) *stack {
	tb.Helper()
	o := stackOptions{store: bolt.Options{NoSync: true}}
	for _, f := range tweak {
		f(&o)
	}
	store, err := bolt.Open(filepath.Join(tb.TempDir(), "parley.db"), o.store)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	ctx := context.Background()
	last, err := store.LastEventSeq(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	s := &stack{t: tb, store: store, bus: core.NewMemBus(last + 1)}
	if s.svc, err = commands.New(ctx, store, s.bus, commands.Options{Agents: o.agents}); err != nil {
		tb.Fatal(err)
	}
	// Store and Bus now, the Handler when it runs: as cmd does with Attach.
	s.web = web.New(o.web)
	s.web.Attach(store, s.bus)
	adapters := append([]core.Adapter{s.web}, o.extras...)
	s.router = delivery.NewRouter(adapters...)
	s.outbox = delivery.NewOutbox(delivery.OutboxOptions{}, adapters...)
	s.disp = delivery.NewDispatcher(store, s.router, s.outbox, delivery.DispatcherOptions{})
	sub, unsubscribe := s.bus.Subscribe(4096, false)
	runCtx, stop := context.WithCancel(ctx)
	s.stop = stop
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.disp.Run(runCtx, sub) }()
	go func() { defer s.wg.Done(); _ = s.web.Run(runCtx, s.svc) }()
	// The daemon's server keeps each request's connection, for the event
	// stream's bounds (httpguard.BoundStream).
	s.srv = httptest.NewUnstartedServer(s.web.Handler())
	s.srv.Config.ConnContext = httpguard.ConnContext
	s.srv.Config.ConnState = o.connState
	s.srv.Start()
	tb.Cleanup(func() {
		stop()
		s.wg.Wait() // the adapter detaches: SSE streams end
		unsubscribe()
		s.srv.Close()
		s.outbox.Close()
		if err := store.Close(); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	s.waitReady()
	return s
}

// waitReady waits until Run has handed the adapter its Handler.
func (s *stack) waitReady() {
	s.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if st, _ := s.get("/api/health"); st == http.StatusOK {
			return
		}
		select {
		case <-deadline:
			s.t.Fatal("web adapter never became ready")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// idle waits until the dispatcher has seen every stored event and the
// outbox is empty.
func (s *stack) idle() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	last, err := s.store.LastEventSeq(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	for s.disp.Seen() < last {
		select {
		case <-ctx.Done():
			s.t.Fatalf("dispatcher stuck at %d of %d", s.disp.Seen(), last)
		case <-time.After(2 * time.Millisecond):
		}
	}
	if err := s.outbox.Drain(ctx); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) handle(cmd core.Command) core.Result {
	s.t.Helper()
	res, err := s.svc.Handle(context.Background(), cmd)
	if err != nil {
		s.t.Fatalf("handle %s: %v", cmd.Kind, err)
	}
	return res
}

func (s *stack) request(method, path string, body io.Reader) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, data
}

func (s *stack) get(path string) (int, []byte) { return s.request(http.MethodGet, path, nil) }

func (s *stack) post(path, body string) (int, []byte) {
	return s.request(http.MethodPost, path, strings.NewReader(body))
}

// must decodes the JSON answer of a request that must have status want.
func must[T any](tb testing.TB, want int) func(int, []byte) T {
	return func(status int, body []byte) T {
		tb.Helper()
		if status != want {
			tb.Fatalf("status %d, want %d: %s", status, want, body)
		}
		var v T
		if err := json.Unmarshal(body, &v); err != nil {
			tb.Fatalf("decode %s: %v", body, err)
		}
		return v
	}
}

type sessionJSON struct {
	ID              core.SessionID `json:"id"`
	Title           string         `json:"title"`
	Status          core.Status    `json:"status"`
	LastInputOrigin core.Origin    `json:"last_input_origin"`
}

type postedJSON struct {
	Session core.SessionID `json:"session_id"`
	ID      core.MessageID `json:"id"`
	Time    time.Time      `json:"ts"`
}

func (s *stack) newSession(title string) core.SessionID {
	s.t.Helper()
	b, _ := json.Marshal(map[string]string{"title": title})
	return must[sessionJSON](s.t, http.StatusCreated)(s.post("/api/sessions", string(b))).ID
}

func (s *stack) chat(id core.SessionID, text string) postedJSON {
	s.t.Helper()
	b, _ := json.Marshal(map[string]string{"session_id": string(id), "text": text})
	return must[postedJSON](s.t, http.StatusOK)(s.post("/api/chat", string(b)))
}

func (s *stack) snapshot(id core.SessionID) uistate.UISnapshot {
	s.t.Helper()
	return must[uistate.UISnapshot](s.t, http.StatusOK)(s.get("/api/sessions/" + string(id) + "/state"))
}

// frame is one SSE message.
type frame struct {
	ID    string
	Event string
	Data  string
}

// sseMsg is the data of an event message.
type sseMsg struct {
	Seq     uint64            `json:"seq"`
	Kind    core.EventKind    `json:"kind"`
	Session core.SessionID    `json:"session_id"`
	Event   core.Event        `json:"event"`
	UI      *uistate.UIUpdate `json:"ui"`
}

func (f frame) msg(tb testing.TB) sseMsg {
	tb.Helper()
	var m sseMsg
	if err := json.Unmarshal([]byte(f.Data), &m); err != nil {
		tb.Fatalf("decode %q: %v", f.Data, err)
	}
	return m
}

// sseClient reads an /api/events stream into a channel.
type sseClient struct {
	t      testing.TB
	frames chan frame
	agents chan frame // "agents" messages
	states chan frame // "ui_state_updated" messages
	pings  chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *stack) sse(query, lastEventID string) *sseClient {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+"/api/events"+query, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		cancel()
		s.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(resp.Body)
		cancel()
		s.t.Fatalf("events: %d %s", resp.StatusCode, body)
	}
	c := &sseClient{t: s.t, frames: make(chan frame, 100000), agents: make(chan frame, 1000), states: make(chan frame, 100000), pings: make(chan struct{}, 100), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer resp.Body.Close()
		c.read(resp.Body)
	}()
	s.t.Cleanup(c.close)
	return c
}

func (c *sseClient) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	var f frame
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if f.Event != "" || data.Len() > 0 {
				f.Data = data.String()
				switch f.Event {
				case "agents":
					c.agents <- f // presence, apart from the event log
				case uistate.UIUpdateType:
					c.states <- f // whole states, apart from the event log
				default:
					c.frames <- f
				}
			}
			f, data = frame{}, bytes.Buffer{}
		case line == ": ping":
			select {
			case c.pings <- struct{}{}:
			default:
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			f.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			f.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(line[6:])
		}
	}
}

func (c *sseClient) close() {
	c.cancel()
	<-c.done
}

// next returns the next message or fails after timeout.
func (c *sseClient) next(timeout time.Duration) frame {
	c.t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-time.After(timeout):
		c.t.Fatalf("no SSE message within %s", timeout)
		return frame{}
	}
}

// quiet reports that no message arrives within d.
func (c *sseClient) quiet(d time.Duration) bool {
	select {
	case f := <-c.frames:
		c.t.Errorf("unexpected SSE message %+v", f)
		return false
	case <-time.After(d):
		return true
	}
}

func jsonBody(s string) io.Reader { return strings.NewReader(s) }
