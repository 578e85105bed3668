// Package fake is an in-memory platform adapter for tests. It behaves like a
// small chat platform: it keeps conversations and messages, enforces the
// rate limits it declares (answering with *core.RateLimitError like a real
// 429), records every operation with its time, and can be told to fail the
// next call of a method with any error (a rate limit with retry_after, a
// vanished message, a timeout). Tests inject what people do with Receive;
// Run hands it to the core.Handler and "acknowledges" an update only after
// the handler returned, redelivering it otherwise, like a platform with
// at-least-once delivery.
//
// Only tests import it: it is no platform of parley's binary, and has no
// configuration section; cmd/parley's tests add it to their table of
// platforms themselves.
package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Op is one platform operation the adapter performed (or refused).
type Op struct {
	Time   time.Time
	Method string // "send", "edit", "delete", "rename", "bind", "file"
	Place  core.Place
	ID     string // message id sent, edited or deleted
	Text   string
	// File is the content of a document sent ("file"; Text is its name).
	File   string
	Silent bool
	Err    error
}

// Message is a message as the fake platform shows it.
type Message struct {
	ID      string
	Place   core.Place
	Kind    core.MessageKind
	Text    string
	Silent  bool
	Buttons []core.Button
	Edits   int
	Deleted bool
	// ByPerson marks messages injected with Receive.
	ByPerson bool
}

// Adapter is the fake platform and its adapter. The zero value is not
// usable; call New.
type Adapter struct {
	name core.AdapterName
	caps core.Capabilities
	// Latency is added to every platform call, to imitate a network.
	Latency time.Duration
	// Idempotent makes Send honour OutMessage.Key the way Matrix honours
	// transaction ids: a second send with a key already used returns the
	// first message instead of posting again.
	Idempotent bool
	// Slack is how much earlier than the declared rate an operation may
	// arrive before it is refused; it absorbs scheduling jitter between
	// the outbox's clock and this one (100ms by default: a loaded CI
	// machine delays goroutines by tens of milliseconds, as a network
	// delays requests to a real platform).
	Slack time.Duration

	mu       sync.Mutex
	nextID   int
	msgs     map[string]*Message
	order    []string
	ops      []Op
	fail     map[string][]error
	threads  map[core.Place]bool // existing threads; deleted ones are false
	windows  map[string][]time.Time
	inbox    chan inbound
	renamed  map[core.Place]string
	keys     map[string]core.MessageRef
	down     error
	received int
}

// ErrHang, given to FailNext, makes that call hang like an HTTP request
// nobody answers: it returns only when its context ends.
var ErrHang = errors.New("fake: hang")

type inbound struct {
	cmd  core.Command
	done chan error
}

var (
	_ core.Adapter        = (*Adapter)(nil)
	_ core.Editor         = (*Adapter)(nil)
	_ core.Deleter        = (*Adapter)(nil)
	_ core.StatusShower   = (*Adapter)(nil)
	_ core.Binder         = (*Adapter)(nil)
	_ core.FileSender     = (*Adapter)(nil)
	_ core.TypingNotifier = (*Adapter)(nil)
)

// New returns a fake adapter named name that declares caps.
func New(name core.AdapterName, caps core.Capabilities) *Adapter {
	return &Adapter{
		name:    name,
		caps:    caps,
		Slack:   100 * time.Millisecond,
		msgs:    map[string]*Message{},
		fail:    map[string][]error{},
		threads: map[core.Place]bool{},
		windows: map[string][]time.Time{},
		inbox:   make(chan inbound, 1024),
		renamed: map[core.Place]string{},
		keys:    map[string]core.MessageRef{},
	}
}

// Name implements core.Adapter.
func (a *Adapter) Name() core.AdapterName { return a.name }

// Capabilities implements core.Adapter.
func (a *Adapter) Capabilities() core.Capabilities { return a.caps }

// FailNext makes the next call of method ("send", "edit", "delete",
// "rename", "bind", "file") return err instead of acting. Calls queue up.
func (a *Adapter) FailNext(method string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail[method] = append(a.fail[method], err)
}

// SetDown makes every call fail with err until SetDown(nil): a platform
// outage. Calls during it are recorded with their error and change nothing.
func (a *Adapter) SetDown(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = err
}

// Ops returns a copy of every operation so far.
func (a *Adapter) Ops() []Op {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Op(nil), a.ops...)
}

