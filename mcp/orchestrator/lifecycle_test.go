package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/internal/pipenet"
)

// TestRestartMidTurn: parley stops in the middle of a turn (the agent's
// process killed with it: Claude Code keeps the turn's message, but no
// answer) and starts again on the same data: the message is handed again,
// answered once, in the same conversation, which the killed first turn
// made (--session-id fails, --resume continues it); a message that arrived
// while parley was down goes with it.
func TestRestartMidTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		st := newStack(t, dir)
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.Say("thinking about " + ft.Text)
			ft.Pause(time.Hour)
		})
		r := startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "question")
		settle(time.Second)
		var before state
		if err := json.Unmarshal([]byte(st.state(id)), &before); err != nil {
			t.Fatal(err)
		}
		r.stop()
		if p := fc.procsOf(string(id)); len(p) != 1 || !p[0].wasStopped() {
			t.Fatal("Run returned without stopping the agent")
		}
		st.close()

		st = newStack(t, dir)
		st.say(id, bob, "meanwhile")
		fc.mu.Lock()
		fc.model = func(ft *fakeTurn) { ft.Say("answer to " + ft.Text) }
		fc.mu.Unlock()
		startOrchestrator(t, st, fc, nil)
		settle(time.Second)

		if got := fc.sent(string(id)); !slices.Equal(got, []string{"question", "Ann: question\n\nBob: meanwhile"}) {
			t.Fatalf("handed %q", got)
		}
		if got := fc.transcript(before.Conversation); !slices.Equal(got, []string{"question", "Ann: question\n\nBob: meanwhile"}) {
			t.Fatalf("the conversation holds %q: the killed turn's message, then the one answered", got)
		}
		_, finals := st.outputs(id)
		if !slices.Equal(finals, []string{"answer to Ann: question\n\nBob: meanwhile"}) {
			t.Fatalf("final outputs %q", finals)
		}
		if n := len(st.events(id, core.EventTurnComplete)); n != 1 {
			t.Fatalf("%d turns completed", n)
		}
		starts := fc.startsOf(string(id))
		if len(starts) != 3 || starts[1].resume || !starts[2].resume || starts[2].conversation != before.Conversation {
			t.Fatalf("starts %+v: the killed first turn's conversation is resumed", starts)
		}
	})
}

// TestRestartAfterBackgroundCommand: parley stops in the middle of a turn
// whose agent had started a background command. The resumed conversation
// first ends a turn of Claude Code's own (reporting the command
// unfinished) before it reads the message handed again: that Result is not
// the person's answer, which is shown once when it comes.
func TestRestartAfterBackgroundCommand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		st := newStack(t, dir)
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.Background("toolu_1", "tail -f build.log")
			ft.Say("looking at " + ft.Text)
			ft.Pause(time.Hour)
		})
		r := startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "question")
		settle(time.Second)
		r.stop()
		st.close()

		st = newStack(t, dir)
		fc.mu.Lock()
		fc.model = func(ft *fakeTurn) {
			ft.Pause(time.Second)
			ft.Say("answer to " + ft.Text)
		}
		fc.mu.Unlock()
		startOrchestrator(t, st, fc, nil)
		settle(3 * time.Second)

		if got := fc.sent(string(id)); !slices.Equal(got, []string{"question", "question"}) {
			t.Fatalf("handed %q", got)
		}
		_, finals := st.outputs(id)
		if !slices.Equal(finals, []string{"answer to question"}) {
			t.Fatalf("final outputs %q, want the answer once", finals)
		}
		if n := len(st.events(id, core.EventTurnComplete)); n != 1 {
			t.Fatalf("%d turns completed, want one", n)
		}
		if starts := fc.startsOf(string(id)); len(starts) != 3 || !starts[2].resume {
			t.Fatalf("starts %+v: the killed turn's conversation exists and is resumed", starts)
		}
	})
}

// TestRestartAfterTurn: restarted after a completed turn, the orchestrator
// hands nothing again and resumes the conversation for the next message.
func TestRestartAfterTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		st := newStack(t, dir)
		id := st.create()
		fc := newFakeClaude(nil)
		r := startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "one")
		settle(time.Second)
		r.stop()
		st.close()

		st = newStack(t, dir)
		startOrchestrator(t, st, fc, nil)
		settle(time.Second)
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"one"}) {
			t.Fatalf("handed %q after the restart", got)
		}
		st.say(id, ann, "two")
		settle(time.Second)
		starts := fc.startsOf(string(id))
		if len(starts) != 2 || !starts[1].resume {
			t.Fatalf("starts %+v", starts)
		}
		if got := fc.transcript(starts[0].conversation); !slices.Equal(got, []string{"one", "two"}) {
			t.Fatalf("transcript %q", got)
		}
	})
}

