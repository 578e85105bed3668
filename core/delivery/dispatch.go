package delivery

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"sync"
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
	// FileDir is where final outputs too long for messages are written
	// before they are sent as documents.
	FileDir string
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
	Logger      *slog.Logger
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
// that writes the journal row with the event can serve it.
//
// The output-message lifecycle of every binding lives here too (see
// output.go), and bindings are created lazily (see binding.go).
type Dispatcher struct {
	store  core.Store
	router *Router
	outbox *Outbox
	opts   DispatcherOptions
	log    *slog.Logger

	// binds serialise binding creation per session and adapter (striped,
	// so memory does not grow with the number of sessions).
	binds [64]sync.Mutex
	mu    sync.Mutex
	// notified remembers, per session and adapter, the turn (plus one) in
	// which a notifying message was already sent, so turn completion adds
	// one only when the person has not been notified yet. Entries are
	// dropped at turn completion.
	notified map[string]uint64
	// deliveries are the journaled events being delivered, by Seq.
	deliveries map[uint64]*delivery
	seen       atomic.Uint64
	// typing holds, per session and adapter, the stop function of the
	// loop showing the typing indicator while the agent works.
	typing map[string]context.CancelFunc
	// closedQs and closedOrder remember the latest questions withdrawn
	// (questions.go), for a question message sent after its withdrawal.
	closedQs    map[string]core.Event
	closedOrder []string
	// lateShown are question messages sent after their question left the
	// session but before its withdrawal reached the dispatcher (it may
	// have been answered instead): withdraw edits them when it comes.
	lateShown map[string][]Sent
	lateOrder []string
}

// delivery tracks the operations of one journaled event.
type delivery struct {
	seq uint64
	// outstanding are the keys of operations enqueued and not confirmed.
	outstanding map[string]bool
	// done are the keys confirmed in an earlier run (from the journal).
	done map[string]bool
	// sealed is set once every operation the event needs was enqueued;
	// until then an empty outstanding set does not finish it.
	sealed bool
}

// NewDispatcher returns a dispatcher.
func NewDispatcher(store core.Store, router *Router, outbox *Outbox, opts DispatcherOptions) *Dispatcher {
	if opts.TailMarker == "" {
		opts.TailMarker = "…"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{
		store: store, router: router, outbox: outbox, opts: opts, log: opts.Logger,
		notified: map[string]uint64{}, typing: map[string]context.CancelFunc{},
		deliveries: map[uint64]*delivery{}, closedQs: map[string]core.Event{}, lateShown: map[string][]Sent{},
	}
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
func (d *Dispatcher) Delivering() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.deliveries)
}

// DeliveringBy is, for each adapter, the number of journaled events with
// an operation of that adapter not confirmed yet: where the backlog is.
func (d *Dispatcher) DeliveringBy() map[core.AdapterName]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[core.AdapterName]int{}
	for _, j := range d.deliveries {
		seen := map[string]bool{}
		for key := range j.outstanding {
			a, _, _ := strings.Cut(key, "/") // opKey
			if !seen[a] {
				seen[a] = true
				out[core.AdapterName(a)]++
			}
		}
	}
	return out
}

// replayPage is how many journaled events Replay reads at a time.
const replayPage = 512

