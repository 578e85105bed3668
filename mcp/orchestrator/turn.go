package orchestrator

import (
	"context"
	"strings"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/claudecode"
)

// outputEvery is the least time between two session.output calls of a
// turn's stream: the first text goes out at once, then the newest text at
// most this often.
const outputEvery = 100 * time.Millisecond

// maxOutput is the most of a turn's text one session.output shows: the
// Service's default limit (four times its 64 KiB message limit).
const maxOutput = 256 << 10

// interruptGrace is how long an interrupted turn may take to end before its
// process is stopped and the turn ended without it.
const interruptGrace = 15 * time.Second

// turn is one turn the agent works on.
type turn struct {
	msgs []message
	// upTo is the inbox position when the turn started; dropTo the
	// person's /cancel that dropped messages queued behind it. The larger
	// is the watermark once the turn ended.
	upTo, dropTo core.MessageID
	blocks       []string // the text blocks so far
	sent         string   // the text the output shows
	lastOut      time.Time
	tools        map[string]bool               // calls started, not ended
	approvals    map[string]context.CancelFunc // permission requests waiting for people, by request id
	cancelled    bool                          // by the person
	interrupted  bool                          // an interrupt (or a denial that interrupts) was sent
	timedOut     bool                          // the model gave nothing for APIDeadline
	lastRetry    string                        // the last API error Claude Code retried after
	flush        alarm
	deadline     alarm
	grace        alarm
}

func newTurn(msgs []message, upTo core.MessageID) *turn {
	return &turn{msgs: msgs, upTo: upTo, tools: map[string]bool{}, approvals: map[string]context.CancelFunc{}}
}

func (t *turn) stopTimers() {
	t.flush.stop()
	t.deadline.stop()
	t.grace.stop()
	for id, cancel := range t.approvals {
		cancel()
		delete(t.approvals, id)
	}
}

// text is the turn's answer so far: its text blocks, separated by a blank
// line.
func (t *turn) text() string {
	var parts []string
	for _, b := range t.blocks {
		if strings.TrimSpace(b) != "" {
			parts = append(parts, b)
		}
	}
	return strings.Join(parts, "\n\n")
}

func (t *turn) block(i int) *string {
	for len(t.blocks) <= i {
		t.blocks = append(t.blocks, "")
	}
	return &t.blocks[i]
}

// onEvent shows one thing the agent did.
func (w *worker) onEvent(ctx context.Context, ev claudecode.Event) {
	t := w.turn
	if t == nil {
		if pr, ok := ev.(claudecode.PermissionRequest); ok {
			w.answer(pr.RequestID, claudecode.Decision{Message: "No turn is running; the call was not run.", Interrupt: true})
		}
		return
	}
	switch e := ev.(type) {
	case claudecode.Init:
		if e.SessionID != "" && e.SessionID != w.st.Conversation {
			w.log.Warn("the agent reports another conversation than the one started", "conversation", e.SessionID)
		}
	case claudecode.TextDelta:
		*t.block(e.Block) += e.Text
		w.output(ctx)
	case claudecode.Text:
		*t.block(e.Block) = e.Text
		w.output(ctx)
	case claudecode.ToolUse:
		w.sendOutput(ctx, false)
		t.tools[e.ID] = true
		w.post(ctx, "ui.tool_call", map[string]any{"call_id": e.ID, "tool": e.Name, "cmd": toolCmd(e.Name, e.Input)})
	case claudecode.ToolResult:
		delete(t.tools, e.ToolUseID)
		args := map[string]any{"call_id": e.ToolUseID, "stdout": tail(e.Stdout, core.MaxToolOutput), "stderr": tail(e.Stderr, core.MaxToolOutput)}
		switch {
		case e.ExitCode != nil:
			args["exit_code"] = *e.ExitCode
		case e.IsError:
			args["exit_code"] = 1
		}
		w.post(ctx, "ui.tool_output", args)
	case claudecode.PermissionRequest:
		w.ask(ctx, e)
	case claudecode.PermissionCancel:
		// Claude Code withdrew the prompt (an interrupt came while it
		// waited): ending the ui.request_approval call withdraws the
		// question from the people too; nobody answers the agent.
		if cancel, ok := t.approvals[e.RequestID]; ok {
			cancel()
			delete(t.approvals, e.RequestID)
		}
	case claudecode.APIRetry:
		t.lastRetry = e.Error
		w.log.Debug("the model's API failed; Claude Code retries", "attempt", e.Attempt, "delay", e.Delay, "err", e.Error)
		return // no progress: the deadline keeps running
	case claudecode.Result:
		if e.Origin != "" {
			// A turn Claude Code ran on its own (a resumed conversation
			// reports a background command the killed process left
			// unfinished) ends before the one Send started: it is not
			// the end of the person's turn.
			w.log.Debug("the agent ended a turn of its own", "origin", e.Origin)
			return
		}
		w.finish(ctx, e)
		return
	}
	w.armDeadline()
}