// Messages returns the messages visible at place, oldest first.
func (a *Adapter) Messages(place core.Place) []Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Message
	for _, id := range a.order {
		m := a.msgs[id]
		if m.Place == place && !m.Deleted {
			out = append(out, *m)
		}
	}
	return out
}

// Message returns one message by id, deleted or not.
func (a *Adapter) Message(id string) (Message, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.msgs[id]
	if !ok {
		return Message{}, false
	}
	return *m, true
}

// Title returns the title last set for place.
func (a *Adapter) Title(place core.Place) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.renamed[place]
}

// Vanish deletes a message behind the daemon's back, as a person would.
func (a *Adapter) Vanish(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m, ok := a.msgs[id]; ok {
		m.Deleted = true
	}
}

// DeleteThread removes a conversation with its messages behind the daemon's
// back, as deleting a Telegram topic does; sends to it fail with
// core.ErrThreadGone until the session is bound anew, edits and deletes of
// its messages with core.ErrMessageGone.
func (a *Adapter) DeleteThread(place core.Place) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.threads[place] = false
	for _, m := range a.msgs {
		if m.Place == place {
			m.Deleted = true
		}
	}
}

// Receive injects what a person did. It returns at once; Run delivers it.
// The fake assigns a platform message (so the cleanup ledger can delete it)
// unless cmd.Ref is already set, and a PlatformID unless set.
func (a *Adapter) Receive(cmd core.Command) core.Command {
	a.mu.Lock()
	if cmd.Origin == "" {
		cmd.Origin = core.Origin(a.name)
	}
	if cmd.Ref.IsZero() && (cmd.Kind == core.SendMessage || cmd.Kind == core.CreateSession) {
		a.nextID++
		id := strconv.Itoa(a.nextID)
		a.msgs[id] = &Message{ID: id, Place: cmd.Place, Kind: core.KindHuman, Text: cmd.Text, ByPerson: true}
		a.order = append(a.order, id)
		cmd.Ref = core.MessageRef{Adapter: a.name, Place: cmd.Place, ID: id}
	}
	if cmd.PlatformID == "" {
		a.received++
		cmd.PlatformID = "u" + strconv.Itoa(a.received)
	}
	a.mu.Unlock()
	a.inbox <- inbound{cmd: cmd}
	return cmd
}

// Deliver hands cmd to the running adapter's handler and waits until it was
// acknowledged (the handler succeeded), returning the last handler error
// when ctx ends first.
func (a *Adapter) Deliver(ctx context.Context, cmd core.Command) error {
	in := inbound{cmd: cmd, done: make(chan error, 1)}
	select {
	case a.inbox <- in:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-in.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run implements core.Adapter: it delivers received updates in order and
// redelivers an update until the handler accepts it.
func (a *Adapter) Run(ctx context.Context, h core.Handler) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case in := <-a.inbox:
			backoff := 10 * time.Millisecond
			for {
				_, err := h.Handle(ctx, in.cmd)
				if err == nil || !retryable(err) {
					if in.done != nil {
						in.done <- err
					}
					break
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, time.Second)
			}
		}
	}
}

// retryable reports whether a handler error means "not handled, deliver
// again" rather than "handled, with an answer for the person".
func retryable(err error) bool {
	for _, final := range []error{core.ErrUnauthorized, core.ErrSessionClosed, core.ErrInvalid, core.ErrNotFound} {
		if errors.Is(err, final) {
			return false
		}
	}
	return true
}

// Bind implements core.Binder: it creates a new conversation. The binding's
// Meta records the thread's number, so tests can see adapter metadata kept.
func (a *Adapter) Bind(ctx context.Context, s core.Session) (core.Binding, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Creating a conversation is a call about the group, not inside the
	// new thread: it counts against the account's limits only.
	if err := a.beginLocked(ctx, "bind", core.Place{}); err != nil {
		return core.Binding{}, err
	}
	a.nextID++
	p := core.Place{Chat: "group", Thread: "t" + strconv.Itoa(a.nextID)}
	a.threads[p] = true
	a.renamed[p] = s.Title
	a.recordLocked(Op{Method: "bind", Place: p})
	meta, _ := json.Marshal(map[string]string{"thread": p.Thread})
	return core.Binding{Place: p, Meta: meta}, nil
}