// Replay dispatches again every journaled event with Seq <= upTo whose
// delivery did not finish (the daemon stopped or died first), oldest first,
// skipping the operations already confirmed. Events after upTo arrive
// through Run. It returns how many events it replayed.
func (d *Dispatcher) Replay(ctx context.Context, upTo uint64) (int, error) {
	var after uint64
	n := 0
	for {
		page, err := d.store.Deliveries(ctx, after, replayPage)
		if err != nil {
			return n, fmt.Errorf("dispatch: replay: %w", err)
		}
		for _, dl := range page {
			if dl.Event.Seq > upTo {
				return n, nil
			}
			if err := d.dispatch(ctx, dl.Event, dl.Done); err != nil {
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
	return d.dispatch(ctx, e, nil)
}

func (d *Dispatcher) dispatch(ctx context.Context, e core.Event, done []string) error {
	if e.Session == "" {
		if e.Place != nil && e.Kind == core.EventNotice && e.Message != nil {
			d.dispatchToPlace(ctx, e, done)
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
	j := d.track(e, done)
	if e.Seq > 0 && e.Journaled() && j == nil {
		return nil // already being delivered
	}
	if e.Kind == core.EventQuestionClosed {
		// To wherever the question is shown, whatever the routing.
		d.withdraw(s, e, j)
		d.seal(ctx, j)
		return nil
	}
	for _, name := range d.router.Targets(s, e) {
		a, _ := d.router.Adapter(name)
		if followsEvents(a) {
			continue // routed there, and it shows the event itself
		}
		d.dispatchTo(s, a, e, j)
	}
	d.seal(ctx, j)
	return nil
}

// dispatchToPlace sends a notice addressed to a place with no session on
// its origin adapter, journaled like any other notice. It is not recorded
// in the cleanup ledger, whose rules belong to sessions.
func (d *Dispatcher) dispatchToPlace(ctx context.Context, e core.Event, done []string) {
	j := d.track(e, done)
	defer d.seal(ctx, j)
	a, ok := d.router.Adapter(e.Origin.Adapter())
	if !ok || followsEvents(a) || (e.Seq > 0 && j == nil) {
		return
	}
	key := opKey(a.Name(), "notice", 0)
	if !d.add(j, key) {
		return
	}
	m := core.OutMessage{Kind: core.KindNotice, Text: e.Message.Content, Silent: true, Key: sendKey(e.Seq, key)}
	place := *e.Place
	d.outbox.Enqueue(core.Op{Kind: core.OpSend, Adapter: a.Name(), Place: place,
		Run: func(ctx context.Context, _ core.Place) error {
			_, err := a.Send(ctx, place, m)
			return err
		},
		Done: func(err error) { d.confirm(j, a.Name(), key, err) }})
}

// track starts tracking a journaled event's operations. It returns nil for
// events that are not journaled and for one already being delivered.
func (d *Dispatcher) track(e core.Event, done []string) *delivery {
	if e.Seq == 0 || !e.Journaled() {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, busy := d.deliveries[e.Seq]; busy {
		return nil
	}
	j := &delivery{seq: e.Seq, outstanding: map[string]bool{}, done: map[string]bool{}}
	for _, k := range done {
		j.done[k] = true
	}
	d.deliveries[e.Seq] = j
	return j
}

// add registers the operation key of j; it reports false when the
// operation was confirmed in an earlier run and must not run again. A nil j
// (an event that is not journaled) always runs.
func (d *Dispatcher) add(j *delivery, key string) bool {
	if j == nil {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if j.done[key] || j.outstanding[key] {
		return false
	}
	j.outstanding[key] = true
	return true
}

// seal marks every operation of j enqueued; if all are confirmed already
// (or there were none) the event leaves the journal.
func (d *Dispatcher) seal(ctx context.Context, j *delivery) {
	if j == nil {
		return
	}
	d.mu.Lock()
	j.sealed = true
	last := len(j.outstanding) == 0
	d.mu.Unlock()
	if last {
		if err := d.store.ConfirmDelivery(context.WithoutCancel(ctx), j.seq, "", true); err != nil {
			d.log.Error("journal: finish delivery", "seq", j.seq, "err", err)
		}
		d.forget(j)
	}
}

// forget stops tracking j once its journal row is gone, so Delivering
// counts an event until its confirmation is durable.
func (d *Dispatcher) forget(j *delivery) {
	d.mu.Lock()
	delete(d.deliveries, j.seq)
	d.mu.Unlock()
}

// confirm records the outcome of one journaled operation. An operation the
// outbox dropped at shutdown stays in the journal for the next start.
func (d *Dispatcher) confirm(j *delivery, a core.AdapterName, key string, err error) {
	if j == nil || IsClosed(err) {
		return
	}
	answered := time.Now()
	d.mu.Lock()
	delete(j.outstanding, key)
	j.done[key] = true
	last := j.sealed && len(j.outstanding) == 0
	d.mu.Unlock()
	err = d.store.ConfirmDelivery(context.Background(), j.seq, key, last)
	if last {
		d.forget(j)
	}
	if err != nil {
		d.log.Error("journal: confirm delivery", "seq", j.seq, "op", key, "err", err)
		return
	}
	if d.opts.OnConfirmed != nil {
		d.opts.OnConfirmed(a, time.Since(answered))
	}
}

// followsEvents reports whether a shows sessions itself and wants no
// platform operations (Capabilities.FollowsEvents).
func followsEvents(a core.Adapter) bool { return a.Capabilities().FollowsEvents }

// IsClosed reports whether err ended an operation only because the outbox
// stopped: the operation is still wanted.
func IsClosed(err error) bool { return err != nil && errors.Is(err, core.ErrOutboxClosed) }

// opKey is the journal key of an operation: adapter, what, and index.
func opKey(a core.AdapterName, what string, i int) string {
	return string(a) + "/" + what + "/" + strconv.Itoa(i)
}

// sendKey is the idempotency key of a logical send (OutMessage.Key).
func sendKey(seq uint64, key string) string {
	if seq == 0 {
		return ""
	}
	return strconv.FormatUint(seq, 10) + "/" + key
}

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
		d.enqueueOutput(s, a, e, j)
	case core.EventTurnComplete:
		k := string(s.ID) + "\x00" + string(name)
		d.mu.Lock()
		already := d.notified[k] == e.Turn+1
		delete(d.notified, k)
		d.mu.Unlock()
		if already {
			return
		}
		// Queued at edit priority, so it lands after the turn's final
		// output edit (enqueued before it) rather than overtaking it: the
		// person is notified when the final text is there to read.
		d.enqueueSend(s, a, e, j, opKey(name, "done", 0), core.OutMessage{Kind: core.KindTurnDone, Text: "✅ Done"}, core.LifetimeNextInput, true, core.OpEdit)
	case core.EventAssistant:
		d.markNotified(s, name)
		text := e.Message.Content
		fs, canFile := a.(core.FileSender)
		if !canFile {
			for _, f := range e.Message.Attachments {
				text += "\n📎 " + f.Name
			}
		}
		for i, chunk := range d.chunks(a, text) {
			d.send(s, a, e, j, opKey(name, "msg", i), core.OutMessage{Kind: core.KindAssistant, Text: chunk}, core.LifetimeManual, true)
		}
		if canFile {
			for i, f := range e.Message.Attachments {
				d.sendFile(s, a, fs, e, j, opKey(name, "file", i), f, "")
			}
		}
	case core.EventHumanMessage, core.EventQueued, core.EventAnswer:
		text := e.Message.Content
		if who := e.Message.Actor.Name; who != "" {
			text = "**" + who + ":** " + text
		}
		for i, chunk := range d.chunks(a, text) {
			d.send(s, a, e, j, opKey(name, "human", i), core.OutMessage{Kind: core.KindHuman, Text: chunk, Silent: true}, core.LifetimeManual, false)
		}
	case core.EventNotice, core.EventCancel:
		text := "⏹ Cancel requested"
		if e.Message != nil {
			text = e.Message.Content
		}
		lt := e.Lifetime
		if lt == "" {
			lt = core.LifetimeNextNotice
		}
		d.send(s, a, e, j, opKey(name, "notice", 0), core.OutMessage{Kind: core.KindNotice, Text: text, Silent: true}, lt, false)
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
			b.WriteString("\n\nReply with the number of your choice.")
			m.Text = b.String()
		}
		d.markNotified(s, name)
		d.send(s, a, e, j, opKey(name, "question", 0), m, core.LifetimeManual, true)
	case core.EventToolCall, core.EventToolOutput, core.EventToolApproval:
		d.enqueueProgress(s, a, e)
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
		d.setTyping(s, a, e.Status == core.StatusWorking)
		d.enqueueStatus(s, a)
	}
}

func (d *Dispatcher) markNotified(s core.Session, name core.AdapterName) {
	d.mu.Lock()
	d.notified[string(s.ID)+"\x00"+string(name)] = s.Turn + 1
	d.mu.Unlock()
}

// chunks splits text to the adapter's length limit.
func (d *Dispatcher) chunks(a core.Adapter, text string) []string {
	c := a.Capabilities()
	if c.MaxLength <= 0 || measure(a, text) <= c.MaxLength {
		return []string{text}
	}
	return split(a, text)
}

// send enqueues one new message; notify=false sends it silently.
func (d *Dispatcher) send(s core.Session, a core.Adapter, e core.Event, j *delivery, key string, m core.OutMessage, lt core.Lifetime, notify bool) {
	d.enqueueSend(s, a, e, j, key, m, lt, notify, core.OpSend)
}

func (d *Dispatcher) enqueueSend(s core.Session, a core.Adapter, e core.Event, j *delivery, key string, m core.OutMessage, lt core.Lifetime, notify bool, prio core.OpKind) {
	if !d.add(j, key) {
		return
	}
	m.Silent = m.Silent || !notify
	m.Key = sendKey(e.Seq, key)
	d.outbox.Enqueue(core.Op{Kind: prio, Calls: []core.OpKind{core.OpSend}, Adapter: a.Name(), Place: queuePlace(s, a),
		Run: func(ctx context.Context, at core.Place) error {
			b, err := d.binding(ctx, a, s.ID, at)
			if err != nil {
				return err
			}
			ref, err := d.sendAt(ctx, a, s.ID, &b, m)
			if err != nil {
				return err
			}
			d.sent(ctx, Sent{Session: s.ID, Ref: ref, Kind: m.Kind, Lifetime: lt, Seq: e.Seq, Question: e.QuestionID})
			return nil
		},
		Done: d.doneFunc(s, a, j, key, m.Kind)})
}

// fileTimeout is the deadline of a document upload, longer than a message's.
const fileTimeout = 2 * time.Minute

// sendFile enqueues one document for the session's binding on a.
func (d *Dispatcher) sendFile(s core.Session, a core.Adapter, fs core.FileSender, e core.Event, j *delivery, key string, f core.Attachment, caption string) {
	if !d.add(j, key) {
		return
	}
	d.outbox.Enqueue(core.Op{Kind: core.OpSend, Adapter: a.Name(), Place: queuePlace(s, a), Timeout: fileTimeout,
		Run: func(ctx context.Context, at core.Place) error {
			b, err := d.binding(ctx, a, s.ID, at)
			if err != nil {
				return err
			}
			ref, err := fs.SendFile(ctx, b.Place, f, caption)
			if err == nil {
				d.sent(ctx, Sent{Session: s.ID, Ref: ref, Kind: core.KindAssistant, Lifetime: core.LifetimeManual, Seq: e.Seq})
			}
			return err
		},
		Done: d.doneFunc(s, a, j, key, core.KindAssistant)})
}

// doneFunc confirms a journaled operation and, when a message a person is
// waiting for was refused for good, tells them with a short notice.
func (d *Dispatcher) doneFunc(s core.Session, a core.Adapter, j *delivery, key string, kind core.MessageKind) func(error) {
	return func(err error) {
		d.confirm(j, a.Name(), key, err)
		if err == nil || !core.IsPermanent(err) || kind == core.KindNotice || kind == core.KindHuman || kind == core.KindTurnDone {
			return
		}
		d.log.Warn("a message could not be delivered; telling the person", "adapter", a.Name(), "session", s.ID, "kind", kind)
		m := core.OutMessage{Kind: core.KindNotice, Silent: true,
			Text: "⚠️ A message from the agent could not be shown here: the platform refused it. The operator's log says why."}
		d.outbox.Enqueue(core.Op{Kind: core.OpSend, Adapter: a.Name(), Place: queuePlace(s, a),
			Run: func(ctx context.Context, at core.Place) error {
				b, err := d.binding(ctx, a, s.ID, at)
				if err != nil {
					return err
				}
				ref, err := a.Send(ctx, b.Place, m)
				if err == nil {
					d.sent(ctx, Sent{Session: s.ID, Ref: ref, Kind: core.KindNotice, Lifetime: core.LifetimeNextNotice})
				}
				return err
			}})
	}
}

func (d *Dispatcher) sent(ctx context.Context, s Sent) {
	if s.Kind == core.KindQuestion && s.Question != "" {
		d.questionShown(ctx, s)
	}
	if d.opts.OnSent != nil {
		d.opts.OnSent(ctx, s)
	}
}

func (d *Dispatcher) bindLock(id core.SessionID, name core.AdapterName) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return &d.binds[h.Sum32()%uint32(len(d.binds))]
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