// armDeadline (re)starts the API deadline while the turn waits for the
// model: not while a tool runs or people decide, nor after an interrupt.
func (w *worker) armDeadline() {
	t := w.turn
	if t == nil {
		return
	}
	if len(t.tools) == 0 && len(t.approvals) == 0 && !t.interrupted {
		t.deadline.set(w.o.opts.APIDeadline)
	} else {
		t.deadline.stop()
	}
}

// output shows the newest text, throttled to one call per outputEvery.
func (w *worker) output(ctx context.Context) {
	t := w.turn
	if t == nil || t.text() == t.sent {
		return
	}
	if wait := outputEvery - time.Since(t.lastOut); !t.lastOut.IsZero() && wait > 0 {
		if !t.flush.on {
			t.flush.set(wait)
		}
		return
	}
	w.sendOutput(ctx, false)
}

// sendOutput shows the turn's text now, if it changed.
func (w *worker) sendOutput(ctx context.Context, final bool) {
	t := w.turn
	text := t.text()
	t.flush.stop()
	if text == "" || text == t.sent {
		return
	}
	t.sent, t.lastOut = text, time.Now()
	if len(text) > maxOutput {
		// parley refuses larger output (by default); the end is what
		// people read last.
		text = "…\n" + tail(text, maxOutput-len("…\n"))
	}
	if _, ok := w.post(ctx, "session.output", map[string]any{"content": text, "final": final}); ok {
		w.shown = true
	}
}

// finish ends the turn on its Result: the whole answer as the final
// output, the watermark saved (the agent has the messages), then the turn
// yielded — the answer is shown once, in the output message, never posted
// again.
func (w *worker) finish(ctx context.Context, r claudecode.Result) {
	t := w.turn
	t.stopTimers()
	text := t.text()
	if text == "" && !t.cancelled {
		text = strings.TrimSpace(r.Text)
	}
	var note string
	switch {
	case t.cancelled:
		note = cancelled
	case t.timedOut:
		note = "⚠️ Stopped: the model did not answer in time."
	case r.TerminalReason == "aborted_tools":
		note = "⏹ Stopped: a tool call was denied."
	case r.IsError && r.Text != "" && !strings.Contains(text, r.Text):
		note = "⚠️ " + r.Text
	case r.IsError && text == "":
		note = "⚠️ The turn ended with an error (" + r.Subtype + ")."
	}
	final := text
	if note != "" {
		final = strings.TrimSpace(text + "\n\n" + note)
	}
	if final == "" && w.shown {
		final = "(no text answer)"
	}
	if final != "" {
		t.sent = ""
		t.blocks = []string{final}
		w.sendOutput(ctx, true)
	}
	w.st.Watermark = max(t.upTo, t.dropTo)
	w.st.Started, w.st.Told = true, ""
	if err := w.saveState(ctx, w.st); err != nil {
		// Unsaved, the messages would be handed again: better the turn
		// stays open (a scan completes it after a reconnection).
		w.log.Warn("saving the watermark failed; the turn is not yielded", "err", err)
		w.turn = nil
		return
	}
	w.turn = nil
	w.yield(ctx)
}

// interrupt stops the running turn: the permission requests waiting for
// people are denied with an interrupt (which ends the turn), otherwise the
// process is interrupted. If the turn has not ended after interruptGrace,
// the process is stopped.
func (w *worker) interrupt(ctx context.Context) {
	t := w.turn
	if t == nil || t.interrupted {
		return
	}
	t.interrupted = true
	t.deadline.stop()
	if len(t.approvals) > 0 {
		for id, cancel := range t.approvals {
			cancel()
			delete(t.approvals, id)
			w.answer(id, claudecode.Decision{Message: "The person stopped this turn; the call was not run.", Interrupt: true})
		}
	} else if err := w.proc.Interrupt(ctx); err != nil {
		w.log.Warn("interrupting the agent failed", "err", err)
	}
	t.grace.set(interruptGrace)
}

// deadlineHit: the model gave nothing for APIDeadline. People are told
// (once: the notice's key is the turn's) and the turn is interrupted.
func (w *worker) deadlineHit(ctx context.Context) {
	t := w.turn
	if t == nil || t.interrupted {
		return
	}
	t.timedOut = true
	cause := "no answer"
	if t.lastRetry != "" {
		cause = t.lastRetry
	}
	w.log.Warn("the model did not answer in time; interrupting the turn", "deadline", w.o.opts.APIDeadline, "err", cause)
	text := "⚠️ The model's API gave no answer for " + w.o.opts.APIDeadline.String() + " (" + cause + "). " +
		"The turn was stopped; send a message to try again."
	w.post(ctx, "chat.assistant.post", map[string]any{"content": text,
		"idempotency_key": "orchestrator/deadline/" + w.id + "/" + string(t.upTo)})
	w.interrupt(ctx)
}

// graceOver: an interrupted turn did not end. Its process is stopped and
// the turn ended as aborted.
func (w *worker) graceOver(ctx context.Context) {
	if w.turn == nil {
		return
	}
	w.log.Warn("the agent did not end an interrupted turn; stopping it", "after", interruptGrace)
	proc := w.proc
	w.finish(ctx, claudecode.Result{Subtype: "interrupted", IsError: true, TerminalReason: "aborted_streaming"})
	if w.proc == proc {
		w.stopProc()
	}
}
