package acp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/parley-chat/parley/mcp/agent"
	"github.com/parley-chat/parley/mcp/internal/agentproc"
)

// conversation is one ACP session on the agent's process.
type conversation struct {
	p       *agentProc
	release func() // ends its use of the driver; idempotent

	events   chan agent.Event
	queue    *agentproc.Queue[agent.Event]
	done     chan struct{}
	stopping chan struct{} // closed by Stop: unread events are dropped
	stopOnce sync.Once

	mu      sync.Mutex
	id      string
	model   string
	loading bool  // a load is under way: updates are its replay
	turn    *turn // the running prompt, nil between turns
	ended   bool
	err     error
	pending map[string]*permission // open permission requests, by RequestID
	tools   map[string]*toolCall   // the turn's tool calls, by id
	// toolOrder are the turn's tool calls' ids, in the order reported.
	toolOrder []string
	text      textBlock
	// ownServer is the name of parley's MCP server in this session's
	// mcpServers, "" when it was given none.
	ownServer string
}

// turn is one session/prompt under way.
type turn struct {
	// denied: a call of the turn was denied; a turn the agent then ends
	// as cancelled ends StopDenied, unless interrupted.
	denied bool
	// interrupted: Interrupt cancelled the turn (StopCancelled).
	interrupted bool
}

var _ agent.Conversation = (*conversation)(nil)

func newConversation(p *agentProc, release func()) *conversation {
	c := &conversation{
		p: p, release: release,
		events:   make(chan agent.Event),
		queue:    agentproc.NewQueue[agent.Event](),
		done:     make(chan struct{}),
		stopping: make(chan struct{}),
		pending:  map[string]*permission{},
		tools:    map[string]*toolCall{},
	}
	go c.queue.Forward(c.events, c.stopping)
	return c
}

// ID implements agent.Conversation: the agent's sessionId.
func (c *conversation) ID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// Events implements agent.Conversation. Events wait in memory until read,
// so the agent's output is always read on; after Stop the unread ones are
// dropped.
func (c *conversation) Events() <-chan agent.Event { return c.events }

// Done implements agent.Conversation.
func (c *conversation) Done() <-chan struct{} { return c.done }

// Err implements agent.Conversation: nil after Stop (or the driver's
// Close), a *agent.Problem when the agent's process ended unexpectedly.
func (c *conversation) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Send implements agent.Conversation: one session/prompt, sent before it
// returns; its answer ends the turn (Result). One turn runs at a time: a
// Send while one runs fails.
func (c *conversation) Send(ctx context.Context, text string) error {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return errors.New("acp: the conversation ended")
	}
	if c.turn != nil {
		c.mu.Unlock()
		return errors.New("acp: a turn is running; send the next one after its Result")
	}
	t := &turn{}
	c.turn = t
	c.text = textBlock{}
	c.tools = map[string]*toolCall{}
	c.toolOrder = nil
	c.push(agent.Init{Conversation: c.id, Model: c.model})
	id := c.id
	c.mu.Unlock()
	params := map[string]any{"sessionId": id, "prompt": []any{map[string]string{"type": "text", "text": text}}}
	_, _, err := c.p.c.start(ctx, "session/prompt", params, func(r reply) { c.turnEnded(t, r) })
	if err != nil {
		c.mu.Lock()
		if c.turn == t {
			c.turn = nil
		}
		c.mu.Unlock()
		return err
	}
	return nil
}

