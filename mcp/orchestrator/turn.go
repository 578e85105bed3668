package orchestrator

import (
	"context"
	"strings"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/agent"
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
	plan         string   // the agent's plan, as people read it ("" for none)
	sent         string   // the text the output shows
	lastOut      time.Time
	tools        map[string]bool               // calls started, not ended
	calls        map[string]shownCall          // every call of the turn, as shown
	approvals    map[string]context.CancelFunc // permission requests waiting for people, by request id
	cancelled    bool                          // by the person
	interrupted  bool                          // an interrupt (or a denial that interrupts) was sent
	deniedAbort  bool                          // people denied a call and ended the turn
	timedOut     bool                          // the model gave nothing for APIDeadline
	lastRetry    string                        // the last API error the agent retried after
	flush        alarm
	deadline     alarm
	grace        alarm
	// deniedGoOn: people denied a call and let the turn go on (Deny and
	// continue); atDenial is the answer then, to tell whether the agent
	// said anything after.
	deniedGoOn bool
	atDenial   string
}

func newTurn(msgs []message, upTo core.MessageID) *turn {
	return &turn{msgs: msgs, upTo: upTo, tools: map[string]bool{}, calls: map[string]shownCall{},
		approvals: map[string]context.CancelFunc{}}
}

// shownCall is a tool call as ui.tool_call showed it.
type shownCall struct{ tool, cmd string }

func (t *turn) stopTimers() {
	t.flush.stop()
	t.deadline.stop()
	t.grace.stop()
	for id, cancel := range t.approvals {
		cancel()
		delete(t.approvals, id)
	}
}

// text is what the turn's output shows: the plan, if the agent made one,
// then the answer so far.
func (t *turn) text() string {
	return joinParts(t.plan, t.answer())
}

// joinParts joins the parts that are not blank, separated by a blank line.
func joinParts(parts ...string) string {
	var out []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "\n\n")
}