// TestNoStateStartPoint: a session the orchestrator never handled starts
// after the last message the agent side wrote: older history is not a turn.
func TestNoStateStartPoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		old, fresh := st.create(), st.create()
		st.say(old, ann, "old question")
		st.handle(core.Command{Kind: core.AssistantPost, Session: old, Origin: core.OriginMCP, Text: "an old answer"})
		st.handle(core.Command{Kind: core.YieldTurn, Session: old, Origin: core.OriginMCP})
		st.say(old, ann, "new question")
		st.say(fresh, ann, "first")
		fc := newFakeClaude(nil)
		startOrchestrator(t, st, fc, nil)
		settle(time.Second)
		if got := fc.sent(string(old)); !slices.Equal(got, []string{"new question"}) {
			t.Fatalf("old session: handed %q", got)
		}
		if got := fc.sent(string(fresh)); !slices.Equal(got, []string{"first"}) {
			t.Fatalf("new session: handed %q", got)
		}
	})
}

// TestStartFailure: an agent that cannot start gives the person one notice
// with the cause, and the turn ends; the messages stay: a restart that
// fails again says nothing more, and the next message tries again with
// all of them.
func TestStartFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		st := newStack(t, dir)
		id := st.create()
		fc := newFakeClaude(nil)
		fc.setFailStart(errors.New(`the agent command "claude" is not installed (not found on PATH)`))
		r := startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "hello")
		settle(time.Second)
		notices := st.assistant(id)
		if len(notices) != 1 || !strings.Contains(notices[0], "not installed") {
			t.Fatalf("notices %q", notices)
		}
		if st.session(id).Status != core.StatusIdle {
			t.Fatalf("status %s", st.session(id).Status)
		}
		r.stop()
		r = startOrchestrator(t, st, fc, nil)
		settle(time.Second)
		if n := len(fc.startsOf(string(id))); n != 4 {
			t.Fatalf("%d starts, want two tries (resume flipped) per attempt", n)
		}
		if notices := st.assistant(id); len(notices) != 1 {
			t.Fatalf("notices %q after a retry that failed the same way", notices)
		}
		if n := len(st.events(id, core.EventTurnComplete)); n != 1 {
			t.Fatalf("%d turns completed", n)
		}
		fc.setFailStart(nil)
		st.say(id, ann, "again")
		settle(time.Second)
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"hello\n\nagain"}) {
			t.Fatalf("handed %q", got)
		}
		_, finals := st.outputs(id)
		if !slices.Equal(finals, []string{"echo: hello\n\nagain"}) {
			t.Fatalf("final outputs %q", finals)
		}
		r.stop()
	})
}

// TestAgentCrash: a process that dies in the middle of a turn is reported
// once; the turn's messages are handed again with the next message.
func TestAgentCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			if ft.Text == "one" {
				ft.Pause(time.Hour)
			}
			ft.Say("done: " + ft.Text)
		})
		startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "one")
		settle(time.Second)
		fc.procsOf(string(id))[0].crash(errors.New("Invalid API key · Please run /login"))
		settle(time.Second)
		if notices := st.assistant(id); len(notices) != 1 || !strings.Contains(notices[0], "Invalid API key") {
			t.Fatalf("notices %q", notices)
		}
		st.say(id, ann, "two")
		settle(time.Second)
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"one", "one\n\ntwo"}) {
			t.Fatalf("handed %q", got)
		}
	})
}

// TestMaxRunning: with one agent allowed, a second session waits, told
// once; when the first one's turn ends its idle process is stopped to make
// room, and the second session's turn runs.
func TestMaxRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		a, b := st.create(), st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.Pause(10 * time.Second)
			ft.Say("done: " + ft.Text)
		})
		startOrchestrator(t, st, fc, func(o *Options) { o.MaxRunning = 1 })
		st.say(a, ann, "first")
		settle(time.Second)
		st.say(b, bob, "second")
		settle(time.Second)
		st.say(b, bob, "third")
		settle(time.Second)
		outs, _ := st.outputs(b)
		if contains(outs, "busy") != 1 {
			t.Fatalf("outputs of the waiting session %q: told once", outs)
		}
		if len(fc.procsOf(string(b))) != 0 {
			t.Fatal("a second agent started")
		}
		settle(10 * time.Second)
		if p := fc.procsOf(string(a)); len(p) != 1 || !p[0].wasStopped() {
			t.Fatal("the idle agent was not stopped to make room")
		}
		settle(15 * time.Second)
		if got := fc.sent(string(b)); !slices.Equal(got, []string{"second\n\nthird"}) {
			t.Fatalf("handed %q", got)
		}
		_, finals := st.outputs(b)
		if !slices.Equal(finals, []string{"done: second\n\nthird"}) {
			t.Fatalf("final outputs %q", finals)
		}
		// The first session's next message waits in turn, and resumes.
		st.say(a, ann, "later")
		settle(30 * time.Second)
		starts := fc.startsOf(string(a))
		if len(starts) != 2 || !starts[1].resume {
			t.Fatalf("starts %+v", starts)
		}
	})
}

