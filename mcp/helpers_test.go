package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
	"github.com/parley-chat/parley/store/files"
)

// waitFor bounds every wait in these tests.
const waitFor = 10 * time.Second

// quiet is how long a negative check waits for a notification that must
// not come.
const quiet = 300 * time.Millisecond

// stack is a real parley stack in-process: bbolt on a directory, the bus,
// the command service and the MCP server behind a loopback HTTP server.
type stack struct {
	tb     testing.TB
	dir    string
	store  *bolt.Store
	bus    *core.MemBus
	svc    *commands.Service
	srv    *Server
	hs     *httptest.Server
	url    string // the /mcp endpoint
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
}

type stackOptions struct {
	sync bool // fsync the store (benchmarks)
	// handler, when set, serves the stack instead of a new httptest
	// server (for a restart behind a fixed URL).
	handler *atomic.Pointer[http.Handler]
	// logger, when set, receives the server's log instead of testLogger.
	logger *slog.Logger
	// sendDirs, when set, are the directories files may be sent from.
	sendDirs []string
	// maxSessions, when set, bounds the MCP sessions.
	maxSessions int
	// agents are the agents parley runs (none when unset).
	agents []commands.Agent
}

func testLogger() *slog.Logger {
	if os.Getenv("PARLEY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func newStack(tb testing.TB, dir string, o stackOptions) *stack {
	tb.Helper()
	ctx := context.Background()
	store, err := bolt.Open(filepath.Join(dir, "parley.db"), bolt.Options{NoSync: !o.sync})
	if err != nil {
		tb.Fatal(err)
	}
	last, err := store.LastEventSeq(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	bus := core.NewMemBus(last + 1)
	svc, err := commands.New(ctx, store, bus, commands.Options{Logger: testLogger(), Agents: o.agents})
	if err != nil {
		tb.Fatal(err)
	}
	logger := o.logger
	if logger == nil {
		logger = testLogger()
	}
	// The data directory is protected, as cmd does it, and holds the
	// copies of files.
	blobs, err := files.New(filepath.Join(dir, "blobs"), files.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := New(Options{Handler: svc, Store: store, Bus: bus, Logger: logger, Version: "test",
		SendDirs: o.sendDirs, Protected: []string{dir}, Files: blobs, MaxSessions: o.maxSessions})
	if err != nil {
		tb.Fatal(err)
	}
	st := &stack{tb: tb, dir: dir, store: store, bus: bus, svc: svc, srv: srv, done: make(chan struct{})}
	runCtx, cancel := context.WithCancel(ctx)
	st.cancel = cancel
	go func() {
		defer close(st.done)
		srv.Run(runCtx)
	}()
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler())
	if o.handler != nil {
		var h http.Handler = mux
		o.handler.Store(&h)
	} else {
		st.hs = httptest.NewServer(mux)
		st.url = st.hs.URL + "/mcp"
	}
	tb.Cleanup(st.close)
	return st
}

// close stops everything in the order cmd would, and closes the store.
func (st *stack) close() {
	if st.closed {
		return
	}
	st.closed = true
	st.cancel()
	<-st.done
	st.srv.Close()
	if st.hs != nil {
		st.hs.CloseClientConnections()
		st.hs.Close()
	}
	if err := st.store.Close(); err != nil {
		st.tb.Error(err)
	}
}

func (st *stack) createSession(title string) core.SessionID {
	st.tb.Helper()
	res, err := st.svc.Handle(context.Background(), core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Title: title})
	if err != nil {
		st.tb.Fatal(err)
	}
	return res.Session
}

// human posts a person's message through the Handler, as the HTTP API does.
func (st *stack) human(id core.SessionID, text string) core.Message {
	st.tb.Helper()
	res, err := st.svc.Handle(context.Background(), core.Command{Kind: core.SendMessage, Session: id, Origin: core.OriginAPI, Text: text})
	if err != nil {
		st.tb.Fatal(err)
	}
	return res.Message
}

func (st *stack) assistant(id core.SessionID, text string) core.Message {
	st.tb.Helper()
	res, err := st.svc.Handle(context.Background(), core.Command{Kind: core.AssistantPost, Session: id, Origin: core.OriginAPI, Text: text})
	if err != nil {
		st.tb.Fatal(err)
	}
	return res.Message
}

// conn is an mcp-go client with its resource-updated notifications.
type conn struct {
	*client.Client
	notes chan mcp.JSONRPCNotification // notifications/resources/updated
	acks  chan mcp.JSONRPCNotification // notifications/subscriptions/acknowledged
}

type connOptions struct {
	modern  bool // 2026-07-28 (stateless) instead of 2025-11-25
	query   string
	headers map[string]string
	hc      *http.Client // nil: net/http's default
}

func dial(tb testing.TB, url string, o connOptions) (*conn, error) {
	tb.Helper()
	if o.query != "" {
		url += "?" + o.query
	}
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(o.headers), transport.WithHTTPLogger(testLogger())}
	if o.hc != nil {
		opts = append(opts, transport.WithHTTPBasicClient(o.hc))
	}
	if !o.modern {
		opts = append(opts, transport.WithContinuousListening())
	}
	tr, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		return nil, err
	}
	return start(tb, client.NewClient(tr), o.modern)
}

