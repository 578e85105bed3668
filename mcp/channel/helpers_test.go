package channel_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	parleymcp "github.com/parley-chat/parley/mcp"
	"github.com/parley-chat/parley/mcp/channel"
	"github.com/parley-chat/parley/store/bolt"
)

// waitFor bounds every wait in these tests.
const waitFor = 15 * time.Second

// quiet is how long a check that nothing more arrives waits: longer than
// the channel's resync in these tests, so a repeat would have come.
const quiet = 700 * time.Millisecond

// testResync is the channel's resync period in these tests.
const testResync = 100 * time.Millisecond

func testLogger() *slog.Logger {
	if os.Getenv("PARLEY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// daemon is a real parley daemon's MCP stack in-process: bbolt in a
// directory, the bus, the command service and the MCP server behind a
// loopback listener. stop and startDaemon on the same directory and address
// are a restart: the MCP sessions are gone, the data stays.
type daemon struct {
	tb     testing.TB
	dir    string
	addr   string
	store  *bolt.Store
	svc    *commands.Service
	srv    *parleymcp.Server
	hs     *http.Server
	cancel context.CancelFunc
	ran    chan struct{}
	served chan struct{}
	once   sync.Once
}

func startDaemon(tb testing.TB, dir, addr string) *daemon {
	tb.Helper()
	ctx := context.Background()
	store, err := bolt.Open(filepath.Join(dir, "parley.db"), bolt.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	last, err := store.LastEventSeq(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	bus := core.NewMemBus(last + 1)
	svc, err := commands.New(ctx, store, bus, commands.Options{Logger: testLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := parleymcp.New(parleymcp.Options{Handler: svc, Store: store, Bus: bus, Logger: testLogger(), Version: "test", Protected: []string{dir}})
	if err != nil {
		tb.Fatal(err)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	d := &daemon{tb: tb, dir: dir, addr: ln.Addr().String(), store: store, svc: svc, srv: srv, cancel: cancel,
		ran: make(chan struct{}), served: make(chan struct{})}
	go func() {
		defer close(d.ran)
		srv.Run(runCtx)
	}()
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler())
	d.hs = &http.Server{Handler: mux}
	go func() {
		defer close(d.served)
		_ = d.hs.Serve(ln)
	}()
	tb.Cleanup(d.stop)
	return d
}

func (d *daemon) url() string { return "http://" + d.addr + "/mcp" }

// stop stops the daemon as a crash would look to its clients: every
// connection is cut, then the store is closed.
func (d *daemon) stop() {
	d.once.Do(func() {
		_ = d.hs.Close()
		<-d.served
		d.cancel()
		<-d.ran
		d.srv.Close()
		if err := d.store.Close(); err != nil {
			d.tb.Error(err)
		}
	})
}

// restart stops the daemon and starts it again on the same data and address.
func (d *daemon) restart() *daemon {
	d.tb.Helper()
	d.stop()
	return startDaemon(d.tb, d.dir, d.addr)
}

func (d *daemon) createSession(title string) core.SessionID {
	d.tb.Helper()
	res, err := d.svc.Handle(context.Background(), core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Title: title})
	if err != nil {
		d.tb.Fatal(err)
	}
	return res.Session
}

// human posts a person's message, as the web page's API does.
func (d *daemon) human(id core.SessionID, text string) core.Message {
	d.tb.Helper()
	res, err := d.svc.Handle(context.Background(), core.Command{Kind: core.SendMessage, Session: id, Origin: core.OriginAPI,
		Actor: core.Actor{ID: "u1", Name: "Ada"}, Text: text})
	if err != nil {
		d.tb.Fatal(err)
	}
	return res.Message
}

func (d *daemon) assistant(id core.SessionID, text string) core.Message {
	d.tb.Helper()
	res, err := d.svc.Handle(context.Background(), core.Command{Kind: core.AssistantPost, Session: id, Origin: core.OriginAPI, Text: text})
	if err != nil {
		d.tb.Fatal(err)
	}
	return res.Message
}

// inbox is every message of a session.
func (d *daemon) inbox(id core.SessionID) []core.Message {
	d.tb.Helper()
	ms, err := d.store.Inbox(context.Background(), id, "", 10000)
	if err != nil {
		d.tb.Fatal(err)
	}
	return ms
}

func (d *daemon) session(id core.SessionID) core.Session {
	d.tb.Helper()
	s, err := d.store.Session(context.Background(), id)
	if err != nil {
		d.tb.Fatal(err)
	}
	return s
}

// question waits for the session's open question and returns its id.
func (d *daemon) question(id core.SessionID) core.Question {
	d.tb.Helper()
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) {
		if qs := d.session(id).Questions; len(qs) > 0 {
			return qs[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.tb.Fatal("no question was asked")
	return core.Question{}
}

// answer answers question q of session id with option opt (1-based), as a
// person pressing a button.
func (d *daemon) answer(id core.SessionID, q core.Question, opt int) {
	d.tb.Helper()
	if _, err := d.svc.Handle(context.Background(), core.Command{Kind: core.Answer, Session: id, Origin: core.OriginAPI,
		QuestionID: q.ID, Option: opt}); err != nil {
		d.tb.Fatal(err)
	}
}

// watermark is the channel's kept state for session id, read over MCP as
// any agent would (agent.state), or "" when none is kept.
func (d *daemon) watermark(id core.SessionID) core.MessageID {
	d.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	tr, err := transport.NewStreamableHTTP(d.url(), transport.WithHTTPHeaders(map[string]string{parleymcp.SessionHeader: string(id)}))
	if err != nil {
		d.tb.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	if err := c.Start(ctx); err != nil {
		d.tb.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "test", Version: "1"}}}); err != nil {
		d.tb.Fatal(err)
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "agent.state", Arguments: map[string]any{"key": channel.StateKey}}})
	if err != nil || res.IsError {
		d.tb.Fatalf("agent.state: %v %+v", err, res)
	}
	var out struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal([]byte(res.Content[0].(mcp.TextContent).Text), &out); err != nil {
		d.tb.Fatal(err)
	}
	if out.Value == "" {
		return ""
	}
	var st struct {
		Watermark core.MessageID `json:"watermark"`
	}
	if err := json.Unmarshal([]byte(out.Value), &st); err != nil {
		d.tb.Fatal(err)
	}
	return st.Watermark
}

// waitWatermark waits until the kept watermark is want.
func (d *daemon) waitWatermark(id core.SessionID, want core.MessageID) {
	d.tb.Helper()
	deadline := time.Now().Add(waitFor)
	var got core.MessageID
	for time.Now().Before(deadline) {
		if got = d.watermark(id); got == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.tb.Fatalf("watermark %q, want %q", got, want)
}

// event is one notifications/claude/channel as Claude Code receives it.
type event struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
}

// verdict is one notifications/claude/channel/permission.
type verdict struct {
	RequestID string `json:"request_id"`
	Behavior  string `json:"behavior"`
}

// claude plays Claude Code's side of a channel: an MCP client that probes
// and initializes as Claude Code 2.1.328 does and declares what it
// declares, with handlers for the channel's notifications.
type claude struct {
	tb       testing.TB
	c        *client.Client
	events   chan event
	verdicts chan verdict
	// proto is the protocol version negotiated.
	proto string
	// done yields Serve's result, for a channel run in-process.
	done   chan error
	cancel context.CancelFunc
	stdin  io.Closer // closing it is Claude Code exiting
	once   sync.Once
}

// claudeCaps are the client capabilities Claude Code 2.1.328 declares
// (recorded from its initialize request).
func claudeCaps() mcp.ClientCapabilities {
	caps := mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}}
	caps.Roots = &struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}{ListChanged: true}
	return caps
}

