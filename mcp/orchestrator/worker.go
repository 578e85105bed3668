package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/agent"
)

// worker drives one session: it reads the session's inbox, starts its
// agent, hands it turns and shows what it does. One goroutine owns all of
// it; notifications, slot grants, approvals and timers reach it through
// channels. A worker with no process and nothing to do retires, and the
// next notification makes a new one, which reads the state again.
type worker struct {
	o   *Orchestrator
	id  string
	log *slog.Logger

	wake    chan struct{}
	granted chan struct{}
	evict   chan struct{}
	decided chan decision

	repair bool // complete an unfinished turn when nothing is pending (Orchestrator.scan)
	// held is the holding of the session's lease the worker acts under
	// (lease.go), nil with one instance: its state is saved fenced by it.
	held   *core.Held
	loaded bool
	st     state
	// read is the inbox position: the last message read. Every message
	// up to it is in pending, in the running turn, or handled.
	read    core.MessageID
	pending []message
	// failedAt is the newest pending message of a batch the agent failed
	// on: it is retried when a newer message arrives.
	failedAt core.MessageID
	closed   bool
	// agentName is the agent the session runs with ("": the default),
	// agent that agent, nil when it is not configured (any more).
	agentName string
	agent     *Agent
	// switchTo is the agent a person's /agent switched to, applied once
	// no turn runs.
	switchTo *string

	proc       agent.Conversation
	events     <-chan agent.Event
	turn       *turn
	slot       slotState
	markedIdle bool
	idle       alarm
	// toldWaiting: the output says the session waits for a free agent.
	toldWaiting bool
	// shown: the output of the session's current turn shows something.
	shown bool
}

type slotState int

const (
	slotNone slotState = iota
	slotWaiting
	slotHeld
)

func newWorker(o *Orchestrator, id string, repair bool) *worker {
	return &worker{o: o, id: id, log: o.log.With("session", id), repair: repair,
		wake: make(chan struct{}, 1), granted: make(chan struct{}, 1), evict: make(chan struct{}, 1),
		decided: make(chan decision)}
}

// run holds the session's lease (lease.go), then drives the session under
// it until the worker retires or ctx ends; a lost lease stops the process
// and hands the session to a new worker, which waits for the lease again.
func (w *worker) run(ctx context.Context) {
	acting, release, err := w.hold(ctx)
	if err != nil {
		w.o.retire(w, true)
		return
	}
	w.loop(acting)
	release()
	if lostLease(ctx, acting) {
		w.log.Warn("the session's lease was lost; its agent is stopped until this instance holds it again",
			"err", context.Cause(acting))
		w.o.retire(w, true)
		w.o.wake(w.id, false)
	}
}

// loop drives the session until the worker retires or ctx ends, and then
// stops the process.
func (w *worker) loop(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer w.shutdown()
	for {
		if w.closed {
			w.o.retire(w, true)
			return
		}
		w.advance(ctx)
		w.noteIdle()
		if w.retirable() && w.o.retire(w, false) {
			return
		}
		var t *turn
		if w.turn != nil {
			t = w.turn
		} else {
			t = &turn{}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
			if err := w.readInbox(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("reading the session's inbox failed", "err", err)
				// Not loaded: nothing to keep, the next wake makes a new
				// worker. Woken meanwhile, it stays (retire refuses) and
				// must read again: returning would leave it in the map
				// with nobody reading its wakes, the session orphaned.
				if !w.loaded && w.o.retire(w, false) {
					return
				}
			}
		case <-w.granted:
			if w.slot == slotWaiting {
				w.slot = slotHeld
			}
		case ev, ok := <-w.events:
			if !ok {
				w.exited(ctx)
				break
			}
			w.onEvent(ctx, ev)
		case d := <-w.decided:
			w.onDecision(ctx, d)
		case <-t.flush.C():
			t.flush.fired()
			w.output(ctx)
		case <-t.deadline.C():
			t.deadline.fired()
			w.deadlineHit(ctx)
		case <-t.grace.C():
			t.grace.fired()
			w.graceOver(ctx)
		case <-w.idle.C():
			w.idle.fired()
			if w.isIdle() {
				w.log.Debug("stopping an idle agent", "after", w.o.opts.IdleStop)
				w.stopProc()
			}
		case <-w.evict:
			if w.isIdle() {
				w.log.Debug("stopping an idle agent to make room for another session")
				w.stopProc()
			} else if w.slot == slotHeld {
				w.o.slots.declined(w)
			}
		}
	}
}

