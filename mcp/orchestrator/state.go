package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/parley-chat/parley/core"
	parleymcp "github.com/parley-chat/parley/mcp"
)

// stateKey is the agent.state key the orchestrator keeps a session's state
// under.
const stateKey = "claude-code"

// state is what the orchestrator keeps with a session (agent.state).
type state struct {
	// Conversation is the agent's conversation id (a UUID), made and
	// saved before the first start.
	Conversation string `json:"conversation"`
	// Watermark is the last inbox message fully handled: a turn's
	// messages are covered once the agent answered them (its Result).
	Watermark core.MessageID `json:"watermark"`
	// Started is set once a turn of the conversation ended, so that the
	// next start resumes it.
	Started bool `json:"started,omitempty"`
	// Told is the newest message of a batch whose failure people were
	// told of, so a retry that fails again says nothing more.
	Told core.MessageID `json:"told,omitempty"`
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

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
