package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"github.com/parley-chat/parley/mcp/agent"
)

// Starting a session's conversation with its agent. A driver that takes
// names (agent.Namer, Claude Code) has its conversation named and the name
// saved before anything starts; a start then resumes the conversation once
// a turn of it ended, and a start that fails is tried once with resume
// flipped (a first turn that never ended leaves no conversation; one that
// ended just before a crash leaves one the state does not know of). A
// driver whose agent names its conversations (ACP) gets the saved id to
// resume, or none for a new conversation, whose id is saved once Start
// returned: a crash between the agent making it and that save leaves it
// unknown, and the next start makes another, which is handed the messages
// again — a conversation lost, no message. An agent that no longer has the
// conversation (agent.ErrNoConversation) gets a new one, and people are
// told, once, that it starts afresh when the old one had turns. A
// conversation saved for another kind of agent (the configuration
// changed) is not resumed either.

// errUnknownAgent is the failure of a session whose agent is not
// configured (any more).
type errUnknownAgent struct{ name string }

func (e errUnknownAgent) Error() string { return fmt.Sprintf("orchestrator: no agent %q", e.name) }

// startConversation starts the session's agent's conversation.
func (w *worker) startConversation(ctx context.Context) (agent.Conversation, error) {
	a := w.agent
	if a == nil {
		return nil, &agent.Problem{Cause: fmt.Sprintf("this session's agent %q is not configured", w.agentName),
			Fix: "/agent lists the agents parley runs, and /agent NAME switches the session to one", Err: errUnknownAgent{w.agentName}}
	}
	c := w.st.conv(w.agentName)
	kind := c.Kind
	if kind == "" {
		kind = legacyKind
	}
	var lost bool // the conversation had turns the agent will not see
	if c.Conversation != "" && kind != a.Kind {
		w.log.Info("the session's conversation is of another kind of agent; starting a new one", "was", kind, "now", a.Kind)
		lost, c = c.Started, conv{}
	}
	var p agent.Conversation
	var err error
	if namer, ok := a.Driver.(agent.Namer); ok {
		if c.Conversation == "" {
			c = conv{Conversation: namer.NewConversation(), Kind: a.Kind}
			if err := w.saveConv(ctx, c); err != nil {
				return nil, err
			}
		}
		p, err = w.startNamed(ctx, a, c)
	} else {
		p, c, lost, err = w.startUnnamed(ctx, a, c, lost)
	}
	if err != nil {
		return nil, err
	}
	if lost {
		w.post(ctx, "chat.assistant.post", map[string]any{"content": fmt.Sprintf(afreshText, w.title()),
			"idempotency_key": "orchestrator/afresh/" + w.id + "/" + c.Conversation})
	}
	return p, nil
}

// startNamed starts conversation c of a driver that takes names, trying
// the other resume once when the first try fails.
func (w *worker) startNamed(ctx context.Context, a *Agent, c conv) (agent.Conversation, error) {
	resume := c.Started
	p, err := w.startOnce(ctx, a, c.Conversation, resume)
	if err != nil && ctx.Err() == nil {
		if p2, err2 := w.startOnce(ctx, a, c.Conversation, !resume); err2 == nil {
			w.log.Info("the agent's conversation started with resume flipped", "resume", !resume, "first_err", err)
			p, err = p2, nil
		}
	}
	return p, err
}

// startUnnamed starts conversation c of a driver whose agent names its
// conversations — a new one when c has none, or the agent lost it — and
// saves its id. lost says the conversation had turns the agent will not
// see.
func (w *worker) startUnnamed(ctx context.Context, a *Agent, c conv, lost bool) (agent.Conversation, conv, bool, error) {
	p, err := w.startOnce(ctx, a, c.Conversation, c.Conversation != "")
	if errors.Is(err, agent.ErrNoConversation) && c.Conversation != "" {
		w.log.Info("the agent no longer has the session's conversation; starting a new one", "conversation", c.Conversation)
		lost = lost || c.Started
		c = conv{}
		p, err = w.startOnce(ctx, a, "", false)
	}
	if err != nil {
		return nil, c, false, err
	}
	if id := p.ID(); id != c.Conversation || c.Kind != a.Kind {
		c = conv{Conversation: id, Kind: a.Kind}
		if err := w.saveConv(ctx, c); err != nil {
			// It runs; unsaved, the next start makes another.
			w.log.Warn("saving the conversation's id failed", "err", err)
		}
	}
	return p, c, lost, nil
}

func (w *worker) startOnce(ctx context.Context, a *Agent, conversation string, resume bool) (agent.Conversation, error) {
	req := agent.StartRequest{Session: w.id, Conversation: conversation, Resume: resume}
	if w.o.opts.Tools != nil {
		req.Tools = w.o.opts.Tools(w.id)
	}
	p, err := a.Driver.Start(ctx, req)
	if err == nil && p == nil {
		err = errors.New("orchestrator: Start returned no conversation")
	}
	return p, err
}

// saveConv saves c as the conversation of the session's agent.
func (w *worker) saveConv(ctx context.Context, c conv) error {
	st := w.st
	st.setConv(w.agentName, c)
	if err := w.saveState(ctx, st); err != nil {
		return err
	}
	w.st = st
	return nil
}

// sessionAgent is the name of the agent session id was made with or
// switched to ("" for the default), from session.get.
func (o *Orchestrator) sessionAgent(ctx context.Context, id string) (string, error) {
	var res struct {
		Agent string `json:"agent"`
	}
	if err := o.call(ctx, "session.get", map[string]any{"session_id": id}, &res); err != nil {
		return "", err
	}
	return res.Agent, nil
}

// afreshText tells people the agent could not continue the session's
// conversation.
const afreshText = "ℹ️ %s could not continue this session's conversation: it starts a new one, without what was said before."