// TestIdleStop: an idle process is stopped after IdleStop; the next
// message resumes the conversation in a new one.
func TestIdleStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(nil)
		startOrchestrator(t, st, fc, func(o *Options) { o.IdleStop = time.Minute })
		st.say(id, ann, "one")
		settle(59 * time.Second)
		if fc.procsOf(string(id))[0].wasStopped() {
			t.Fatal("stopped before IdleStop")
		}
		settle(2 * time.Second)
		if !fc.procsOf(string(id))[0].wasStopped() {
			t.Fatal("not stopped after IdleStop")
		}
		st.say(id, ann, "two")
		settle(time.Second)
		starts := fc.startsOf(string(id))
		if len(starts) != 2 || !starts[1].resume {
			t.Fatalf("starts %+v", starts)
		}
	})
}

// TestAPIDeadline: a model whose API keeps failing is interrupted after
// APIDeadline and the person told the error, once.
func TestAPIDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) { ft.Retry(20*time.Second, "529 overloaded_error") })
		startOrchestrator(t, st, fc, func(o *Options) { o.APIDeadline = time.Minute })
		st.say(id, ann, "hi")
		settle(50 * time.Second)
		if len(st.assistant(id)) != 0 {
			t.Fatal("told before the deadline")
		}
		settle(20 * time.Second)
		notices := st.assistant(id)
		if len(notices) != 1 || !strings.Contains(notices[0], "529 overloaded_error") {
			t.Fatalf("notices %q", notices)
		}
		if n := len(st.events(id, core.EventTurnComplete)); n != 1 {
			t.Fatalf("%d turns completed", n)
		}
	})
}

// TestPresence: with the orchestrator connected, every session counts as
// listened to: no "no agent" notice, and ui://agent/status says so.
func TestPresence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		startOrchestrator(t, st, newFakeClaude(nil), nil)
		if !st.srv.AgentStatus().Listening(id) {
			t.Fatal("the session does not count as listened to")
		}
		st.say(id, ann, "hi")
		settle(time.Second)
		if n := len(st.events(id, core.EventNotice)); n != 0 {
			t.Fatalf("%d notices: no agent notice while the orchestrator listens", n)
		}
		tr, err := transport.NewStreamableHTTP("http://parley/mcp", transport.WithHTTPBasicClient(st.client()))
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr)
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Initialize(t.Context(), mcp.InitializeRequest{}); err != nil {
			t.Fatal(err)
		}
		res, err := c.ReadResource(t.Context(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "ui://agent/status"}})
		if err != nil {
			t.Fatal(err)
		}
		var status struct {
			AllSessions int `json:"all_sessions"`
		}
		if err := json.Unmarshal([]byte(res.Contents[0].(mcp.TextResourceContents).Text), &status); err != nil {
			t.Fatal(err)
		}
		if status.AllSessions != 1 {
			t.Fatalf("status %+v", status)
		}
	})
}

// TestServerLate: started before parley's server answers, the orchestrator
// connects when it does and catches up on what was written meanwhile.
func TestServerLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		st.say(id, ann, "early")
		fc := newFakeClaude(nil)
		o, err := New(Options{Endpoint: "http://parley/mcp", HTTPClient: failingClient(st, 3), Agents: claudeAgent(fc, true), Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- o.Run(ctx) }()
		settle(10 * time.Second)
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"early"}) {
			t.Fatalf("handed %q", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestServerRestart: the server restarts under a running orchestrator
// (which notices by its pings), which reconnects and catches up on what
// was written while it was away.
func TestServerRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		st := newStack(t, dir)
		id := st.create()
		sd := &switchDialer{l: st.l}
		fc := newFakeClaude(nil)
		hc := &http.Client{Transport: &http.Transport{DialContext: sd.dial}}
		startOrchestrator(t, st, fc, func(o *Options) { o.HTTPClient = hc })
		st.say(id, ann, "one")
		settle(time.Second)
		st.close()
		settle(time.Second)
		st = newStack(t, dir)
		st.say(id, ann, "two")
		sd.set(st.l)
		settle(10 * time.Second)
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"one", "two"}) {
			t.Fatalf("handed %q", got)
		}
		if !st.srv.AgentStatus().Listening(id) {
			t.Fatal("not listening after the reconnection")
		}
		hc.CloseIdleConnections()
	})
}

