package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/parley-chat/parley/core"
)

// The output-message lifecycle of every binding: the first update of a turn
// sends, later ones edit the same message; an edit whose message is gone
// sends a new one; identical payloads are never sent twice (the digest is
// persisted with the binding, so a restarted daemon resumes editing); an
// output too long for the platform shows its tail while it streams and is
// delivered whole when final, as continuation messages or as a file. The
// live text is derived state (the session holds it); the final output is
// journaled, with its edit and each continuation confirmed one by one.

// output keeps the output message of each session and binding.
type output struct {
	store    core.Store
	outbox   *Outbox
	bindings *bindings
	journal  *journal
	sender   *sender
	log      *slog.Logger
	// opts are the Dispatcher's: TailMarker, OnOutputShown.
	opts DispatcherOptions
	// sent is called after every message sent (Dispatcher.sent).
	sent func(ctx context.Context, s Sent)
}

// enqueue queues the edit that brings the binding's output message up
// to date with e; for a journaled final output already shown in an earlier
// run, only the continuations still missing.
func (o *output) enqueue(s core.Session, a core.Adapter, e core.Event, j *delivery) {
	name := a.Name()
	key := opKey(name, "out", 0)
	if !o.journal.add(j, key) {
		if o.journal.confirmed(j, key) {
			if b, ok := s.Bindings[name]; ok {
				_, rest, file := o.finalParts(a, e)
				o.finish(a, s.ID, b, e, j, rest, file)
			}
		}
		return
	}
	var done func(error)
	if j != nil {
		done = func(err error) { o.journal.confirm(j, name, key, err) }
	}
	coalesce := "out\x00" + string(s.ID) + "\x00" + string(name) + "\x00" + strconv.FormatUint(e.Turn, 10)
	// Paced as the call it will make: a send when the turn has no output
	// message here yet (after the root, when the session is not bound),
	// else an edit.
	calls := []core.OpKind{core.OpEdit}
	if b, ok := s.Bindings[name]; !ok || b.Output.Ref.IsZero() || b.Output.Turn < e.Turn {
		calls = []core.OpKind{core.OpSend}
	}
	// The final text of a turn is what the person waits for: queued at
	// send priority (taking the streaming edit's turn in the queue, which
	// it replaces), it goes before other sessions' streaming edits, is not
	// held to the edit interval, and may take the last slots of a group
	// budget that streaming edits leave to new messages (see Outbox).
	// The first text of a turn, which posts its output message, is what
	// the person waits for too: at send priority it goes before tidying
	// up (deleting the previous input) and is not held to the edit
	// interval. Later streaming edits wait their turn.
	prio := core.OpEdit
	if e.Final || calls[0] == core.OpSend {
		prio = core.OpSend
	}
	o.outbox.Enqueue(core.Op{Kind: prio, Calls: calls, Adapter: name, Place: queuePlace(s, a), Key: coalesce,
		Run:  o.journal.guard(j, func(ctx context.Context, at core.Place) error { return o.deliver(ctx, a, s.ID, at, e, j) }),
		Done: done})
}

// finalParts is how a final output is shown on a: the output message's
// text, the continuation messages after it, or (file) the whole text as a
// document behind a tail.
func (o *output) finalParts(a core.Adapter, e core.Event) (live string, rest []string, file bool) {
	c := a.Capabilities()
	if c.MaxLength <= 0 || measure(a, e.Text) <= c.MaxLength {
		return e.Text, nil, false
	}
	if c.FileThreshold > 0 && Measure(e.Text, c.LengthUnit) > c.FileThreshold && isFileSender(a) {
		return tail(a, e.Text, textFileAttached+o.opts.TailMarker), nil, true
	}
	parts := split(a, e.Text)
	return parts[0], parts[1:], false
}