// Send implements core.Adapter.
func (a *Adapter) Send(ctx context.Context, place core.Place, m core.OutMessage) (core.MessageRef, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.beginLocked(ctx, "send", place); err != nil {
		return core.MessageRef{}, err
	}
	if alive, known := a.threads[place]; known && !alive {
		err := fmt.Errorf("fake: send: %w", core.ErrThreadGone)
		a.recordLocked(Op{Method: "send", Place: place, Text: m.Text, Err: err})
		return core.MessageRef{}, err
	}
	if a.caps.MaxLength > 0 && delivery.Measure(m.Text, a.caps.LengthUnit) > a.caps.MaxLength {
		err := fmt.Errorf("fake: send: message is too long (%d > %d)", delivery.Measure(m.Text, a.caps.LengthUnit), a.caps.MaxLength)
		a.recordLocked(Op{Method: "send", Place: place, Text: m.Text, Err: err})
		return core.MessageRef{}, core.Permanent(err)
	}
	if ref, seen := a.keys[m.Key]; seen && a.Idempotent && m.Key != "" {
		a.recordLocked(Op{Method: "send", Place: place, ID: ref.ID, Text: m.Text, Silent: m.Silent})
		return ref, nil
	}
	a.nextID++
	id := strconv.Itoa(a.nextID)
	a.msgs[id] = &Message{ID: id, Place: place, Kind: m.Kind, Text: m.Text, Silent: m.Silent, Buttons: m.Buttons}
	a.order = append(a.order, id)
	a.recordLocked(Op{Method: "send", Place: place, ID: id, Text: m.Text, Silent: m.Silent})
	ref := core.MessageRef{Adapter: a.name, Place: place, ID: id}
	if m.Key != "" {
		a.keys[m.Key] = ref
	}
	return ref, nil
}

// Edit implements core.Editor.
func (a *Adapter) Edit(ctx context.Context, ref core.MessageRef, m core.OutMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.beginLocked(ctx, "edit", ref.Place); err != nil {
		return err
	}
	msg, ok := a.msgs[ref.ID]
	if !ok || msg.Deleted {
		err := fmt.Errorf("fake: edit %s: %w", ref.ID, core.ErrMessageGone)
		a.recordLocked(Op{Method: "edit", Place: ref.Place, ID: ref.ID, Text: m.Text, Err: err})
		return err
	}
	if msg.Text == m.Text {
		err := fmt.Errorf("fake: edit %s: %w", ref.ID, core.ErrNotModified)
		a.recordLocked(Op{Method: "edit", Place: ref.Place, ID: ref.ID, Text: m.Text, Err: err})
		return err
	}
	msg.Text = m.Text
	msg.Buttons = m.Buttons
	msg.Edits++
	a.recordLocked(Op{Method: "edit", Place: ref.Place, ID: ref.ID, Text: m.Text})
	return nil
}

// Delete implements core.Deleter. People's messages (from Receive) can be
// deleted only when the capabilities declare DeleteOthers.
func (a *Adapter) Delete(ctx context.Context, ref core.MessageRef) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.beginLocked(ctx, "delete", ref.Place); err != nil {
		return err
	}
	msg, ok := a.msgs[ref.ID]
	if !ok || msg.Deleted {
		err := fmt.Errorf("fake: delete %s: %w", ref.ID, core.ErrMessageGone)
		a.recordLocked(Op{Method: "delete", Place: ref.Place, ID: ref.ID, Err: err})
		return err
	}
	if msg.ByPerson && !a.caps.DeleteOthers {
		// Like Slack's cant_delete_message: retrying cannot help.
		err := core.Permanent(fmt.Errorf("fake: delete %s: a person's message, and DeleteOthers is not declared", ref.ID))
		a.recordLocked(Op{Method: "delete", Place: ref.Place, ID: ref.ID, Err: err})
		return err
	}
	msg.Deleted = true
	a.recordLocked(Op{Method: "delete", Place: ref.Place, ID: ref.ID})
	return nil
}

// ShowStatus implements core.StatusShower: the conversation's title shows
// the status emoji and the title, like a Telegram topic name.
func (a *Adapter) ShowStatus(ctx context.Context, b core.Binding, v core.StatusView) (json.RawMessage, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.beginLocked(ctx, "rename", b.Place); err != nil {
		return nil, err
	}
	title := delivery.StatusMark(v.Status) + " " + v.Title
	a.renamed[b.Place] = title
	a.recordLocked(Op{Method: "rename", Place: b.Place, Text: title})
	return nil, nil
}

