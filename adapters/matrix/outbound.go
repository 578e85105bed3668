package matrix

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/core"
)

// Send implements core.Adapter: an m.room.message with the plain and the
// HTML body, under a transaction id derived from m.Key when it has one.
func (a *Adapter) Send(ctx context.Context, p core.Place, m core.OutMessage) (core.MessageRef, error) {
	room := id.RoomID(p.Chat)
	b, err := encode(content(m))
	if err != nil {
		return core.MessageRef{}, err
	}
	var ev id.EventID
	if m.Key == "" {
		ev, err = a.sendRaw(ctx, room, event.EventMessage, a.cli.TxnID(), b)
	} else {
		ev, err = a.sendKeyed(ctx, room, txnID(m.Key), b)
	}
	if err != nil {
		return core.MessageRef{}, a.classifyIn(ctx, "send", opSend, room, err)
	}
	if m.Kind == core.KindTurnDone {
		a.stopTyping(ctx, room)
	}
	return ref(room, ev), nil
}

// sendKeyed sends under a transaction id derived from the message's key:
// one the homeserver already echoed in /sync (sent by this process or by
// the one before a restart) is not sent again, and a second event the
// homeserver made for it anyway is redacted (see the package doc,
// "Echoes").
func (a *Adapter) sendKeyed(ctx context.Context, room id.RoomID, txn string, content []byte) (id.EventID, error) {
	a.waitFirstSync(ctx)
	if ev, ok := a.echo.begin(txn, room); ok {
		a.log.Debug("the homeserver already holds this message; not sending it again", "room", room, "event", ev)
		return ev, nil
	}
	ev, err := a.sendRaw(ctx, room, event.EventMessage, txn, content)
	if dups := a.echo.end(txn, room, ev); len(dups) > 0 {
		a.redactDuplicates(ctx, room, a.echo.keptOf(txn), dups)
	}
	return ev, err
}

// stopTyping ends the room's typing notification with the turn, rather
// than let it show for up to typingFor after the agent stopped. Best
// effort: typing is ephemeral and not counted by homeservers' message
// limits.
func (a *Adapter) stopTyping(ctx context.Context, room id.RoomID) {
	a.typedMu.Lock()
	_, on := a.typed[room]
	delete(a.typed, room)
	a.typedMu.Unlock()
	if !on {
		return
	}
	if _, err := a.cli.UserTyping(ctx, room, false, 0); err != nil {
		a.log.Debug("stop typing", "room", room, "err", err)
	}
}

// Edit implements core.Editor with an m.replace event. Homeservers accept
// an edit of a redacted event (and clients then show nothing), so the
// target is read first: a redacted or unknown event is core.ErrMessageGone
// and core posts a new message instead. Matrix never reports an edit as
// "not modified"; core's digest already skips identical content.
func (a *Adapter) Edit(ctx context.Context, r core.MessageRef, m core.OutMessage) error {
	room := id.RoomID(r.Place.Chat)
	if err := a.alive(ctx, room, id.EventID(r.ID)); err != nil {
		return err
	}
	b, err := encode(editOf(r.ID, content(m)))
	if err != nil {
		return err
	}
	if _, err := a.sendRaw(ctx, room, event.EventMessage, a.cli.TxnID(), b); err != nil {
		return a.classifyIn(ctx, "edit", opEdit, room, err)
	}
	return nil
}

// alive reports core.ErrMessageGone for an event that was redacted or that
// the bot cannot see any more. An event the homeserver does not know (yet)
// is taken as alive: a homeserver may answer a read before it has indexed
// an event it just made (Dendrite does), and taking that for gone would
// post the output a second time.
func (a *Adapter) alive(ctx context.Context, room id.RoomID, ev id.EventID) error {
	got, err := a.cli.GetEvent(ctx, room, ev)
	switch {
	case err != nil && errors.Is(err, mautrix.MNotFound):
		return nil
	case err != nil && forbidden(err):
		return fmt.Errorf("matrix: event %s: %w: %w", ev, core.ErrMessageGone, err)
	case err != nil:
		return classify("read the event to edit", opOther, err, false)
	case got.Unsigned.RedactedBecause != nil || len(got.Content.VeryRaw) <= 2:
		return fmt.Errorf("matrix: event %s was redacted: %w", ev, core.ErrMessageGone)
	}
	return nil
}