// deliver brings the binding's output message up to date with e.
func (o *output) deliver(ctx context.Context, a core.Adapter, id core.SessionID, queuedAt core.Place, e core.Event, j *delivery) error {
	b, bound, err := o.bindings.of(ctx, a, id, queuedAt)
	if err != nil {
		return err
	}
	// noCall is the outcome when nothing needed the platform.
	noCall := core.ErrNoCall
	if bound {
		noCall = nil
	}
	out := b.Output
	switch {
	case out.Turn > e.Turn && e.Final && j != nil:
		// A later turn has its own output message already: this final
		// edit was held back (failures, an outage) past the next turn's
		// start. It lands in its own turn's message, which the binding
		// keeps as Prev; failing that, the final text must not be lost:
		// it goes whole as new messages.
		return o.lateFinal(ctx, a, id, b, e, j)
	case out.Turn > e.Turn:
		return noCall // a later turn has its own output message now
	case out.Turn < e.Turn:
		out = core.OutputState{Turn: e.Turn, Prev: out.Ref, PrevTurn: out.Turn}
	}
	c := a.Capabilities()
	live, rest, file := e.Text, []string(nil), false
	switch {
	case e.Final:
		live, rest, file = o.finalParts(a, e)
	case c.MaxLength > 0 && measure(a, e.Text) > c.MaxLength:
		live = tail(a, e.Text, o.opts.TailMarker)
	}
	if strings.TrimSpace(live) == "" {
		return noCall // platforms refuse empty messages; nothing to show yet
	}
	m := core.OutMessage{Kind: core.KindOutput, Text: live, Silent: true}
	dg := digest(m)
	shown := out.Ref.IsZero() || out.Digest != dg
	if shown {
		ref, err := o.show(ctx, a, id, &b, out.Ref, m)
		if err != nil {
			return err
		}
		out.Ref, out.Digest = ref, dg
		if err := o.save(ctx, id, a.Name(), b.Place, out); err != nil {
			return err
		}
		if o.opts.OnOutputShown != nil && !e.Time.IsZero() {
			o.opts.OnOutputShown(a.Name(), time.Since(e.Time))
		}
	}
	if j != nil {
		// Registered before this op is confirmed, so the event stays in
		// the journal until its continuations are confirmed too.
		o.finish(a, id, b, e, j, rest, file)
	}
	if !shown {
		return noCall
	}
	return nil
}

// lateFinal delivers the final output e of a turn whose binding moved on to
// a later turn: an edit of the turn's message when the binding still knows
// it, else the whole text as new messages.
func (o *output) lateFinal(ctx context.Context, a core.Adapter, id core.SessionID, b core.Binding, e core.Event, j *delivery) error {
	live, rest, file := o.finalParts(a, e)
	if ed, ok := a.(core.Editor); ok && b.Output.PrevTurn == e.Turn && !b.Output.Prev.IsZero() {
		err := ed.Edit(ctx, b.Output.Prev, core.OutMessage{Kind: core.KindOutput, Text: live, Silent: true})
		switch {
		case err == nil, errors.Is(err, core.ErrNotModified):
			o.finish(a, id, b, e, j, rest, file)
			return nil
		case !errors.Is(err, core.ErrMessageGone):
			return err
		}
	}
	if file {
		// Past the file threshold the text goes as a document wherever
		// it lands: its tail as a new message, then the document.
		o.finish(a, id, b, e, j, []string{live}, false)
		o.finish(a, id, b, e, j, nil, true)
		return core.ErrNoCall
	}
	parts := []string{e.Text}
	if c := a.Capabilities(); c.MaxLength > 0 && measure(a, e.Text) > c.MaxLength {
		parts = split(a, e.Text)
	}
	o.finish(a, id, b, e, j, parts, false)
	return core.ErrNoCall
}

// show edits the output message, or sends it when there is none or it
// is gone.
func (o *output) show(ctx context.Context, a core.Adapter, id core.SessionID, b *core.Binding, ref core.MessageRef, m core.OutMessage) (core.MessageRef, error) {
	if ed, ok := a.(core.Editor); ok && !ref.IsZero() {
		err := ed.Edit(ctx, ref, m)
		switch {
		case err == nil, errors.Is(err, core.ErrNotModified):
			return ref, nil
		case !errors.Is(err, core.ErrMessageGone):
			return core.MessageRef{}, err
		}
		o.log.Info("output message gone, sending a new one", "adapter", a.Name(), "session", id)
	}
	ref, err := o.bindings.sendAt(ctx, a, id, b, m)
	if err != nil {
		return core.MessageRef{}, err
	}
	o.sent(ctx, Sent{Session: id, Ref: ref, Kind: core.KindOutput, Lifetime: core.LifetimeManual})
	return ref, nil
}

func (o *output) save(ctx context.Context, id core.SessionID, name core.AdapterName, place core.Place, out core.OutputState) error {
	_, _, err := o.store.UpdateSession(ctx, id, func(s *core.Session) error {
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

// finish delivers the rest of a final output that did not fit, each
// part under its own journal key.
func (o *output) finish(a core.Adapter, id core.SessionID, b core.Binding, e core.Event, j *delivery, rest []string, file bool) {
	s := core.Session{ID: id, Bindings: map[core.AdapterName]core.Binding{a.Name(): b}}
	if file {
		// Made from the journaled text at each attempt: no file on disk.
		f := core.Attachment{Name: fmt.Sprintf("output-turn-%d.md", e.Turn+1), Mime: "text/markdown", Size: int64(len(e.Text))}
		body := func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(e.Text)), nil }
		o.sender.sendFile(s, a, a.(core.FileSender), e, j, opKey(a.Name(), "outfile", 0), f, textFileCaption, body)
		return
	}
	for i, part := range rest {
		o.sender.send(s, a, e, j, opKey(a.Name(), "cont", i), core.OutMessage{Kind: core.KindContinuation, Text: part}, core.LifetimeManual, false)
	}
}

func isFileSender(a core.Adapter) bool { _, ok := a.(core.FileSender); return ok }

func digest(m core.OutMessage) string {
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