// SendFile implements core.FileSender; the fake keeps the caption and the
// file's name as the message text, and records the content it read.
func (a *Adapter) SendFile(ctx context.Context, place core.Place, f core.Attachment, body io.Reader, caption string) (core.MessageRef, error) {
	content, err := io.ReadAll(body)
	if err != nil {
		return core.MessageRef{}, fmt.Errorf("fake: read %s: %w", f.Name, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.beginLocked(ctx, "file", place); err != nil {
		return core.MessageRef{}, err
	}
	a.nextID++
	id := strconv.Itoa(a.nextID)
	a.msgs[id] = &Message{ID: id, Place: place, Kind: core.KindContinuation, Text: "[file " + f.Name + "] " + caption}
	a.order = append(a.order, id)
	a.recordLocked(Op{Method: "file", Place: place, ID: id, Text: f.Name, File: string(content)})
	return core.MessageRef{Adapter: a.name, Place: place, ID: id}, nil
}

// beginLocked applies latency, injected failures and the declared limits.
func (a *Adapter) beginLocked(ctx context.Context, method string, place core.Place) error {
	if a.Latency > 0 {
		a.mu.Unlock()
		select {
		case <-time.After(a.Latency):
		case <-ctx.Done():
		}
		a.mu.Lock()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if a.down != nil {
		a.recordLocked(Op{Method: method, Place: place, Err: a.down})
		return a.down
	}
	if q := a.fail[method]; len(q) > 0 {
		err := q[0]
		a.fail[method] = q[1:]
		if errors.Is(err, ErrHang) {
			a.mu.Unlock()
			<-ctx.Done()
			a.mu.Lock()
			err = ctx.Err()
		}
		a.recordLocked(Op{Method: method, Place: place, Err: err})
		return err
	}
	if err := a.limitLocked(method, place); err != nil {
		a.recordLocked(Op{Method: method, Place: place, Err: err})
		return err
	}
	return nil
}

// methodKinds maps the fake's methods to the outbox's operation kinds, for
// the limits that count only some kinds.
var methodKinds = map[string]core.OpKind{
	"send": core.OpSend, "file": core.OpSend, "bind": core.OpSend,
	"edit": core.OpEdit, "delete": core.OpDelete, "rename": core.OpRename, "typing": core.OpTyping,
}

// limitLocked enforces each declared Limit as "at most N operations in any
// window of length Per" (minus Slack) within its scope, the way platforms
// count, and answers like a 429 with the time until the window frees up
// and the scope it concerns.
func (a *Adapter) limitLocked(method string, place core.Place) error {
	now := time.Now()
	kind := methodKinds[method]
	type check struct {
		key   string
		rate  core.Rate
		scope core.Scope
	}
	var checks []check
	for i, l := range a.caps.Limits {
		if l.Rate.Unlimited() || !l.Applies(kind) || (place.IsZero() && l.Scope != core.ScopeAccount) {
			continue
		}
		key := fmt.Sprintf("%d\x00", i)
		switch l.Scope {
		case core.ScopeConversation:
			key += place.Chat + "\x00" + place.Thread
		case core.ScopeGroup:
			key += place.Chat
		}
		checks = append(checks, check{key, l.Rate, l.Scope})
	}
	for _, c := range checks {
		window := c.rate.Per - a.Slack
		ts := a.windows[c.key]
		for len(ts) > 0 && now.Sub(ts[0]) >= window {
			ts = ts[1:]
		}
		a.windows[c.key] = ts
		if len(ts) >= c.rate.N {
			wait := window - now.Sub(ts[0])
			return &core.RateLimitError{RetryAfter: wait, Scope: c.scope, Err: errors.New("fake: Too Many Requests")}
		}
	}
	for _, c := range checks {
		a.windows[c.key] = append(a.windows[c.key], now)
	}
	return nil
}

func (a *Adapter) recordLocked(op Op) {
	op.Time = time.Now()
	a.ops = append(a.ops, op)
}

// Typing implements core.TypingNotifier; it is recorded as a "typing" op
// and counted by the limits that count core.OpTyping.
func (a *Adapter) Typing(ctx context.Context, place core.Place) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.beginLocked(ctx, "typing", place); err != nil {
		return err
	}
	a.recordLocked(Op{Method: "typing", Place: place})
	return nil
}
