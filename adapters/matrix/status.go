package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// maxRoomName bounds a room name; the specification sets no limit, but
// clients cut long names anyway and Synapse refuses names over 255 bytes.
const maxRoomName = 255

// roomName is what the room's m.room.name shows for v: the status emoji,
// then the title.
func roomName(v core.StatusView) string {
	title := strings.Join(strings.Fields(v.Title), " ")
	return shorten(delivery.StatusMark(v.Status)+" "+title, maxRoomName)
}

// ShowStatus implements core.StatusShower: the room's name carries the
// status. Core calls it only when the visible status changed, so a turn
// costs at most a few state events.
//
// In a room where the bot's power level is below what m.room.name needs
// (a person's room, where the bot joined with the default level), the
// status cannot be shown: ShowStatus makes no call, and says once in the
// room which power level would let it.
func (a *Adapter) ShowStatus(ctx context.Context, b core.Binding, v core.StatusView) (json.RawMessage, error) {
	room := id.RoomID(b.Place.Chat)
	p, err := a.powers(ctx, room)
	if err != nil {
		return nil, err
	}
	if !p.name {
		a.askForPower(ctx, room, p.nameLevel)
		return nil, nil
	}
	_, err = a.cli.SendStateEvent(ctx, room, event.StateRoomName, "", &event.RoomNameEventContent{Name: roomName(v)})
	if err != nil {
		return nil, a.classifyIn(ctx, "set the room name", opState, room, err)
	}
	return nil, nil
}

// Bind implements core.Binder: a session started elsewhere (or whose room
// the bot was removed from) gets a new private room, named by its status
// and title, with the allowed people invited and, when a space is
// configured, added to it. Creating a room is not idempotent: if parley
// dies between the homeserver's answer and storing the binding, the next
// delivery creates another room and the first stays empty.
func (a *Adapter) Bind(ctx context.Context, s core.Session) (core.Binding, error) {
	v := core.StatusView{Title: s.Title, Status: s.Status}
	room, err := a.createRoom(ctx, roomName(v), "parley session "+string(s.ID), a.invitees())
	if err != nil {
		return core.Binding{}, err
	}
	return core.Binding{Adapter: Name, Place: place(room), Shown: v}, nil
}

// invitees are the allowed people other than the bot.
func (a *Adapter) invitees() []id.UserID {
	var out []id.UserID
	for _, u := range a.opts.Allowed {
		if uid := id.UserID(u); uid != a.cli.UserID && uid != "" {
			out = append(out, uid)
		}
	}
	return out
}

// createRoom creates a private room for a session with people invited, in
// the configured space. The room is created unencrypted: this adapter does
// not speak end-to-end encryption.
func (a *Adapter) createRoom(ctx context.Context, name, topic string, invite []id.UserID) (id.RoomID, error) {
	req := &mautrix.ReqCreateRoom{Name: name, Topic: topic, Preset: "private_chat", Invite: invite}
	space, err := a.space(ctx)
	if err != nil {
		a.log.Warn("the configured space cannot be resolved; the room is created outside it", "space", a.opts.Space, "err", err)
	}
	if space != "" {
		req.InitialState = []*event.Event{{Type: event.StateSpaceParent, StateKey: new(string(space)),
			Content: event.Content{Parsed: &event.SpaceParentEventContent{Via: []string{a.server()}, Canonical: true}}}}
	}
	resp, err := a.cli.CreateRoom(ctx, req)
	if err != nil {
		return "", classify("create a room", opOther, err, false)
	}
	a.power.Store(resp.RoomID, powers{redact: true, name: true, nameLevel: 50}) // the creator has power 100
	if space != "" {
		if _, err := a.cli.SendStateEvent(ctx, space, event.StateSpaceChild, string(resp.RoomID),
			&event.SpaceChildEventContent{Via: []string{a.server()}}); err != nil {
			// The room exists and works; failing here would make another.
			a.log.Warn("could not add the session's room to the space", "space", space, "room", resp.RoomID, "err", err)
		}
	}
	return resp.RoomID, nil
}

// space resolves the configured space to a room id ("" when none is set).
func (a *Adapter) space(ctx context.Context) (id.RoomID, error) {
	s := a.opts.Space
	if s == "" || strings.HasPrefix(s, "!") {
		return id.RoomID(s), nil
	}
	resp, err := a.cli.ResolveAlias(ctx, id.RoomAlias(s))
	if err != nil {
		return "", fmt.Errorf("matrix: resolve the space %s: %w", s, err)
	}
	return resp.RoomID, nil
}

// server is the bot's homeserver name, for "via" in space links.
func (a *Adapter) server() string { return a.cli.UserID.Homeserver() }

// powers is what the bot's power level allows in a room.
type powers struct {
	redact    bool // redact others' events
	name      bool // set the room's name
	nameLevel int  // the level m.room.name needs
}

// mayRedactOthers reports whether the bot's power level in room reaches
// its redact level.
func (a *Adapter) mayRedactOthers(ctx context.Context, room id.RoomID) (bool, error) {
	p, err := a.powers(ctx, room)
	return p.redact, err
}

// powers reads what the bot may do in room, from a cache the sync loop
// clears when the room's power levels change.
func (a *Adapter) powers(ctx context.Context, room id.RoomID) (powers, error) {
	if v, ok := a.power.Load(room); ok {
		return v.(powers), nil
	}
	var pl event.PowerLevelsEventContent
	if err := a.cli.StateEvent(ctx, room, event.StatePowerLevels, "", &pl); err != nil {
		return powers{}, a.classifyIn(ctx, "read the power levels", opState, room, err)
	}
	me := pl.GetUserLevel(a.cli.UserID)
	nameLevel := pl.GetEventLevel(event.StateRoomName)
	p := powers{redact: me >= pl.Redact(), name: me >= nameLevel, nameLevel: nameLevel}
	a.power.Store(room, p)
	return p, nil
}

// askForPower says once per room (the transaction id is the room's) that
// the room's name cannot show the session's status, and why.
func (a *Adapter) askForPower(ctx context.Context, room id.RoomID, level int) {
	if _, done := a.asked.LoadOrStore(room, struct{}{}); done {
		return
	}
	a.log.Info("the bot's power level in the room is too low to show the status in the room's name", "room", room, "needs", level)
	text := fmt.Sprintf("ℹ️ To show the session's status in this room's name, give me power level %d (Moderator) in the room's settings → Roles & Permissions.", level)
	b, err := encode(content(core.OutMessage{Text: text, Silent: true}))
	if err == nil {
		_, err = a.sendRaw(ctx, room, event.EventMessage, txnID("power\x00"+string(room)), b)
	}
	if err != nil {
		a.log.Warn("could not ask for the power to rename the room", "room", room, "err", err)
	}
}