// connect speaks to a channel over tr the way Claude Code does: the
// server/discover probe at 2026-07-28 (mcp-go's client probes first, as
// Claude Code does), initialize, notifications/initialized, tools/list.
func connect(tb testing.TB, tr transport.Interface) *claude {
	tb.Helper()
	cl := &claude{tb: tb, events: make(chan event, 1024), verdicts: make(chan verdict, 64)}
	c := client.NewClient(tr)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		b, err := json.Marshal(n.Params.AdditionalFields)
		if err != nil {
			tb.Error(err)
			return
		}
		switch n.Method {
		case channel.MethodChannel:
			var e event
			if err := json.Unmarshal(b, &e); err != nil {
				tb.Error(err)
			}
			cl.events <- e
		case channel.MethodPermission:
			var v verdict
			if err := json.Unmarshal(b, &v); err != nil {
				tb.Error(err)
			}
			cl.verdicts <- v
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := c.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	res, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: mcp.LATEST_PROTOCOL_VERSION,
		Capabilities:    claudeCaps(),
		ClientInfo:      mcp.Implementation{Name: "claude-code", Title: "Claude Code", Version: "2.1.328"},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	cl.c, cl.proto = c, c.ProtocolVersion()
	// Claude Code registers its channel handlers only when the server
	// declares the capabilities: check them as it does.
	for _, k := range []string{"claude/channel", "claude/channel/permission"} {
		if _, ok := res.Capabilities.Experimental[k]; !ok {
			tb.Fatalf("the server does not declare experimental[%q]: %+v", k, res.Capabilities.Experimental)
		}
	}
	if res.Capabilities.Tools == nil {
		tb.Fatal("the server declares no tools")
	}
	if !strings.Contains(res.Instructions, "reply") {
		tb.Fatalf("instructions %q do not say how to reply", res.Instructions)
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		tb.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != channel.ReplyTool {
		tb.Fatalf("tools %+v, want only %s", tools.Tools, channel.ReplyTool)
	}
	return cl
}

// startChannel runs channel.Serve in-process on pipes, with the test
// logger, the daemon's URL and a short resync, and connects to it.
func startChannel(tb testing.TB, opts channel.Options) *claude {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	if opts.Resync == 0 {
		opts.Resync = testResync
	}
	if opts.Settle == 0 {
		opts.Settle = 10 * time.Millisecond
	}
	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := channel.Serve(ctx, opts, serverIn, serverOut)
		_ = serverOut.Close()
		_ = serverIn.Close()
		done <- err
	}()
	cl := connect(tb, transport.NewIO(clientIn, clientOut, nil))
	cl.done, cl.cancel, cl.stdin = done, cancel, clientOut
	tb.Cleanup(func() { cl.stop() })
	return cl
}

// stop ends Claude Code's side (its stdin to the channel closes) and waits
// for the channel to return, which must be without an error.
func (cl *claude) stop() {
	cl.once.Do(func() {
		if cl.stdin != nil {
			_ = cl.stdin.Close()
		}
		if cl.done != nil {
			select {
			case err := <-cl.done:
				if err != nil {
					cl.tb.Errorf("the channel returned %v", err)
				}
			case <-time.After(waitFor):
				cl.tb.Error("the channel did not stop when its stdin closed")
			}
			cl.cancel()
		}
		_ = cl.c.Close()
	})
}

// next waits for the next channel event.
func (cl *claude) next() event {
	cl.tb.Helper()
	select {
	case e := <-cl.events:
		return e
	case <-time.After(waitFor):
		cl.tb.Fatal("no notifications/claude/channel")
		return event{}
	}
}

// none checks that no further event arrives.
func (cl *claude) none() {
	cl.tb.Helper()
	select {
	case e := <-cl.events:
		cl.tb.Fatalf("unexpected event %+v", e)
	case <-time.After(quiet):
	}
}

// expect waits for events with exactly these contents, in order, and no
// more.
func (cl *claude) expect(contents ...string) []event {
	cl.tb.Helper()
	var got []event
	for _, want := range contents {
		e := cl.next()
		if e.Content != want {
			cl.tb.Fatalf("event %q, want %q (after %d events)", e.Content, want, len(got))
		}
		got = append(got, e)
	}
	cl.none()
	return got
}

// reply calls the reply tool and returns its text and whether it failed.
func (cl *claude) reply(args map[string]any) (string, bool) {
	cl.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	res, err := cl.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: channel.ReplyTool, Arguments: args}})
	if err != nil {
		cl.tb.Fatal(err)
	}
	var text []string
	for _, ct := range res.Content {
		if t, ok := ct.(mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	return strings.Join(text, "\n"), res.IsError
}

// askPermission sends the permission_request Claude Code sends when a tool
// call needs approval.
func (cl *claude) askPermission(id, tool, description, preview string) {
	cl.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	err := cl.c.GetTransport().SendNotification(ctx, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: channel.MethodPermissionRequest, Params: mcp.NotificationParams{
			AdditionalFields: map[string]any{"request_id": id, "tool_name": tool, "description": description, "input_preview": preview}}}})
	if err != nil {
		cl.tb.Fatal(err)
	}
}

func (cl *claude) verdict() verdict {
	cl.tb.Helper()
	select {
	case v := <-cl.verdicts:
		return v
	case <-time.After(waitFor):
		cl.tb.Fatal("no notifications/claude/channel/permission")
		return verdict{}
	}
}

// sessionOf waits for the session a channel reports with OnSession.
func sessionOf(tb testing.TB, ch <-chan core.SessionID) core.SessionID {
	tb.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(waitFor):
		tb.Fatal("the channel reported no session")
		return ""
	}
}