// retirable: nothing to do without a new message.
func (w *worker) retirable() bool {
	return w.proc == nil && w.turn == nil && w.slot != slotWaiting &&
		(len(w.pending) == 0 || w.failedAt == w.pending[len(w.pending)-1].ID)
}

func (w *worker) isIdle() bool {
	return w.proc != nil && w.turn == nil && len(w.pending) == 0
}

// noteIdle tells the slots when the process turns idle or busy, and arms
// the idle stop.
func (w *worker) noteIdle() {
	idle := w.isIdle()
	if idle == w.markedIdle {
		return
	}
	w.markedIdle = idle
	if idle {
		w.idle.set(w.o.opts.IdleStop)
	} else {
		w.idle.stop()
	}
	w.o.slots.idle(w, idle)
}

// shutdown stops the process (Run is returning, or the session closed).
func (w *worker) shutdown() {
	if w.turn != nil {
		w.turn.stopTimers()
		w.turn = nil
	}
	w.stopProc()
	w.idle.stop()
}

// releaseSlot gives the slot (or the place in the queue) back; a grant
// sent before is dropped.
func (w *worker) releaseSlot() {
	if w.slot != slotNone {
		w.o.slots.release(w)
		w.slot = slotNone
	}
	select {
	case <-w.granted:
	default:
	}
}

// stopProc stops the process and gives its slot back.
func (w *worker) stopProc() {
	if w.proc != nil {
		// Its events are not wanted any more; drained, so that the
		// process's reader never waits for us while it is stopped.
		if events := w.events; events != nil {
			go func() {
				for range events {
				}
			}()
		}
		if err := w.proc.Stop(); err != nil {
			w.log.Debug("stopping the agent", "err", err)
		}
		w.proc, w.events = nil, nil
	}
	w.releaseSlot()
	w.markedIdle = false
	w.idle.stop()
}

// load reads the session's state, or makes it — the no-state start point
// and the session's agent — and saves it before anything is started.
func (w *worker) load(ctx context.Context) error {
	select {
	case w.o.loads <- struct{}{}:
		defer func() { <-w.o.loads }()
	case <-ctx.Done():
		return ctx.Err()
	}
	st, ok, err := w.o.loadState(ctx, w.id)
	if err != nil {
		return err
	}
	if !ok {
		if st.Watermark, err = w.o.startPoint(ctx, w.id); err != nil {
			return err
		}
		if st.Agent, err = w.o.sessionAgent(ctx, w.id); err != nil {
			return err
		}
		if err := w.saveState(ctx, st); err != nil {
			return err
		}
	}
	w.st, w.read, w.loaded = st, st.Watermark, true
	w.useAgent(st.Agent)
	return nil
}

// useAgent makes the agent named name the session's.
func (w *worker) useAgent(name string) {
	w.agentName, w.agent = name, nil
	if a, ok := w.o.opts.Agents[name]; ok {
		w.agent = &a
	}
}

// readInbox reads what arrived after w.read.
func (w *worker) readInbox(ctx context.Context) error {
	fresh := !w.loaded
	if fresh {
		if err := w.load(ctx); err != nil {
			return err
		}
	}
	const page = 100
	for !w.closed {
		var body struct {
			LastID   string    `json:"last_id"`
			Messages []message `json:"messages"`
		}
		if err := w.o.call(ctx, "chat_read_since", map[string]any{"after_id": w.read, "session_id": w.id, "limit": page}, &body); err != nil {
			return err
		}
		for _, m := range body.Messages {
			w.take(ctx, m)
			w.read = m.ID
			if w.closed {
				return nil
			}
		}
		if len(body.Messages) < page {
			break
		}
	}
	if fresh && w.repair && w.turn == nil && len(w.pending) == 0 {
		// The previous run ended between a turn's Result and its yield:
		// complete it, so that the person is told.
		w.yield(ctx)
	}
	w.repair = false
	return nil
}