// sendRaw PUTs an event whose content is already encoded (see encode).
func (a *Adapter) sendRaw(ctx context.Context, room id.RoomID, typ event.Type, txn string, content []byte) (id.EventID, error) {
	var resp mautrix.RespSendEvent
	_, err := a.cli.MakeFullRequest(ctx, mautrix.FullRequest{
		Method:       http.MethodPut,
		URL:          a.cli.BuildClientURL("v3", "rooms", room, "send", typ.String(), txn),
		Headers:      http.Header{"Content-Type": {"application/json"}},
		RequestBytes: content,
		ResponseJSON: &resp,
	})
	return resp.EventID, err
}

// classifyIn classifies err of a call in room; an M_FORBIDDEN is checked
// against the bot's rooms, since it is also how a homeserver answers a
// send to a room the bot was removed from.
func (a *Adapter) classifyIn(ctx context.Context, what string, o op, room id.RoomID, err error) error {
	gone := false
	if forbidden(err) {
		gone = !a.joined(ctx, room)
	}
	return classify(what, o, err, gone)
}

// joined reports whether the bot is in room; when the homeserver cannot
// say, it answers yes, so a refusal is not taken for a vanished room.
func (a *Adapter) joined(ctx context.Context, room id.RoomID) bool {
	resp, err := a.cli.JoinedRooms(ctx)
	if err != nil {
		return true
	}
	return slices.Contains(resp.JoinedRooms, room)
}

// Delete implements core.Deleter with a redaction. The bot's own events it
// may always redact; a person's only where its power level reaches the
// room's redact level (rooms it created: it has 100). Elsewhere Delete
// makes no call and returns core.ErrNoCall, which the outbox takes as
// success without a call (the cleanup ledger then drops the row): a
// refused request, or an error log for each of a person's messages, would
// be noise. Capabilities.DeleteOthers is one flag per adapter, so the
// decision per room is made here.
func (a *Adapter) Delete(ctx context.Context, r core.MessageRef) error {
	room, ev := id.RoomID(r.Place.Chat), id.EventID(r.ID)
	// Homeservers accept a redaction of a redacted event; read it first
	// so that a message already gone is reported as such.
	got, err := a.cli.GetEvent(ctx, room, ev)
	switch {
	case err != nil && errors.Is(err, mautrix.MNotFound):
		// Not indexed yet (see alive), or never there: its sender is
		// unknown, so it is redacted only where the bot may redact
		// anyone's; a redaction of an unknown id changes nothing.
		got = &event.Event{}
	case err != nil && forbidden(err):
		return fmt.Errorf("matrix: redact %s: %w: %w", ev, core.ErrMessageGone, err)
	case err != nil:
		return classify("read the event to redact", opRedact, err, false)
	case got.Unsigned.RedactedBecause != nil || len(got.Content.VeryRaw) <= 2:
		return fmt.Errorf("matrix: redact %s: already redacted: %w", ev, core.ErrMessageGone)
	}
	if got.Sender != a.cli.UserID {
		can, err := a.mayRedactOthers(ctx, room)
		if err != nil {
			return err
		}
		if !can {
			a.log.Debug("not redacting a person's message: the bot's power level is below the room's redact level", "room", room, "event", ev)
			return fmt.Errorf("matrix: redact %s in %s: the bot's power level is below the room's redact level; skipped: %w", ev, room, core.ErrNoCall)
		}
	}
	if _, err := a.cli.RedactEvent(ctx, room, ev, mautrix.ReqRedact{TxnID: txnID("redact\x00" + string(room) + "\x00" + string(ev))}); err != nil {
		return a.classifyIn(ctx, "redact", opRedact, room, err)
	}
	return nil
}

// typingFor is how long one typing notification lasts; core renews every
// few seconds, and a renewal within typingRenew of the last call is
// skipped.
const (
	typingFor   = 30 * time.Second
	typingRenew = 20 * time.Second
)

// Typing implements core.TypingNotifier.
func (a *Adapter) Typing(ctx context.Context, p core.Place) error {
	room := id.RoomID(p.Chat)
	now := a.now()
	a.typedMu.Lock()
	last, ok := a.typed[room]
	a.typedMu.Unlock()
	if ok && now.Sub(last) < typingRenew {
		return core.ErrNoCall
	}
	if _, err := a.cli.UserTyping(ctx, room, true, typingFor); err != nil {
		return a.classifyIn(ctx, "typing", opOther, room, err)
	}
	a.typedMu.Lock()
	a.typed[room] = now
	a.typedMu.Unlock()
	return nil
}
