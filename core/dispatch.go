package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Sent describes a message the Dispatcher put on a platform, for hooks such
// as the cleanup ledger.
type Sent struct {
	Session  SessionID
	Ref      MessageRef
	Kind     MessageKind
	Lifetime Lifetime
	// Seq is the event that caused the message, so a rule that fired
	// while the message was still on its way can be applied to it late.
	Seq uint64
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
	OnOutputShown func(adapter AdapterName, lag time.Duration)
	Logger        *slog.Logger
}

// Dispatcher turns stored events into platform operations: it asks the
// Router for the targets of each event and enqueues the operations on the
// Outbox. It owns the output-message lifecycle of every binding: the first
// update of a turn sends, later ones edit the same message; an edit whose
// message is gone sends a new one; identical payloads are never sent twice
// (the digest is persisted with the binding, so a restarted daemon resumes
// editing); an output too long for the platform shows its tail while it
// streams and is delivered whole when final, as continuation messages or as
// a file. It also creates bindings lazily through Binder adapters, one at a
// time per session and adapter, and rebinds once when a thread is gone.
type Dispatcher struct {
	store  Store
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
	seen     atomic.Uint64
	// typing holds, per session and adapter, the stop function of the
	// loop showing the typing indicator while the agent works.
	typing map[string]context.CancelFunc
}

// typingEvery is how often the typing indicator is renewed (Telegram's
// lasts five seconds); typingFor bounds one working spell's indicator.
const (
	typingEvery = 4500 * time.Millisecond
	typingFor   = 10 * time.Minute
)