// take files one message read from the inbox.
func (w *worker) take(ctx context.Context, m message) {
	switch classify(m) {
	case kindTurn:
		w.pending = append(w.pending, m)
	case kindCancel:
		w.cancel(ctx, m.ID)
	case kindClose:
		w.log.Info("the session was closed; stopping its agent")
		w.closed = true
		w.shutdown()
	case kindSwitch:
		name := switchedTo(m)
		w.switchTo = &name
	}
}

// applySwitch makes the agent a person switched to the session's, once no
// turn runs: the running conversation is stopped (it is kept, and resumed
// should the session switch back), and the messages not yet handed go to
// the new agent, which starts its own conversation. The switch is saved
// without moving the watermark, so that a switch read again is one
// already made.
func (w *worker) applySwitch(ctx context.Context) {
	name := *w.switchTo
	w.switchTo = nil
	if name == w.agentName {
		return
	}
	w.log.Info("the session switched agents", "from", w.agentName, "to", name)
	w.stopProc()
	w.failedAt = ""
	w.st.Agent = name
	w.useAgent(name)
	if err := w.saveState(ctx, w.st); err != nil {
		w.log.Warn("saving the state failed", "err", err)
	}
}

// cancel is the person's /cancel: it interrupts the running turn and drops
// what was queued before it (message id covers them).
func (w *worker) cancel(ctx context.Context, id core.MessageID) {
	dropped := len(w.pending) > 0
	w.pending, w.failedAt = nil, ""
	if t := w.turn; t != nil {
		t.cancelled, t.dropTo = true, id
		w.interrupt(ctx)
		return
	}
	if !dropped {
		return
	}
	if w.slot == slotWaiting {
		w.releaseSlot()
	}
	w.st.Watermark = id
	if err := w.saveState(ctx, w.st); err != nil {
		w.log.Warn("saving the state failed", "err", err)
	}
	if w.shown {
		w.post(ctx, "session.output", map[string]any{"content": cancelled, "final": true})
		w.yield(ctx)
	}
	w.toldWaiting = false
}

// advance starts the next turn when there is one and nothing runs: it
// takes a slot, starts the process if it is not running, and hands the
// pending messages.
func (w *worker) advance(ctx context.Context) {
	if w.closed || w.turn != nil || ctx.Err() != nil {
		return
	}
	if w.switchTo != nil {
		w.applySwitch(ctx)
	}
	if len(w.pending) == 0 {
		return
	}
	if w.failedAt == w.pending[len(w.pending)-1].ID {
		return
	}
	if w.proc == nil {
		if w.slot != slotHeld {
			if !w.o.slots.acquire(w) {
				w.slot = slotWaiting
				if !w.toldWaiting {
					w.toldWaiting = true
					w.post(ctx, "session.output", map[string]any{"content": fmt.Sprintf(waitingText, w.o.opts.MaxRunning)})
					w.shown = true
				}
				return
			}
			w.slot = slotHeld
		}
		if !w.start(ctx) {
			return
		}
	}
	msgs := w.pending
	w.pending = nil
	t := newTurn(msgs, w.read)
	if err := w.proc.Send(ctx, prompt(msgs)); err != nil {
		w.pending = msgs
		if ctx.Err() == nil {
			w.failed(ctx, "stopped", err)
		}
		return
	}
	w.turn = t
	if w.toldWaiting {
		// The output said the session waits: it does no longer.
		w.toldWaiting = false
		w.post(ctx, "session.output", map[string]any{"content": startedText})
	}
	w.armDeadline()
}

