package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/parley-chat/parley/core"
)

// Sent describes a message the Dispatcher put on a platform, for hooks such
// as the cleanup ledger.
type Sent struct {
	Session  core.SessionID
	Ref      core.MessageRef
	Kind     core.MessageKind
	Lifetime core.Lifetime
	// Seq is the event that caused the message, so a rule that fired
	// while the message was still on its way can be applied to it late.
	Seq uint64
	// Question is the id of the question a KindQuestion message shows.
	Question string
}

// DispatcherOptions configure a Dispatcher.
type DispatcherOptions struct {
	// Files holds the copies of the files agents send, which documents
	// are read from (core.FileStore); nil refuses every attachment. A
	// final output too long for messages goes as a document made from
	// its journaled text, without it.
	Files core.FileStore
	// TailMarker starts the live view of an output too long to show whole.
	TailMarker string
	// OnSent is called after every message the dispatcher sent.
	OnSent func(ctx context.Context, s Sent)
	// OnOutputShown is called when a platform shows a new output text,
	// with the time since the agent produced it (the edit lag).
	OnOutputShown func(adapter core.AdapterName, lag time.Duration)
	// OnConfirmed is called after a journaled operation's confirmation is
	// durable, with the time since the platform answered: the window in
	// which a crash would repeat the operation.
	OnConfirmed func(adapter core.AdapterName, window time.Duration)
	// Claims share the journal's delivery with other instances of the
	// store (claims.go); the zero value delivers every journaled event.
	Claims ClaimOptions
	Logger *slog.Logger
}

// Dispatcher turns stored events into platform operations: it asks the
// Router for the targets of each event and enqueues the operations on the
// Outbox.
//
// Durable delivery: what cannot be derived from state again (see
// Event.Journaled) is journaled by the store in the event's own
// transaction. The dispatcher gives each operation of a journaled event a
// stable key (adapter and part, such as "telegram/msg/0"), confirms each one
// in the store once the platform accepted it (or refused it for good), and
// the last confirmation takes the event out of the journal. Replay, run at
// start-up, dispatches every journaled event again, skipping the operations
// already confirmed. So a send is repeated only when parley dies between
// the platform's answer and the confirmation's commit — one store write, a
// fraction of a millisecond (OnConfirmed measures it) — and not at all on
// platforms that take OutMessage.Key as an idempotency key. This design
// (rather than a dispatch cursor over the event log) keeps the journal
// independent of the log's trimming and of the store's engine: any store
// that writes the journal row with the event can serve it. Instances that
// share a store claim each journaled event before sending it, so that one
// of them delivers it, and take over what a dead one held once its claim
// expired (DispatcherOptions.Claims, claims.go).
//
// The Dispatcher decides, event by event, what each target must show, and
// leaves the how to small collaborators, each owning its own state and
// lock: the journal tracks journaled operations (journal.go), bindings
// creates and looks up where a session lives on an adapter (binding.go),
// the sender puts new messages on platforms (send.go), output keeps one
// message per turn and binding edited in place (output.go), progress the
// turn's tool calls (progress.go), questions takes a withdrawn question's
// buttons away (questions.go), typing runs the typing indicators
// (typing.go) and notified remembers which turns already notified the
// person (notified.go).
type Dispatcher struct {
	store  core.Store
	router *Router
	outbox *Outbox
	opts   DispatcherOptions
	log    *slog.Logger
	seen   atomic.Uint64
	// replayed is Replay's upTo: the events before Run's first.
	replayed atomic.Uint64

	journal   *journal
	notified  *notified
	typing    *typing
	bindings  *bindings
	sender    *sender
	questions *questions
	progress  *progress
	output    *output
}

