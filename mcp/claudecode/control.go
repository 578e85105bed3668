package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// initialize does the control protocol's handshake. Claude Code answers it
// only once it has loaded the conversation, so an unknown --resume id
// shows here as an exit, before any turn.
func (p *Process) initialize(ctx context.Context) error {
	_, err := p.request(ctx, map[string]any{"subtype": "initialize"})
	return err
}

// Send writes one user turn on stdin. Claude Code queues a turn sent while
// another runs and starts it when that one ended.
func (p *Process) Send(ctx context.Context, text string) error {
	return p.write(ctx, map[string]any{
		"type":    "user",
		"message": map[string]any{"role": "user", "content": text},
	})
}

// Events returns the process's events in order; it is closed after the
// process exited, when Err already says why. Events wait in memory until
// read, so stdout is always read on (an Interrupt is acknowledged even
// while nobody reads); after Stop the unread ones are dropped.
func (p *Process) Events() <-chan Event { return p.events }

// Answer answers the PermissionRequest requestID with d. It fails when the
// request is unknown or already answered, or the process is gone.
func (p *Process) Answer(requestID string, d Decision) error {
	p.mu.Lock()
	input, ok := p.pending[requestID]
	delete(p.pending, requestID)
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("claudecode: no open permission request %q", requestID)
	}
	var behaviour map[string]any
	if d.Allow {
		in := d.UpdatedInput
		if len(in) == 0 {
			in = input
		}
		behaviour = map[string]any{"behavior": "allow", "updatedInput": in}
	} else {
		msg := d.Message
		if msg == "" {
			msg = "The person denied this call."
		}
		behaviour = map[string]any{"behavior": "deny", "message": msg}
		if d.Interrupt {
			behaviour["interrupt"] = true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
	defer cancel()
	return p.write(ctx, map[string]any{
		"type": "control_response",
		"response": map[string]any{
			"subtype": "success", "request_id": requestID, "response": behaviour,
		},
	})
}

// Interrupt asks Claude Code to end the running turn and waits for its
// acknowledgement; the turn then ends with a Result (TerminalReason
// "aborted_streaming" when it was streaming). Without a running turn it is
// acknowledged and does nothing.
func (p *Process) Interrupt(ctx context.Context) error {
	_, err := p.request(ctx, map[string]any{"subtype": "interrupt"})
	return err
}

// request sends a control_request and waits for its control_response.
func (p *Process) request(ctx context.Context, req map[string]any) (controlResponse, error) {
	id := fmt.Sprintf("parley-%d", p.nextID.Add(1))
	ch := make(chan controlResponse, 1)
	p.mu.Lock()
	p.waiting[id] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waiting, id)
		p.mu.Unlock()
	}()
	if err := p.write(ctx, map[string]any{"type": "control_request", "request_id": id, "request": req}); err != nil {
		return controlResponse{}, err
	}
	select {
	case r := <-ch:
		if r.Error != "" {
			return r, fmt.Errorf("claudecode: %s: %s", req["subtype"], r.Error)
		}
		return r, nil
	case <-p.done:
		return controlResponse{}, fmt.Errorf("claudecode: %s: %w", req["subtype"], p.exitErr())
	case <-ctx.Done():
		return controlResponse{}, fmt.Errorf("claudecode: %s: %w", req["subtype"], ctx.Err())
	}
}

// write puts one JSON line on stdin; ctx bounds a write that blocks
// because Claude Code does not read.
func (p *Process) write(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("claudecode: %w", err)
	}
	b = append(b, '\n')
	p.wmu.Lock()
	defer p.wmu.Unlock()
	select {
	case <-p.done:
		return fmt.Errorf("claudecode: write: %w", p.exitErr())
	case <-p.stopping:
		return errors.New("claudecode: write: the process is stopping")
	default:
	}
	if dl, ok := ctx.Deadline(); ok {
		p.stdin.SetWriteDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { p.stdin.SetWriteDeadline(time.Unix(1, 0)) })
	_, err = p.stdin.Write(b)
	stop()
	p.stdin.SetWriteDeadline(time.Time{})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("claudecode: write: %w", ctx.Err())
		}
		return fmt.Errorf("claudecode: write: %w", err)
	}
	return nil
}