// start starts the session's agent's conversation (conversation.go).
func (w *worker) start(ctx context.Context) bool {
	p, err := w.startConversation(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.failed(ctx, "could not start", err)
		}
		return false
	}
	w.proc, w.events = p, p.Events()
	return true
}

// exited: the process ended by itself.
func (w *worker) exited(ctx context.Context) {
	p := w.proc
	<-p.Done()
	err := p.Err()
	w.proc, w.events = nil, nil
	if w.turn == nil {
		w.log.Info("the agent exited between turns", "err", err)
		w.stopProc()
		return
	}
	if err == nil {
		err = errors.New("it exited in the middle of a turn")
	}
	t := w.turn
	t.stopTimers()
	w.turn = nil
	w.pending = append(t.msgs, w.pending...)
	w.failed(ctx, "stopped", err)
}

// failed tells the person, once per batch of messages, that the agent could
// not start or stopped, with the cause, and ends the turn; the messages stay
// pending and are tried again with the next message.
func (w *worker) failed(ctx context.Context, what string, err error) {
	w.stopProc()
	if len(w.pending) == 0 {
		return
	}
	last := w.pending[len(w.pending)-1].ID
	w.failedAt = last
	if w.st.Told == last {
		return
	}
	w.log.Warn("the agent failed", "what", what, "err", err)
	text := failureNotice(w.title(), what, err)
	if _, ok := w.post(ctx, "chat.assistant.post", map[string]any{"content": text,
		"idempotency_key": "orchestrator/failed/" + w.id + "/" + string(last)}); !ok {
		return
	}
	w.st.Told = last
	if err := w.saveState(ctx, w.st); err != nil {
		w.log.Warn("saving the state failed", "err", err)
	}
	w.yield(ctx)
}

// title is the session's agent as people read it.
func (w *worker) title() string {
	if w.agent != nil && w.agent.Title != "" {
		return w.agent.Title
	}
	return "The agent"
}

// post calls a tool that shows something, logging a failure; ok is false
// when it failed.
func (w *worker) post(ctx context.Context, tool string, args map[string]any) (map[string]any, bool) {
	args["session_id"] = w.id
	var res map[string]any
	if err := w.o.call(ctx, tool, args, &res); err != nil {
		if ctx.Err() == nil {
			w.log.Warn("a call to parley failed", "tool", tool, "err", err)
		}
		return nil, false
	}
	return res, true
}

// yield ends the turn for people.
func (w *worker) yield(ctx context.Context) {
	if _, ok := w.post(ctx, "loop.yield_turn", map[string]any{}); ok {
		w.shown, w.toldWaiting = false, false
	}
}

// Words for people.
const (
	waitingText = "⏳ All %d agents are busy with other sessions; yours starts as soon as one is free."
	startedText = "⏳ An agent is free: working on it…"
	cancelled   = "⏹ Cancelled."
)

// alarm is a timer a select can wait on: C is nil while it is not set.
type alarm struct {
	t  *time.Timer
	on bool
}

func (a *alarm) set(d time.Duration) {
	if a.t == nil {
		a.t = time.NewTimer(d)
	} else {
		a.t.Reset(d)
	}
	a.on = true
}

func (a *alarm) stop() {
	if a.t != nil {
		a.t.Stop()
	}
	a.on = false
}

func (a *alarm) fired() { a.on = false }

func (a *alarm) C() <-chan time.Time {
	if a == nil || !a.on {
		return nil
	}
	return a.t.C
}

// failureNotice is what people read when the agent (title) failed: the
// cause and the fix when the driver knows them (an agent.Problem), the
// error otherwise, and that their message is kept.
func failureNotice(title, what string, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "⚠️ %s %s: ", title, what)
	if p, ok := errors.AsType[*agent.Problem](err); ok {
		b.WriteString(p.Cause)
		if p.Fix != "" {
			b.WriteString(".\nTo fix it: " + p.Fix)
		}
	} else {
		b.WriteString(err.Error())
	}
	b.WriteString(".\n\nYour message is kept: send another message to try again.")
	return b.String()
}