// NewDispatcher returns a dispatcher.
func NewDispatcher(store Store, router *Router, outbox *Outbox, opts DispatcherOptions) *Dispatcher {
	if opts.TailMarker == "" {
		opts.TailMarker = "…"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{
		store: store, router: router, outbox: outbox, opts: opts, log: opts.Logger,
		notified: map[string]uint64{}, typing: map[string]context.CancelFunc{},
	}
}

// Run dispatches events from sub until ctx ends, and then the events
// already buffered, so that a graceful stop still delivers them.
func (d *Dispatcher) Run(ctx context.Context, sub *Subscription) {
	Consume(ctx, sub, func(ctx context.Context, e Event) {
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

// Dispatch enqueues the platform operations for one event.
func (d *Dispatcher) Dispatch(ctx context.Context, e Event) error {
	if e.Session == "" {
		return nil
	}
	s, err := d.store.Session(ctx, e.Session)
	if err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	for _, name := range d.router.Targets(s, e) {
		a, _ := d.router.Adapter(name)
		d.dispatchTo(s, a, e)
	}
	return nil
}

// queuePlace is where an op for s on a is paced: its binding, or where
// the binding will be made.
func queuePlace(s Session, a Adapter) Place {
	if b, ok := s.Bindings[a.Name()]; ok {
		return b.Place
	}
	if bp, ok := a.(BindPlacer); ok {
		return bp.BindPlace()
	}
	return Place{}
}

func (d *Dispatcher) dispatchTo(s Session, a Adapter, e Event) {
	name := a.Name()
	place := queuePlace(s, a)
	switch e.Kind {
	case EventOutput:
		kind := OpEdit
		key := "out\x00" + string(s.ID) + "\x00" + string(name) + "\x00" + strconv.FormatUint(e.Turn, 10)
		d.outbox.Enqueue(Op{Kind: kind, Adapter: name, Place: place, Key: key, Final: e.Final,
			Run: func(ctx context.Context, at Place) error { return d.deliverOutput(ctx, a, s.ID, at, e) }})
	case EventTurnComplete:
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
		d.enqueueSend(s, a, e, OutMessage{Kind: KindTurnDone, Text: "✅ Done"}, LifetimeNextInput, true, OpEdit)
	case EventAssistant:
		d.markNotified(s, name)
		text := e.Message.Content
		fs, canFile := a.(FileSender)
		if !canFile {
			for _, f := range e.Message.Attachments {
				text += "\n📎 " + f.Name
			}
		}
		for _, chunk := range d.chunks(a, text) {
			d.send(s, a, e, OutMessage{Kind: KindAssistant, Text: chunk}, LifetimeManual, true)
		}
		if canFile {
			for _, f := range e.Message.Attachments {
				d.sendFile(s, a, fs, f)
			}
		}
	case EventHumanMessage, EventQueued, EventAnswer:
		text := e.Message.Content
		if who := e.Message.Actor.Name; who != "" {
			text = "**" + who + ":** " + text
		}
		for _, chunk := range d.chunks(a, text) {
			d.send(s, a, e, OutMessage{Kind: KindHuman, Text: chunk, Silent: true}, LifetimeManual, false)
		}
	case EventNotice, EventCancel:
		text := "⏹ Cancel requested"
		if e.Message != nil {
			text = e.Message.Content
		}
		lt := e.Lifetime
		if lt == "" {
			lt = LifetimeNextNotice
		}
		d.send(s, a, e, OutMessage{Kind: KindNotice, Text: text, Silent: true}, lt, false)
	case EventQuestion:
		m := OutMessage{Kind: KindQuestion, Text: e.Message.Content}
		if a.Capabilities().Buttons {
			for i, opt := range e.Options {
				m.Buttons = append(m.Buttons, Button{Label: opt, Data: ButtonData(e.QuestionID, i+1)})
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
		d.send(s, a, e, m, LifetimeManual, true)
	case EventSessionCreated, EventSessionUpdated:
		d.setTyping(s, a, e.Status == StatusWorking)
		if _, ok := a.(ThreadRenamer); !ok {
			return
		}
		key := "title\x00" + string(s.ID) + "\x00" + string(name)
		d.outbox.Enqueue(Op{Kind: OpRename, Adapter: name, Place: place, Key: key,
			Run: func(ctx context.Context, _ Place) error { return d.rename(ctx, a, s.ID) }})
	}
}

func (d *Dispatcher) markNotified(s Session, name AdapterName) {
	d.mu.Lock()
	d.notified[string(s.ID)+"\x00"+string(name)] = s.Turn + 1
	d.mu.Unlock()
}

// setTyping starts or stops the typing indicator of s on a. Chat actions
// are not messages: they are sent directly, best effort, not through the
// outbox, so they never take a message's place in the rate budget.
func (d *Dispatcher) setTyping(s Session, a Adapter, on bool) {
	t, ok := a.(TypingNotifier)
	if !ok {
		return
	}
	key := string(s.ID) + "\x00" + string(a.Name())
	d.mu.Lock()
	defer d.mu.Unlock()
	if stop, running := d.typing[key]; running {
		if on {
			return
		}
		stop()
		delete(d.typing, key)
		return
	}
	b, bound := s.Bindings[a.Name()]
	if !on || !bound {
		return
	}
	ctx, stop := context.WithTimeout(context.Background(), typingFor)
	d.typing[key] = stop
	go func() {
		defer func() {
			d.mu.Lock()
			if _, still := d.typing[key]; still && ctx.Err() == context.DeadlineExceeded {
				delete(d.typing, key)
			}
			d.mu.Unlock()
		}()
		tick := time.NewTicker(typingEvery)
		defer tick.Stop()
		for {
			if err := t.Typing(ctx, b.Place); err != nil && ctx.Err() == nil {
				d.log.Debug("typing indicator", "adapter", a.Name(), "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// StopTyping ends every typing indicator (at shutdown).
func (d *Dispatcher) StopTyping() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, stop := range d.typing {
		stop()
		delete(d.typing, k)
	}
}

// chunks splits text to the adapter's length limit.
func (d *Dispatcher) chunks(a Adapter, text string) []string {
	c := a.Capabilities()
	if c.MaxLength <= 0 || Measure(text, c.LengthUnit) <= c.MaxLength {
		return []string{text}
	}
	return Split(text, c.MaxLength, c.LengthUnit)
}

// send enqueues one new message; notify=false sends it silently.
func (d *Dispatcher) send(s Session, a Adapter, e Event, m OutMessage, lt Lifetime, notify bool) {
	d.enqueueSend(s, a, e, m, lt, notify, OpSend)
}

func (d *Dispatcher) enqueueSend(s Session, a Adapter, e Event, m OutMessage, lt Lifetime, notify bool, prio OpKind) {
	m.Silent = m.Silent || !notify
	place := queuePlace(s, a)
	d.outbox.Enqueue(Op{Kind: prio, Adapter: a.Name(), Place: place,
		Final: e.Kind == EventTurnComplete,
		Run: func(ctx context.Context, at Place) error {
			b, err := d.binding(ctx, a, s.ID, at)
			if err != nil {
				return err
			}
			ref, err := d.sendAt(ctx, a, s.ID, &b, m)
			if err != nil {
				return err
			}
			d.sent(ctx, Sent{Session: s.ID, Ref: ref, Kind: m.Kind, Lifetime: lt, Seq: e.Seq})
			return nil
		}})
}

// sendFile enqueues one document for the session's binding on a.
func (d *Dispatcher) sendFile(s Session, a Adapter, fs FileSender, f Attachment) {
	d.outbox.Enqueue(Op{Kind: OpSend, Adapter: a.Name(), Place: queuePlace(s, a),
		Run: func(ctx context.Context, at Place) error {
			b, err := d.binding(ctx, a, s.ID, at)
			if err != nil {
				return err
			}
			ref, err := fs.SendFile(ctx, b.Place, f, "")
			if err == nil {
				d.sent(ctx, Sent{Session: s.ID, Ref: ref, Kind: KindAssistant, Lifetime: LifetimeManual})
			}
			return err
		}})
}

func (d *Dispatcher) sent(ctx context.Context, s Sent) {
	if d.opts.OnSent != nil {
		d.opts.OnSent(ctx, s)
	}
}

// binding returns the session's binding on a, creating it through Binder
// when there is none yet. An op queued for another place (before the session
// was bound) gets a *MovedError, so the outbox paces it at its real place.
func (d *Dispatcher) binding(ctx context.Context, a Adapter, id SessionID, queuedAt Place) (Binding, error) {
	b, err := d.bindingOf(ctx, a, id)
	if err == nil && queuedAt != b.Place {
		return Binding{}, &MovedError{Place: b.Place}
	}
	return b, err
}

func (d *Dispatcher) bindingOf(ctx context.Context, a Adapter, id SessionID) (Binding, error) {
	lock := d.bindLock(id, a.Name())
	lock.Lock()
	defer lock.Unlock()
	s, err := d.store.Session(ctx, id)
	if err != nil {
		return Binding{}, err
	}
	if b, ok := s.Bindings[a.Name()]; ok {
		return b, nil
	}
	return d.bindLocked(ctx, a, s)
}

func (d *Dispatcher) bindLock(id SessionID, name AdapterName) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return &d.binds[h.Sum32()%uint32(len(d.binds))]
}

// bindLocked creates a new binding (replacing a stale one); the caller
// holds the session's bind lock.
func (d *Dispatcher) bindLocked(ctx context.Context, a Adapter, s Session) (Binding, error) {
	binder, ok := a.(Binder)
	if !ok {
		return Binding{}, Permanent(fmt.Errorf("dispatch: session %s has no binding on %s: %w", s.ID, a.Name(), ErrUnsupported))
	}
	place, err := binder.Bind(ctx, s)
	if err != nil {
		return Binding{}, fmt.Errorf("dispatch: bind %s on %s: %w", s.ID, a.Name(), err)
	}
	b := Binding{Adapter: a.Name(), Place: place, Output: OutputState{Turn: s.Turn}}
	_, _, err = d.store.UpdateSession(ctx, s.ID, func(s *Session) error {
		if s.Bindings == nil {
			s.Bindings = map[AdapterName]Binding{}
		}
		s.Bindings[a.Name()] = b
		return nil
	})
	return b, err
}

// sendAt sends m at the binding's place; when the platform says the thread
// is gone it binds the session anew and retries once.
func (d *Dispatcher) sendAt(ctx context.Context, a Adapter, id SessionID, b *Binding, m OutMessage) (MessageRef, error) {
	ref, err := a.Send(ctx, b.Place, m)
	if !errors.Is(err, ErrThreadGone) {
		return ref, err
	}
	d.log.Info("thread gone, binding anew", "adapter", a.Name(), "session", id)
	lock := d.bindLock(id, a.Name())
	lock.Lock()
	s, err := d.store.Session(ctx, id)
	if err == nil {
		if cur, ok := s.Bindings[a.Name()]; ok && cur.Place != b.Place {
			*b = cur // someone else rebound meanwhile
		} else {
			*b, err = d.bindLocked(ctx, a, s)
		}
	}
	lock.Unlock()
	if err != nil {
		return MessageRef{}, err
	}
	return a.Send(ctx, b.Place, m)
}

func digest(m OutMessage) string {
	h := sha256.New()
	h.Write([]byte(m.Kind))
	h.Write([]byte{0})
	h.Write([]byte(m.Text))
	for _, b := range m.Buttons {
		h.Write([]byte{0})
		h.Write([]byte(b.Label + "\x01" + b.Data))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// deliverOutput brings the binding's output message up to date with e.
func (d *Dispatcher) deliverOutput(ctx context.Context, a Adapter, id SessionID, queuedAt Place, e Event) error {
	b, err := d.binding(ctx, a, id, queuedAt)
	if err != nil {
		return err
	}
	out := b.Output
	switch {
	case out.Turn > e.Turn:
		return nil // a later turn has its own output message now
	case out.Turn < e.Turn:
		out = OutputState{Turn: e.Turn}
	}
	c := a.Capabilities()
	live, rest, file := e.Text, []string(nil), false
	if c.MaxLength > 0 && Measure(e.Text, c.LengthUnit) > c.MaxLength {
		switch {
		case !e.Final:
			live = Tail(e.Text, c.MaxLength, c.LengthUnit, d.opts.TailMarker)
		case c.FileThreshold > 0 && Measure(e.Text, c.LengthUnit) > c.FileThreshold && isFileSender(a):
			live = Tail(e.Text, c.MaxLength, c.LengthUnit, "📄 The full output is attached as a file.\n\n"+d.opts.TailMarker)
			file = true
		default:
			parts := Split(e.Text, c.MaxLength, c.LengthUnit)
			live, rest = parts[0], parts[1:]
		}
	}
	if strings.TrimSpace(live) == "" {
		return nil // platforms refuse empty messages; nothing to show yet
	}
	m := OutMessage{Kind: KindOutput, Text: live, Silent: true}
	dg := digest(m)
	if out.Ref.IsZero() || out.Digest != dg {
		ref, err := d.showOutput(ctx, a, id, &b, out.Ref, m)
		if err != nil {
			return err
		}
		out.Ref, out.Digest = ref, dg
		if err := d.saveOutput(ctx, id, a.Name(), b.Place, out); err != nil {
			return err
		}
		if d.opts.OnOutputShown != nil && !e.Time.IsZero() {
			d.opts.OnOutputShown(a.Name(), time.Since(e.Time))
		}
	}
	if !e.Final {
		return nil
	}
	d.finishOutput(ctx, a, id, b, e, rest, file)
	return nil
}

// showOutput edits the output message, or sends it when there is none or it
// is gone.
func (d *Dispatcher) showOutput(ctx context.Context, a Adapter, id SessionID, b *Binding, ref MessageRef, m OutMessage) (MessageRef, error) {
	if ed, ok := a.(Editor); ok && !ref.IsZero() {
		err := ed.Edit(ctx, ref, m)
		switch {
		case err == nil, errors.Is(err, ErrNotModified):
			return ref, nil
		case !errors.Is(err, ErrMessageGone):
			return MessageRef{}, err
		}
		d.log.Info("output message gone, sending a new one", "adapter", a.Name(), "session", id)
	}
	ref, err := d.sendAt(ctx, a, id, b, m)
	if err != nil {
		return MessageRef{}, err
	}
	d.sent(ctx, Sent{Session: id, Ref: ref, Kind: KindOutput, Lifetime: LifetimeManual})
	return ref, nil
}

func (d *Dispatcher) saveOutput(ctx context.Context, id SessionID, name AdapterName, place Place, out OutputState) error {
	_, _, err := d.store.UpdateSession(ctx, id, func(s *Session) error {
		b, ok := s.Bindings[name]
		if !ok {
			return nil // unbound meanwhile; nothing to remember
		}
		if b.Place != place {
			out.Ref.Place = b.Place
		}
		b.Output = out
		s.Bindings[name] = b
		return nil
	})
	return err
}

// finishOutput delivers the rest of a final output that did not fit.
func (d *Dispatcher) finishOutput(ctx context.Context, a Adapter, id SessionID, b Binding, e Event, rest []string, file bool) {
	if file {
		path, err := d.writeFile(id, e)
		if err != nil {
			d.log.Error("write output file", "session", id, "err", err)
			rest = Split(e.Text, a.Capabilities().MaxLength, a.Capabilities().LengthUnit)[1:]
		} else {
			fs := a.(FileSender)
			f := Attachment{Name: filepath.Base(path), Mime: "text/markdown", Path: path, Size: int64(len(e.Text))}
			d.outbox.Enqueue(Op{Kind: OpSend, Adapter: a.Name(), Place: b.Place, Final: true,
				Run: func(ctx context.Context, _ Place) error {
					ref, err := fs.SendFile(ctx, b.Place, f, "Full output")
					if err == nil {
						d.sent(ctx, Sent{Session: id, Ref: ref, Kind: KindContinuation, Lifetime: LifetimeManual})
					}
					return err
				}})
			return
		}
	}
	for i, part := range rest {
		key := fmt.Sprintf("cont\x00%s\x00%s\x00%d\x00%d", id, a.Name(), e.Turn, i)
		m := OutMessage{Kind: KindContinuation, Text: part, Silent: true}
		d.outbox.Enqueue(Op{Kind: OpSend, Adapter: a.Name(), Place: b.Place, Key: key, Final: true,
			Run: func(ctx context.Context, _ Place) error {
				bb := b
				ref, err := d.sendAt(ctx, a, id, &bb, m)
				if err == nil {
					d.sent(ctx, Sent{Session: id, Ref: ref, Kind: KindContinuation, Lifetime: LifetimeManual})
				}
				return err
			}})
	}
}

func (d *Dispatcher) writeFile(id SessionID, e Event) (string, error) {
	if d.opts.FileDir == "" {
		return "", errors.New("no file directory configured")
	}
	dir := filepath.Join(d.opts.FileDir, string(id))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("output-turn-%d.md", e.Turn+1))
	return path, os.WriteFile(path, []byte(e.Text), 0o600)
}

func isFileSender(a Adapter) bool { _, ok := a.(FileSender); return ok }

// rename shows the session's title and status on a ThreadRenamer adapter,
// skipping the call when the platform already shows it.
func (d *Dispatcher) rename(ctx context.Context, a Adapter, id SessionID) error {
	s, err := d.store.Session(ctx, id)
	if err != nil {
		return err
	}
	b, ok := s.Bindings[a.Name()]
	if !ok {
		return nil
	}
	title := s.Status.Emoji() + " " + s.Title
	if b.TitleShown == title {
		return nil
	}
	if err := a.(ThreadRenamer).RenameThread(ctx, b.Place, title); err != nil {
		return err
	}
	_, _, err = d.store.UpdateSession(ctx, id, func(s *Session) error {
		if b, ok := s.Bindings[a.Name()]; ok {
			b.TitleShown = title
			s.Bindings[a.Name()] = b
		}
		return nil
	})
	return err
}

// EnqueueDelete deletes ref through its owning adapter's outbox lane and
// reports the outcome to done (nil also when the message was already gone).
func (d *Dispatcher) EnqueueDelete(ref MessageRef, done func(error)) {
	a, ok := d.router.Adapter(ref.Adapter)
	del, can := a.(Deleter)
	if !ok || !can {
		done(fmt.Errorf("delete on %s: %w", ref.Adapter, ErrUnsupported))
		return
	}
	d.outbox.Enqueue(Op{Kind: OpDelete, Adapter: ref.Adapter, Place: ref.Place,
		Key: "del\x00" + string(ref.Adapter) + "\x00" + ref.Place.Chat + "\x00" + ref.Place.Thread + "\x00" + ref.ID,
		Run: func(ctx context.Context, _ Place) error {
			err := del.Delete(ctx, ref)
			if errors.Is(err, ErrMessageGone) {
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