func start(tb testing.TB, c *client.Client, modern bool) (*conn, error) {
	tb.Helper()
	cn := &conn{Client: c, notes: make(chan mcp.JSONRPCNotification, 4096), acks: make(chan mcp.JSONRPCNotification, 16)}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		switch n.Method {
		case mcp.MethodNotificationResourceUpdated:
			cn.notes <- n
		case string(mcp.MethodNotificationSubscriptionsAcknowledged):
			cn.acks <- n
		}
	})
	// Start's context bounds the GET stream: it must outlive the test's
	// requests.
	if err := c.Start(context.Background()); err != nil {
		return nil, err
	}
	tb.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "parley-test", Version: "1"}}}); err != nil {
		return nil, err
	}
	want := mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if modern {
		want = mcp.ProtocolVersion20260728
	}
	if got := c.ProtocolVersion(); got != want {
		tb.Fatalf("negotiated protocol %s, want %s", got, want)
	}
	return cn, nil
}

func mustDial(tb testing.TB, url string, o connOptions) *conn {
	tb.Helper()
	c, err := dial(tb, url, o)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// subscribe subscribes with the connection's protocol generation: 2025-11-25
// resources/subscribe, or a 2026-07-28 listen stream acknowledged by the
// server before it returns.
func (c *conn) subscribe(tb testing.TB, uris ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if c.ProtocolVersion() != mcp.ProtocolVersion20260728 {
		for _, u := range uris {
			if err := c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: u}}); err != nil {
				tb.Fatal(err)
			}
		}
		return
	}
	errs := make(chan error, 1)
	stop, err := c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: uris}, func(err error) { errs <- err })
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	select {
	case <-c.acks:
	case err := <-errs:
		tb.Fatal(err)
	case <-ctx.Done():
		tb.Fatal("subscriptions/listen not acknowledged")
	}
}

// update is the params of one notifications/resources/updated.
type update struct {
	URI      string         `json:"uri"`
	Messages []InboxMessage `json:"messages"`
}

func decodeUpdate(tb testing.TB, n mcp.JSONRPCNotification) update {
	tb.Helper()
	b, err := json.Marshal(n.Params.AdditionalFields)
	if err != nil {
		tb.Fatal(err)
	}
	var u update
	if err := json.Unmarshal(b, &u); err != nil {
		tb.Fatal(err)
	}
	return u
}

func (c *conn) next(tb testing.TB) update {
	tb.Helper()
	select {
	case n := <-c.notes:
		return decodeUpdate(tb, n)
	case <-time.After(waitFor):
		tb.Fatal("no notifications/resources/updated")
		return update{}
	}
}

func (c *conn) none(tb testing.TB) {
	tb.Helper()
	select {
	case n := <-c.notes:
		tb.Fatalf("unexpected notification %+v", decodeUpdate(tb, n))
	case <-time.After(quiet):
	}
}

// call calls a tool and returns its result text and whether it was an
// error result.
func (c *conn) call(tb testing.TB, name string, args map[string]any) (string, bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	var text []string
	for _, ct := range res.Content {
		if t, ok := ct.(mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	return strings.Join(text, "\n"), res.IsError
}

// ok calls a tool that must succeed and decodes its JSON result into v.
func (c *conn) ok(tb testing.TB, name string, args map[string]any, v any) {
	tb.Helper()
	text, isErr := c.call(tb, name, args)
	if isErr {
		tb.Fatalf("%s(%v): %s", name, args, text)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(text), v); err != nil {
			tb.Fatalf("%s: %v in %s", name, err, text)
		}
	}
}

// fails calls a tool that must fail with a message containing want.
func (c *conn) fails(tb testing.TB, name string, args map[string]any, want string) {
	tb.Helper()
	text, isErr := c.call(tb, name, args)
	if !isErr {
		tb.Fatalf("%s(%v) succeeded (%s), want an error containing %q", name, args, text, want)
	}
	if !strings.Contains(text, want) {
		tb.Fatalf("%s(%v) = %q, want it to contain %q", name, args, text, want)
	}
	if strings.Contains(text, "internal error") {
		tb.Fatalf("%s(%v) = %q: a refusal reported as an internal error", name, args, text)
	}
}

func (c *conn) readInbox(tb testing.TB, uri string) InboxPage {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	res, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
	if err != nil {
		tb.Fatal(err)
	}
	if len(res.Contents) != 1 {
		tb.Fatalf("%d contents", len(res.Contents))
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok || tc.MIMEType != "application/json" {
		tb.Fatalf("contents %#v", res.Contents[0])
	}
	var body InboxPage
	if err := json.Unmarshal([]byte(tc.Text), &body); err != nil {
		tb.Fatal(err)
	}
	return body
}

func contents(ms []InboxMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Content
	}
	return out
}

func sessionID(s string) core.SessionID { return core.SessionID(s) }