// answer is the turn's answer so far: its text blocks, separated by a
// blank line.
func (t *turn) answer() string {
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
func (w *worker) onEvent(ctx context.Context, ev agent.Event) {
	t := w.turn
	if t == nil {
		if pr, ok := ev.(agent.PermissionRequest); ok {
			w.answer(pr.RequestID, agent.Decision{Message: "No turn is running; the call was not run.", Interrupt: true})
		}
		return
	}
	switch e := ev.(type) {
	case agent.Init:
		if c := w.st.conv(w.agentName).Conversation; e.Conversation != "" && c != "" && e.Conversation != c {
			w.log.Warn("the agent reports another conversation than the one started", "conversation", e.Conversation)
		}
	case agent.TextDelta:
		*t.block(e.Block) += e.Text
		w.output(ctx)
	case agent.Text:
		*t.block(e.Block) = e.Text
		w.output(ctx)
	case agent.Thought:
		// The model is at work (the deadline starts again), but its
		// reasoning is not the answer.
	case agent.Plan:
		t.plan = planText(e.Entries)
		w.output(ctx)
	case agent.ToolUse:
		w.sendOutput(ctx, false)
		t.tools[e.ID] = true
		w.showCall(ctx, e.ID, e.Name, e.Show)
	case agent.ToolUpdate:
		if c, ok := t.calls[e.ID]; ok && e.Show != "" && e.Show != c.cmd {
			w.showCall(ctx, e.ID, c.tool, e.Show)
		}
	case agent.ToolResult:
		delete(t.tools, e.ToolUseID)
		args := map[string]any{"call_id": e.ToolUseID, "stdout": tail(e.Stdout, core.MaxToolOutput), "stderr": tail(e.Stderr, core.MaxToolOutput)}
		switch {
		case e.ExitCode != nil:
			args["exit_code"] = *e.ExitCode
		case e.IsError:
			args["exit_code"] = 1
		}
		w.post(ctx, "ui.tool_output", args)
	case agent.PermissionRequest:
		w.ask(ctx, e)
	case agent.ToolAllowed:
		// The driver allowed the call itself (an ACP agent's call of
		// parley's own tools): its ToolGroup says so.
		w.allowed(ctx, e.ToolUseID, "", "", e.By)
	case agent.PermissionCancel:
		// The agent withdrew the prompt (an interrupt came while it
		// waited): ending the ui.request_approval call withdraws the
		// question from the people too; nobody answers the agent.
		if cancel, ok := t.approvals[e.RequestID]; ok {
			cancel()
			delete(t.approvals, e.RequestID)
		}
	case agent.APIRetry:
		t.lastRetry = e.Error
		w.log.Debug("the model's API failed; the agent retries", "attempt", e.Attempt, "delay", e.Delay, "err", e.Error)
		return // no progress: the deadline keeps running
	case agent.Result:
		if e.Origin != "" {
			// A turn the agent ran on its own (a resumed Claude Code
			// conversation reports a background command the killed
			// process left unfinished) ends before the one Send started:
			// it is not the end of the person's turn.
			w.log.Debug("the agent ended a turn of its own", "origin", e.Origin)
			return
		}
		w.finish(ctx, e)
		return
	}
	w.armDeadline()
}

// showCall shows tool call id as ui.tool_call: tool, and cmd, what people
// should read of it. A call shown again with another cmd (the agent told
// more of it) shows that instead.
func (w *worker) showCall(ctx context.Context, id, tool, cmd string) {
	if tool == "" {
		tool = "tool"
	}
	w.turn.calls[id] = shownCall{tool: tool, cmd: cmd}
	w.post(ctx, "ui.tool_call", map[string]any{"call_id": id, "tool": tool, "cmd": cmd})
}

// planText is a plan as people read it: a checklist of its steps, each
// marked done, under way or to do.
func planText(entries []agent.PlanEntry) string {
	if len(entries) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("**Plan**")
	for _, e := range entries {
		mark := "⬜"
		switch e.Status {
		case "completed":
			mark = "✅"
		case "in_progress":
			mark = "▶️"
		}
		b.WriteString("\n- " + mark + " " + strings.Join(strings.Fields(e.Content), " "))
	}
	return b.String()
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

// endedOnDenial says the agent ended the turn on a denial people let it
// go on after.
func (w *worker) endedOnDenial() string {
	return "⏹ " + w.title() + " ended the turn when a tool call was denied."
}

// finish ends the turn on its Result: the whole answer as the final
// output, the watermark saved (the agent has the messages), then the turn
// yielded — the answer is shown once, in the output message, never posted
// again. Why the turn ended is said when it is not the agent answering:
// the person's /cancel, the deadline, a denial that ended it, an
// interrupt, the model's refusal or its limits, an error of the agent's —
// each as the agent's or the model's, none as parley's.
func (w *worker) finish(ctx context.Context, r agent.Result) {
	t := w.turn
	t.stopTimers()
	answer := t.answer()
	if answer == "" && !t.cancelled {
		answer = strings.TrimSpace(r.Text)
	}
	var note string
	switch {
	case t.cancelled:
		note = cancelled
	case t.timedOut:
		note = "⚠️ Stopped: the model did not answer in time."
	case t.deniedAbort || r.Stop == agent.StopDenied && t.interrupted:
		note = "⏹ Stopped: a tool call was denied."
	case r.Stop == agent.StopDenied:
		// The agent ended the turn on a denial nobody asked it to stop
		// for (Codex's only way to reject a call ends its turn).
		note = w.endedOnDenial()
	case t.deniedGoOn && answer == t.atDenial && (r.Stop == agent.StopEndTurn || r.Stop == agent.StopCancelled):
		// Deny and continue, and the agent said nothing more: it ended
		// the turn (OpenCode 1.18.33 ends it end_turn without asking
		// its model again). Said plainly, or the topic would end at the
		// answered question. A refusal, a limit or an error has its own
		// note, which says more.
		note = w.endedOnDenial()
	case r.Stop == agent.StopCancelled:
		note = cancelled
	case r.Stop == agent.StopRefusal:
		note = "⏹ The model refused to go on with this request."
	case r.Stop == agent.StopMaxTokens:
		note = "⏹ Stopped: the answer reached the model's output limit (max_tokens)."
	case r.Stop == agent.StopMaxTurns:
		note = "⏹ Stopped: the agent reached its limit of model requests for one turn."
	case r.Stop == agent.StopError && r.Text != "" && !strings.Contains(answer, r.Text):
		note = "⚠️ " + r.Text
	case r.Stop == agent.StopError && answer == "":
		why := "unknown"
		if len(r.Errors) > 0 {
			why = r.Errors[0]
		}
		note = "⚠️ The turn ended with an error (" + why + ")."
	}
	final := joinParts(t.plan, answer, note)
	if final == "" && w.shown {
		final = "(no text answer)"
	}
	if final != "" {
		t.sent, t.plan = "", ""
		t.blocks = []string{final}
		w.sendOutput(ctx, true)
	}
	w.st.Watermark = max(t.upTo, t.dropTo)
	c := w.st.conv(w.agentName)
	c.Started = true
	w.st.setConv(w.agentName, c)
	w.st.Told = ""
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
			w.answer(id, agent.Decision{Message: "The person stopped this turn; the call was not run.", Interrupt: true})
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
	w.finish(ctx, agent.Result{Stop: agent.StopCancelled, Errors: []string{"interrupted"}})
	if w.proc == proc {
		w.stopProc()
	}
}