// switchDialer dials the listener of the stack running now.
type switchDialer struct {
	mu sync.Mutex
	l  *pipenet.Listener
}

func (s *switchDialer) set(l *pipenet.Listener) {
	s.mu.Lock()
	s.l = l
	s.mu.Unlock()
}

func (s *switchDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	s.mu.Lock()
	l := s.l
	s.mu.Unlock()
	return l.Dial(ctx, network, addr)
}

// TestInterruptIgnored: a process that does not end an interrupted turn is
// stopped after interruptGrace and the turn ended as cancelled.
func TestInterruptIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.Say("stuck")
			<-ft.p.kill // deaf to interrupts
			ft.killed = true
		})
		startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "go")
		settle(time.Second)
		st.control(id, core.Cancel)
		settle(interruptGrace - time.Second)
		if fc.procsOf(string(id))[0].wasStopped() {
			t.Fatal("stopped before the grace ended")
		}
		settle(2 * time.Second)
		if !fc.procsOf(string(id))[0].wasStopped() {
			t.Fatal("not stopped after the grace")
		}
		_, finals := st.outputs(id)
		if !slices.Equal(finals, []string{"stuck\n\n" + cancelled}) {
			t.Fatalf("final outputs %q", finals)
		}
		if st.session(id).Status != core.StatusIdle {
			t.Fatalf("status %s", st.session(id).Status)
		}
	})
}

// TestRepairUnyieldedTurn: a previous run saved a turn's watermark but died
// before yielding it; the restart completes the turn, once.
func TestRepairUnyieldedTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		m := st.say(id, ann, "answered")
		st.handle(core.Command{Kind: core.OutputUpdate, Session: id, Origin: core.OriginMCP, Text: "the answer", Final: true})
		b, _ := json.Marshal(state{Conversation: newUUID(), Watermark: m.ID, Started: true})
		if err := st.store.SetCursor(t.Context(), "agent/"+string(id)+"/"+stateKey, string(b)); err != nil {
			t.Fatal(err)
		}
		fc := newFakeClaude(nil)
		startOrchestrator(t, st, fc, nil)
		settle(time.Second)
		if n := len(st.events(id, core.EventTurnComplete)); n != 1 {
			t.Fatalf("%d turns completed", n)
		}
		if st.session(id).Status != core.StatusIdle {
			t.Fatalf("status %s", st.session(id).Status)
		}
		if len(fc.startsOf(string(id))) != 0 {
			t.Fatal("an agent started for nothing")
		}
	})
}

// TestToken: with [http] token set, the orchestrator's requests carry it.
func TestToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		tok := "s3cret"
		st.token.Store(&tok)
		id := st.create()
		fc := newFakeClaude(nil)
		startOrchestrator(t, st, fc, func(o *Options) {
			o.Header = http.Header{"Authorization": {"Bearer " + tok}}
		})
		st.say(id, ann, "hi")
		settle(time.Second)
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"hi"}) {
			t.Fatalf("handed %q", got)
		}
	})
}

// gatedTransport holds the first agent.state call until open is closed, so
// that a test can wake a worker while its first read is under way.
type gatedTransport struct {
	http.RoundTripper
	once    sync.Once
	reached chan struct{}
	open    chan struct{}
}

func (g *gatedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Method == http.MethodPost {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte(`"agent.state"`)) {
			g.once.Do(func() {
				close(g.reached)
				<-g.open
			})
		}
	}
	return g.RoundTripper.RoundTrip(r)
}

// A worker whose first read fails (here: a session the store does not
// know) and that was woken again meanwhile reads again rather than quit:
// it stays the session's worker, so it must be the one to read, or every
// later message of the session would go to a worker nobody runs. Once a
// read fails with no wake pending it retires, and a wake makes a new one.
func TestWorkerWokenWhileFirstReadFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		fc := newFakeClaude(nil)
		g := &gatedTransport{RoundTripper: st.tr, reached: make(chan struct{}), open: make(chan struct{})}
		r := startOrchestrator(t, st, fc, func(o *Options) { o.HTTPClient = &http.Client{Transport: g} })
		const id = "01M8C000000000000000000000"
		worker := func() *worker {
			r.o.mu.Lock()
			defer r.o.mu.Unlock()
			return r.o.workers[id]
		}
		r.o.wake(id, false)
		<-g.reached
		w := worker()
		if w == nil {
			t.Fatal("no worker reading the session")
		}
		r.o.wake(id, false) // while its first read is under way
		close(g.open)
		settle(time.Second)
		if w := worker(); w != nil {
			t.Fatalf("worker %p still in the map after its reads failed with no wake pending", w)
		}
		if n := len(w.wake); n != 0 {
			t.Fatalf("%d wakes left unread", n)
		}
	})
}
