package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/parley-chat/parley/core"
	parleymcp "github.com/parley-chat/parley/mcp"
)

// stateKey is the agent.state key the orchestrator keeps a session's state
// under. It is named after the one agent parley ran when it was chosen,
// and kept so, whichever agents a session runs with, so that sessions
// stored then go on where they were.
const stateKey = "claude-code"

// legacyKind is the kind of a conversation saved before conversations
// recorded theirs: Claude Code's, the only kind there was.
const legacyKind = "claude-code"

// state is what the orchestrator keeps with a session (agent.state). One
// record holds the session's progress and the conversation of each agent
// it ran with, so that a turn's end saves the watermark and its
// conversation's progress in one write.
type state struct {
	// Conversation, Started and Kind are the default agent's
	// conversation (conv), where they were before sessions had several.
	Conversation string `json:"conversation"`
	Started      bool   `json:"started,omitempty"`
	Kind         string `json:"kind,omitempty"`
	// Watermark is the last inbox message fully handled: a turn's
	// messages are covered once the agent answered them (its Result).
	Watermark core.MessageID `json:"watermark"`
	// Told is the newest message of a batch whose failure people were
	// told of, so a retry that fails again says nothing more.
	Told core.MessageID `json:"told,omitempty"`
	// Agent is the name of the agent the session runs with ("": the
	// default): the session's agent when the state was made, then each
	// switch (a person's /agent) read from the inbox.
	Agent string `json:"agent,omitempty"`
	// Agents are the conversations of the named agents the session ran
	// with, by name.
	Agents map[string]conv `json:"agents,omitempty"`
}

// conv is one agent's conversation of a session.
type conv struct {
	// Conversation is the agent's conversation id: made and saved before
	// the first start for a driver that takes names (agent.Namer), saved
	// once the first start returned for the others; "" before.
	Conversation string `json:"conversation"`
	// Started is set once a turn of the conversation ended, so that the
	// next start resumes it.
	Started bool `json:"started,omitempty"`
	// Kind is the kind of agent the conversation is of ("": legacyKind).
	Kind string `json:"kind,omitempty"`
}

// conv returns the conversation of the agent named name.
func (s *state) conv(name string) conv {
	if name == "" {
		return conv{Conversation: s.Conversation, Started: s.Started, Kind: s.Kind}
	}
	return s.Agents[name]
}

// setConv sets the conversation of the agent named name.
func (s *state) setConv(name string, c conv) {
	if name == "" {
		s.Conversation, s.Started, s.Kind = c.Conversation, c.Started, c.Kind
		return
	}
	agents := make(map[string]conv, len(s.Agents)+1)
	maps.Copy(agents, s.Agents)
	agents[name] = c
	s.Agents = agents
}

// loadState reads session id's state; ok is false when there is none.
func (o *Orchestrator) loadState(ctx context.Context, id string) (state, bool, error) {
	var res struct {
		Value string `json:"value"`
	}
	if err := o.call(ctx, "agent.state", map[string]any{"key": stateKey, "session_id": id}, &res); err != nil {
		return state{}, false, err
	}
	if res.Value == "" {
		return state{}, false, nil
	}
	var st state
	if err := json.Unmarshal([]byte(res.Value), &st); err != nil {
		return state{}, false, fmt.Errorf("orchestrator: the state of session %s: %w", id, err)
	}
	return st, true, nil
}

// saveState writes the session's state durably: through agent.state with
// one instance, and with several into the same cursor fenced by the
// worker's holding of the session's lease, checked in the same statement
// as the write, so that a holder that lost the lease cannot set the state
// back behind the next holder's. A refused write ends the holding: the
// worker stops as it does when a renewal fails.
func (w *worker) saveState(ctx context.Context, st state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	if w.held == nil || w.o.opts.Leases == nil {
		return w.o.call(ctx, "agent.state", map[string]any{"key": stateKey, "session_id": w.id, "value": string(b)}, nil)
	}
	err = w.o.opts.Leases.SetCursorFenced(ctx, parleymcp.AgentStateCursor(core.SessionID(w.id), stateKey), string(b), w.held.Lease())
	if err == nil {
		return nil
	}
	err = fmt.Errorf("orchestrator: save the state of session %s: %w", w.id, err)
	if errors.Is(err, core.ErrLeaseLost) {
		// Another instance holds the session now: this worker stops.
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		_ = w.held.GiveUp(gctx, err)
	}
	return err
}

// startPoint is where a session the orchestrator never handled starts: after
// the last message the agent side wrote (an assistant's or parley's), so
// that an old session's history is not handed as a turn; from the start
// when there is none. It reads the inbox once, a page at a time.
func (o *Orchestrator) startPoint(ctx context.Context, id string) (core.MessageID, error) {
	const page = 1000
	var after, start core.MessageID
	for {
		var body parleymcp.InboxPage
		if err := o.call(ctx, "chat_read_since", map[string]any{"after_id": after, "session_id": id, "limit": page}, &body); err != nil {
			return "", err
		}
		for _, m := range body.Messages {
			if m.Author == core.RoleAssistant || m.Author == core.RoleSystem {
				start = m.ID
			}
		}
		if len(body.Messages) < page {
			return start, nil
		}
		after = body.LastID
	}
}