// NewDispatcher returns a dispatcher.
func NewDispatcher(store core.Store, router *Router, outbox *Outbox, opts DispatcherOptions) *Dispatcher {
	if opts.TailMarker == "" {
		opts.TailMarker = "…"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{store: store, router: router, outbox: outbox, opts: opts, log: opts.Logger}
	d.journal = newJournal(store, d.log, opts.OnConfirmed)
	d.journal.claims = newClaims(opts.Claims, d.log)
	d.notified = newNotified()
	d.typing = newTyping(outbox)
	d.bindings = &bindings{store: store, outbox: outbox, typing: d.typing, log: d.log}
	d.sender = &sender{outbox: outbox, bindings: d.bindings, journal: d.journal, log: d.log, sent: d.sent, files: opts.Files}
	d.questions = newQuestions(store, router, outbox, d.journal, d.log)
	d.progress = &progress{store: store, outbox: outbox, bindings: d.bindings, sent: d.sent}
	d.output = &output{store: store, outbox: outbox, bindings: d.bindings, journal: d.journal, sender: d.sender,
		log: d.log, opts: opts, sent: d.sent}
	return d
}

// Run dispatches events from sub until ctx ends, and then the events
// already buffered, so that a graceful stop still delivers them.
func (d *Dispatcher) Run(ctx context.Context, sub *core.Subscription) {
	core.Consume(ctx, sub, func(ctx context.Context, e core.Event) {
		if err := d.Dispatch(ctx, e); err != nil {
			d.log.Error("dispatch", "kind", e.Kind, "session", e.Session, "err", err)
		}
		if e.Seq > 0 {
			d.seen.Store(e.Seq)
		}
	})
}

// Seen is the Seq of the last logged event Run dispatched.
func (d *Dispatcher) Seen() uint64 { return d.seen.Load() }

// Delivering is the number of journaled events whose operations are not
// all confirmed yet.
func (d *Dispatcher) Delivering() int { return d.journal.count() }

// DeliveringBy is, for each adapter, the number of journaled events with
// an operation of that adapter not confirmed yet: where the backlog is.
func (d *Dispatcher) DeliveringBy() map[core.AdapterName]int { return d.journal.countBy() }

// replayPage is how many journaled events Replay reads at a time.
const replayPage = 512

// Replay dispatches again every journaled event with Seq <= upTo whose
// delivery did not finish (the daemon stopped or died first), oldest first,
// skipping the operations already confirmed. Events after upTo arrive
// through Run. It returns how many events it replayed. With claims it
// replays only the events it could claim: those another instance is
// delivering stay with it.
func (d *Dispatcher) Replay(ctx context.Context, upTo uint64) (int, error) {
	d.replayed.Store(upTo)
	var after uint64
	n := 0
	for {
		var page []core.Delivery
		var err error
		if c := d.journal.claims; c != nil {
			page, err = c.claimPage(ctx, after, upTo, replayPage)
		} else {
			page, err = d.store.Deliveries(ctx, after, replayPage)
		}
		if err != nil {
			return n, fmt.Errorf("dispatch: replay: %w", err)
		}
		for _, dl := range page {
			if dl.Event.Seq > upTo {
				return n, nil
			}
			if err := d.dispatch(ctx, dl.Event, dl.Done, true); err != nil {
				d.log.Warn("replay", "seq", dl.Event.Seq, "session", dl.Event.Session, "err", err)
				continue
			}
			n++
		}
		if len(page) < replayPage {
			return n, nil
		}
		after = page[len(page)-1].Event.Seq
	}
}

// Dispatch enqueues the platform operations for one event.
func (d *Dispatcher) Dispatch(ctx context.Context, e core.Event) error {
	return d.dispatch(ctx, e, nil, false)
}

// dispatch enqueues e's operations but those in done. A journaled event
// not claimed yet is claimed first, and left alone when another instance
// has it (claims.go).
func (d *Dispatcher) dispatch(ctx context.Context, e core.Event, done []string, claimed bool) error {
	if !claimed && e.Seq > 0 && e.Journaled() && !d.journal.claims.claim(ctx, e.Seq) {
		return nil
	}
	if e.Session == "" {
		if e.Place != nil && e.Kind == core.EventNotice && e.Message != nil {
			d.dispatchToPlace(ctx, e, done, claimed)
		}
		return nil
	}
	s, err := d.store.Session(ctx, e.Session)
	if err != nil {
		if e.Seq > 0 && e.Journaled() {
			// The session is gone for good: nothing will deliver it.
			_ = d.store.ConfirmDelivery(ctx, e.Seq, "", true)
		}
		return fmt.Errorf("dispatch: %w", err)
	}
	j := d.track(ctx, e, done, claimed)
	if e.Seq > 0 && e.Journaled() && j == nil {
		return nil // already being delivered, or delivered
	}
	if e.Kind == core.EventQuestionClosed {
		// To wherever the question is shown, whatever the routing.
		d.questions.withdraw(s, e, j)
		if here, remote := d.shownAt(e, j); len(remote) > 0 {
			d.journal.handOff(ctx, j, here, remote) // handoff.go
			return nil
		}
		d.journal.seal(ctx, j)
		return nil
	}
	here, remote := d.route(s, e, j)
	for _, name := range here {
		a, _ := d.router.Adapter(name)
		if followsEvents(a) {
			continue // routed there, and it shows the event itself
		}
		d.dispatchTo(s, a, e, j)
	}
	if len(remote) > 0 {
		d.journal.handOff(ctx, j, here, remote) // handoff.go
		return nil
	}
	d.journal.seal(ctx, j)
	return nil
}

// track starts tracking the journaled event e (journal.track). An event
// claimed as it was committed (not claimed: dispatched from the bus) by an
// instance whose claims are shared may have been served in part already,
// by this instance's scan or another's, and handed over: its confirmed
// keys are read from the store (journal.load) rather than taken to be
// none. Nil, besides for an event that is not journaled, when the event is
// being delivered here already, is no longer journaled, or its keys could
// not be read (its claim is then released, for a scan to take it).
func (d *Dispatcher) track(ctx context.Context, e core.Event, done []string, claimed bool) *delivery {
	j := d.journal.track(e, done)
	c := d.journal.claims
	if j == nil || claimed || !c.shared() {
		return j
	}
	ok, err := d.journal.load(ctx, j)
	if err == nil && ok {
		return j
	}
	d.journal.drop(j)
	if err != nil {
		d.log.Warn("dispatch: left to the scan", "seq", e.Seq, "err", err)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		if err := c.opts.Store.ReleaseClaims(rctx, c.opts.Instance, []uint64{e.Seq}); err != nil {
			d.log.Warn("journal: release an event left to the scan; it is taken over when its claim expires", "seq", e.Seq, "err", err)
		}
	}
	return nil
}

// dispatchToPlace sends a notice addressed to a place with no session on
// its origin adapter, journaled like any other notice. It is not recorded
// in the cleanup ledger, whose rules belong to sessions.
func (d *Dispatcher) dispatchToPlace(ctx context.Context, e core.Event, done []string, claimed bool) {
	j := d.track(ctx, e, done, claimed)
	a, ok := d.router.Adapter(e.Origin.Adapter())
	if !ok && j != nil && d.journal.claims.shared() && e.Origin.IsUI() {
		// Another instance runs the place's adapter (handoff.go).
		d.journal.handOff(ctx, j, nil, []core.AdapterName{e.Origin.Adapter()})
		return
	}
	defer d.journal.seal(ctx, j)
	if !ok || followsEvents(a) || (e.Seq > 0 && j == nil) {
		return
	}
	key := opKey(a.Name(), "notice", 0)
	if !d.journal.add(j, key) {
		return
	}
	m := core.OutMessage{Kind: core.KindNotice, Text: e.Message.Content, Silent: true, Key: sendKey(e.Seq, key)}
	place := *e.Place
	d.outbox.Enqueue(core.Op{Kind: core.OpSend, Adapter: a.Name(), Place: place,
		Run: d.journal.guard(j, func(ctx context.Context, _ core.Place) error {
			_, err := a.Send(ctx, place, m)
			return err
		}),
		Done: func(err error) { d.journal.confirm(j, a.Name(), key, err) }})
}

// followsEvents reports whether a shows sessions itself and wants no
// platform operations (Capabilities.FollowsEvents).
func followsEvents(a core.Adapter) bool { return a.Capabilities().FollowsEvents }

// IsClosed reports whether err ended an operation only because the outbox
// stopped: the operation is still wanted.
func IsClosed(err error) bool { return err != nil && errors.Is(err, core.ErrOutboxClosed) }

// queuePlace is where an op for s on a is paced: its binding, or where
// the binding will be made.
func queuePlace(s core.Session, a core.Adapter) core.Place {
	if b, ok := s.Bindings[a.Name()]; ok {
		return b.Place
	}
	if bp, ok := a.(core.BindPlacer); ok {
		return bp.BindPlace()
	}
	return core.Place{}
}

func (d *Dispatcher) dispatchTo(s core.Session, a core.Adapter, e core.Event, j *delivery) {
	name := a.Name()
	switch e.Kind {
	case core.EventOutput:
		d.output.enqueue(s, a, e, j)
	case core.EventTurnComplete:
		if d.notified.complete(s.ID, name, e.Turn) {
			return
		}
		// Queued at edit priority, so it lands after the turn's final
		// output edit (enqueued before it) rather than overtaking it: the
		// person is notified when the final text is there to read.
		d.sender.enqueueSend(s, a, e, j, opKey(name, "done", 0), core.OutMessage{Kind: core.KindTurnDone, Text: textDone}, core.LifetimeNextInput, true, core.OpEdit)
	case core.EventAssistant:
		d.notified.mark(s, name)
		text := e.Message.Content
		fs, canFile := a.(core.FileSender)
		if !canFile {
			for _, f := range e.Message.Attachments {
				text += textAttachment(f.Name)
			}
		}
		for i, chunk := range chunks(a, text) {
			d.sender.send(s, a, e, j, opKey(name, "msg", i), core.OutMessage{Kind: core.KindAssistant, Text: chunk}, core.LifetimeManual, true)
		}
		if canFile {
			for i, f := range e.Message.Attachments {
				d.sender.sendFile(s, a, fs, e, j, opKey(name, "file", i), f, "", d.sender.copyOf(f))
			}
		}
	case core.EventHumanMessage, core.EventQueued, core.EventAnswer:
		text := e.Message.Content
		if who := e.Message.Actor.Name; who != "" {
			text = textFrom(who, text)
		}
		for i, chunk := range chunks(a, text) {
			d.sender.send(s, a, e, j, opKey(name, "human", i), core.OutMessage{Kind: core.KindHuman, Text: chunk, Silent: true}, core.LifetimeManual, false)
		}
	case core.EventNotice, core.EventCancel:
		text := textCancelRequested
		if e.Message != nil {
			text = e.Message.Content
		}
		lt := e.Lifetime
		if lt == "" {
			lt = core.LifetimeNextNotice
		}
		d.sender.send(s, a, e, j, opKey(name, "notice", 0), core.OutMessage{Kind: core.KindNotice, Text: text, Silent: true}, lt, false)
	case core.EventQuestion:
		m := core.OutMessage{Kind: core.KindQuestion, Text: e.Message.Content}
		if a.Capabilities().Buttons {
			for i, opt := range e.Options {
				m.Buttons = append(m.Buttons, core.Button{Label: opt, Data: ButtonData(e.QuestionID, i+1)})
			}
		} else {
			var b strings.Builder
			b.WriteString(m.Text)
			for i, opt := range e.Options {
				fmt.Fprintf(&b, "\n%d. %s", i+1, opt)
			}
			b.WriteString(textChooseByNumber)
			m.Text = b.String()
		}
		d.notified.mark(s, name)
		d.sender.send(s, a, e, j, opKey(name, "question", 0), m, core.LifetimeManual, true)
	case core.EventToolCall, core.EventToolOutput, core.EventToolApproval:
		d.progress.enqueue(s, a, e)
	case core.EventSessionCreated, core.EventSessionUpdated:
		// A person's input began a turn: its tidy-up waits behind its
		// first message (outboxexpect.go), for at most expectFor. Events
		// are dispatched in order, so the expectation is set before any
		// answer to that input can be posted; a turn the agent began by
		// itself (its output made the session working) expects nothing,
		// its message may be out already.
		if e.Status == core.StatusWorking && e.Origin.IsUI() {
			d.outbox.Expect(a.Name(), queuePlace(s, a), "turn "+strconv.FormatUint(s.Turn, 10), time.Now().Add(expectFor))
		} else {
			d.outbox.Expect(a.Name(), queuePlace(s, a), "", time.Time{})
		}
		d.typing.set(s, a, e.Status == core.StatusWorking)
		d.bindings.enqueueStatus(s, a)
	}
}

// sent is called after every message the dispatcher sent.
func (d *Dispatcher) sent(ctx context.Context, s Sent) {
	if s.Kind == core.KindQuestion && s.Question != "" {
		d.questions.shown(ctx, s)
	}
	if d.opts.OnSent != nil {
		d.opts.OnSent(ctx, s)
	}
}

// StopTyping ends every typing indicator (at shutdown).
func (d *Dispatcher) StopTyping() { d.typing.stopAll() }

// EnqueueDelete deletes ref through its owning adapter's outbox lane and
// reports the outcome to done: nil also when the message was already gone,
// and at once for an adapter that follows events (core put nothing on a
// platform there: the row predates the declaration); an error wrapping
// ErrUnsupported when the adapter cannot delete, a permanent error when
// the platform refused for good, and one wrapping ErrOutboxClosed when
// parley stopped first.
func (d *Dispatcher) EnqueueDelete(ref core.MessageRef, done func(error)) {
	a, ok := d.router.Adapter(ref.Adapter)
	if ok && followsEvents(a) {
		done(nil)
		return
	}
	del, can := a.(core.Deleter)
	if !ok || !can {
		done(fmt.Errorf("delete on %s: %w", ref.Adapter, core.ErrUnsupported))
		return
	}
	d.outbox.Enqueue(core.Op{Kind: core.OpDelete, Adapter: ref.Adapter, Place: ref.Place,
		Key: "del\x00" + string(ref.Adapter) + "\x00" + ref.Place.Chat + "\x00" + ref.Place.Thread + "\x00" + ref.ID,
		Run: func(ctx context.Context, _ core.Place) error {
			err := del.Delete(ctx, ref)
			if errors.Is(err, core.ErrMessageGone) {
				return nil
			}
			return err
		},
		Done: done})
}

// ButtonData encodes a question's option for a Button: short enough for
// Telegram's 64-byte callback_data with room for an adapter prefix.
func ButtonData(questionID string, option int) string {
	return questionID + ":" + strconv.Itoa(option)
}

// ParseButtonData decodes ButtonData.
func ParseButtonData(data string) (questionID string, option int, ok bool) {
	i := strings.LastIndexByte(data, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(data[i+1:])
	if err != nil || n < 1 {
		return "", 0, false
	}
	return data[:i], n, true
}