// turnEnded runs on the reader with the prompt's answer: the open text
// block ends, the permission requests still open are withdrawn, and the
// Result says why the turn ended.
func (c *conversation) turnEnded(t *turn, r reply) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.turn != t || c.ended {
		return
	}
	c.turn = nil
	c.closeBlock()
	c.withdrawAll()
	c.unfinished()
	res := agent.Result{Stop: agent.StopEndTurn}
	if r.err != nil {
		// The agent's message, for people (OpenCode 1.18.33: "Internal
		// error: invalid x-api-key" for a model API's 401); the rest is
		// logged.
		msg := r.err.Error()
		var rerr *rpcError
		if errors.As(r.err, &rerr) {
			msg = rerr.Message
		}
		c.p.d.log.Warn("acp: the prompt failed", "session", c.id, "err", r.err)
		res = agent.Result{Stop: agent.StopError, Errors: []string{msg}}
	} else {
		var pr struct {
			StopReason string `json:"stopReason"`
		}
		decode(r.result, &pr)
		res.Stop = stopReason(pr.StopReason, t.denied && !t.interrupted)
		if res.Stop == agent.StopError {
			res.Errors = []string{"the agent ended the turn with stopReason " + fmt.Sprintf("%q", pr.StopReason)}
		}
	}
	c.push(res)
}

// stopReason maps ACP's stopReason
// (https://agentclientprotocol.com/protocol/prompt-turn#stop-reasons).
func stopReason(s string, denied bool) agent.StopReason {
	switch s {
	case "end_turn":
		return agent.StopEndTurn
	case "cancelled":
		if denied {
			return agent.StopDenied
		}
		return agent.StopCancelled
	case "refusal":
		return agent.StopRefusal
	case "max_tokens":
		return agent.StopMaxTokens
	case "max_turn_requests":
		return agent.StopMaxTurns
	}
	return agent.StopError
}

// Interrupt implements agent.Conversation: session/cancel, after which the
// agent answers the prompt with stopReason cancelled. The permission
// requests still open are withdrawn and answered cancelled, as ACP asks
// (https://agentclientprotocol.com/protocol/prompt-turn#cancellation).
func (c *conversation) Interrupt(ctx context.Context) error {
	c.mu.Lock()
	if c.turn == nil || c.ended {
		c.mu.Unlock()
		return nil
	}
	c.turn.interrupted = true
	id := c.id
	c.mu.Unlock()
	err := c.p.c.notify(ctx, "session/cancel", map[string]string{"sessionId": id})
	c.mu.Lock()
	c.withdrawAll()
	c.mu.Unlock()
	return err
}

// Stop implements agent.Conversation: a running turn is cancelled, the
// session closed where the agent offers session/close (else it stays open
// in the process, and a later Start of it attaches to it), and the
// conversation ends; the process serves on.
func (c *conversation) Stop() error {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		<-c.done
		return nil
	}
	running := c.turn != nil
	id := c.id
	c.mu.Unlock()
	c.stopOnce.Do(func() { close(c.stopping) })
	ctx, cancel := context.WithTimeout(context.Background(), c.p.d.opts.CallTimeout)
	defer cancel()
	var err error
	if running {
		err = c.p.c.notify(ctx, "session/cancel", map[string]string{"sessionId": id})
	}
	c.mu.Lock()
	c.withdrawAll()
	c.mu.Unlock()
	c.p.mu.Lock()
	if c.p.convs[id] == c {
		delete(c.p.convs, id)
	}
	c.p.mu.Unlock()
	if err == nil {
		err = c.p.closeSession(ctx, id)
	}
	if err != nil {
		c.p.d.log.Warn("acp: closing the session failed", "session", id, "err", err)
	}
	c.end(nil)
	return nil
}

// end ends the conversation with err: the permission requests still open
// are withdrawn, the events read so far stay readable, then Events closes.
func (c *conversation) end(err error) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.withdrawAll()
	c.ended = true
	c.err = err
	c.turn = nil
	c.mu.Unlock()
	c.release()
	c.queue.Close()
	close(c.done)
}

// discard ends a conversation Start did not return.
func (c *conversation) discard() {
	c.stopOnce.Do(func() { close(c.stopping) })
	c.end(nil)
}

// push queues events, under c.mu.
func (c *conversation) push(events ...agent.Event) {
	if !c.ended {
		c.queue.Push(events...)
	}
}

// textBlock is the answer's text block being streamed.
type textBlock struct {
	open    bool
	index   int // the open block's, else the next one's
	message string
	buf     strings.Builder
}
