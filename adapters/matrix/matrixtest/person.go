package matrixtest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Person plays a person in a test: a plain Matrix client acting for one
// account, and a sync loop that records what the account sees.
//
// Actions (Send, CreateRoom, …) are made directly, with a deadline, and
// fail the test when the homeserver refuses them. Observations come from
// the sync loop: Events and RoomName return what has been seen so far, and
// the Wait methods block until a match is seen or the timeout passes (then
// fail the test). Every event the account saw is kept, so a Wait also
// matches events seen before it was called: match on content, not on
// "the next event".
//
// The methods are safe for concurrent use; the ones taking a testing.TB
// call tb.Fatal and so belong to the test's goroutine.
type Person struct {
	User *User
	// Client is the person's client; use it for what Person does not offer.
	Client *mautrix.Client

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every recorded change
	events   map[id.RoomID][]*event.Event
	seenAt   map[id.EventID]time.Time // when the sync loop received each event
	names    map[id.RoomID]string
	invites  []*invite // in order of arrival
	joined   map[id.RoomID]bool
	typing   map[id.RoomID]map[id.UserID]bool // as of the last m.typing
	typed    map[id.RoomID]map[id.UserID]bool // ever seen typing
	gaps     map[id.RoomID]bool               // rooms whose timeline a sync left incomplete
	syncErr  error                            // the last failed sync, for the failure message
	syncDone chan struct{}
}

type invite struct {
	room    id.RoomID
	from    id.UserID
	pending bool // not yet joined, declined or withdrawn
}

// NewPerson starts the sync loop of u on hsURL (the homeserver's, or a
// Proxy's) and stops it when the test ends.
func NewPerson(tb testing.TB, hsURL string, u *User) *Person {
	tb.Helper()
	p := &Person{
		User:     u,
		Client:   u.Client(tb, hsURL),
		changed:  make(chan struct{}),
		events:   map[id.RoomID][]*event.Event{},
		seenAt:   map[id.EventID]time.Time{},
		names:    map[id.RoomID]string{},
		joined:   map[id.RoomID]bool{},
		typing:   map[id.RoomID]map[id.UserID]bool{},
		typed:    map[id.RoomID]map[id.UserID]bool{},
		gaps:     map[id.RoomID]bool{},
		syncDone: make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	go p.syncLoop(ctx)
	tb.Cleanup(func() { cancel(); <-p.syncDone })
	return p
}

// syncFilter is an inline filter (both Synapse and Dendrite accept one in
// place of a filter id) that raises the timeline limit from the default 20
// events per room and sync: a test that streams edits into a room produces
// more than 20 between two syncs, and a limited timeline would leave a gap
// in what the person saw.
const syncFilter = `{"room":{"timeline":{"limit":1000}}}`

// syncLoop long-polls /sync until ctx ends. A failed sync is retried after
// a short pause (a test may stop the homeserver under a person).
func (p *Person) syncLoop(ctx context.Context) {
	defer close(p.syncDone)
	since := ""
	for ctx.Err() == nil {
		timeout := 30000
		if since == "" {
			timeout = 0
		}
		callCtx, cancel := context.WithTimeout(ctx, time.Duration(timeout)*time.Millisecond+callTimeout)
		resp, err := p.Client.SyncRequest(callCtx, timeout, since, syncFilter, false, event.PresenceOffline)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			p.syncErr = err
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		since = resp.NextBatch
		p.record(resp)
	}
}

func (p *Person) record(resp *mautrix.RespSync) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for roomID, room := range resp.Rooms.Invite {
		var from id.UserID
		for _, evt := range room.State.Events {
			prepare(roomID, evt)
			if evt.Type == event.StateMember && evt.GetStateKey() == p.User.ID.String() {
				from = evt.Sender
			}
			p.noteName(roomID, evt)
		}
		inv := p.invite(roomID)
		inv.from, inv.pending = from, true
	}
	for roomID, room := range resp.Rooms.Join {
		p.joined[roomID] = true
		p.settleInvite(roomID)
		if room.Timeline.Limited && len(p.events[roomID]) > 0 {
			p.gaps[roomID] = true
		}
		for _, evt := range room.State.Events {
			prepare(roomID, evt)
			p.noteName(roomID, evt)
		}
		for _, evt := range room.Timeline.Events {
			prepare(roomID, evt)
			p.noteName(roomID, evt)
			p.events[roomID] = append(p.events[roomID], evt)
			p.seenAt[evt.ID] = now
		}
		for _, evt := range room.Ephemeral.Events {
			if evt.Type.Type != event.EphemeralEventTyping.Type {
				continue
			}
			var c event.TypingEventContent
			if json.Unmarshal(evt.Content.VeryRaw, &c) != nil {
				continue
			}
			now := map[id.UserID]bool{}
			if p.typed[roomID] == nil {
				p.typed[roomID] = map[id.UserID]bool{}
			}
			for _, u := range c.UserIDs {
				now[u] = true
				p.typed[roomID][u] = true
			}
			p.typing[roomID] = now
		}
	}
	for roomID, room := range resp.Rooms.Leave {
		delete(p.joined, roomID)
		p.settleInvite(roomID)
		for _, evt := range room.Timeline.Events {
			prepare(roomID, evt)
			p.noteName(roomID, evt)
			p.events[roomID] = append(p.events[roomID], evt)
			p.seenAt[evt.ID] = now
		}
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// settleInvite marks an invite to the room, if any, as no longer pending.
func (p *Person) settleInvite(roomID id.RoomID) {
	for _, inv := range p.invites {
		if inv.room == roomID {
			inv.pending = false
		}
	}
}

// invite returns the room's invite record, adding one if there is none.
func (p *Person) invite(roomID id.RoomID) *invite {
	for _, inv := range p.invites {
		if inv.room == roomID {
			return inv
		}
	}
	inv := &invite{room: roomID}
	p.invites = append(p.invites, inv)
	return inv
}

func (p *Person) noteName(roomID id.RoomID, evt *event.Event) {
	if evt.Type != event.StateRoomName || evt.GetStateKey() != "" {
		return
	}
	if c, ok := evt.Content.Parsed.(*event.RoomNameEventContent); ok {
		p.names[roomID] = c.Name
	}
}

// prepare does what mautrix's syncer does before dispatching: the room id,
// the type's class, and the parsed content (left nil for types mautrix
// does not know; Content.Raw still has them).
func prepare(roomID id.RoomID, evt *event.Event) {
	evt.RoomID = roomID
	if evt.StateKey != nil {
		evt.Type.Class = event.StateEventType
	} else {
		evt.Type.Class = event.MessageEventType
	}
	_ = evt.Content.ParseRaw(evt.Type)
}

// Events returns the timeline events of the room seen so far, oldest first.
func (p *Person) Events(roomID id.RoomID) []*event.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*event.Event(nil), p.events[roomID]...)
}

// SeenAt returns when the person's sync loop received the event (the zero
// time if it has not): with the time a text was produced, how late a
// person sees it, for benchmarks.
func (p *Person) SeenAt(eventID id.EventID) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seenAt[eventID]
}

// RoomName returns the room's name as last seen, or "" if none was seen.
func (p *Person) RoomName(roomID id.RoomID) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.names[roomID]
}

// Joined reports whether the account is in the room, as the last sync said.
func (p *Person) Joined(roomID id.RoomID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.joined[roomID]
}

// wait calls check under the lock whenever something was recorded, until
// it reports true or timeout passes; then it fails the test with what.
func (p *Person) wait(tb testing.TB, timeout time.Duration, what string, check func() bool) {
	tb.Helper()
	deadline := time.After(timeout)
	for {
		p.mu.Lock()
		ok, changed, syncErr := check(), p.changed, p.syncErr
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			msg := ""
			if syncErr != nil {
				msg = " (last sync error: " + syncErr.Error() + ")"
			}
			p.mu.Lock()
			for room := range p.gaps {
				msg += " (a sync left out events of " + room.String() + ": its timeline was limited)"
			}
			p.mu.Unlock()
			tb.Fatalf("%s: %s not seen within %v%s", p.User.ID, what, timeout, msg)
		}
	}
}

// WaitFor returns the first event of the room, oldest first, for which
// match reports true, waiting up to timeout for it.
func (p *Person) WaitFor(tb testing.TB, roomID id.RoomID, match func(*event.Event) bool, timeout time.Duration) *event.Event {
	tb.Helper()
	var found *event.Event
	p.wait(tb, timeout, "a matching event in "+roomID.String(), func() bool {
		for _, evt := range p.events[roomID] {
			if match(evt) {
				found = evt
				return true
			}
		}
		return false
	})
	return found
}

// WaitInvite waits for a pending invite from the given user (any user when
// from is empty) — one the person has neither accepted nor declined — and
// returns its room, the oldest first.
func (p *Person) WaitInvite(tb testing.TB, from id.UserID, timeout time.Duration) id.RoomID {
	tb.Helper()
	var room id.RoomID
	p.wait(tb, timeout, "an invite from "+string(from), func() bool {
		for _, inv := range p.invites {
			if inv.pending && (from == "" || inv.from == from) {
				room = inv.room
				return true
			}
		}
		return false
	})
	return room
}

// IsTyping reports whether the user was typing in the room as of the last
// typing notification the person received.
func (p *Person) IsTyping(roomID id.RoomID, userID id.UserID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.typing[roomID][userID]
}

// WaitTyped waits until the user has been seen typing in the room, now or
// at any time since the person started syncing.
func (p *Person) WaitTyped(tb testing.TB, roomID id.RoomID, userID id.UserID, timeout time.Duration) {
	tb.Helper()
	p.wait(tb, timeout, userID.String()+" typing in "+roomID.String(), func() bool {
		return p.typed[roomID][userID]
	})
}

// WaitMembership waits for a membership event of the user in the room's
// timeline with the given membership (join, leave, invite, ban) and
// returns it. The person must be in the room to see it.
func (p *Person) WaitMembership(tb testing.TB, roomID id.RoomID, userID id.UserID, membership event.Membership, timeout time.Duration) *event.Event {
	tb.Helper()
	return p.WaitFor(tb, roomID, func(evt *event.Event) bool {
		if evt.Type != event.StateMember || evt.GetStateKey() != userID.String() {
			return false
		}
		c, ok := evt.Content.Parsed.(*event.MemberEventContent)
		return ok && c.Membership == membership
	}, timeout)
}

// WaitRoomName waits until the room's name satisfies match and returns it.
func (p *Person) WaitRoomName(tb testing.TB, roomID id.RoomID, match func(name string) bool, timeout time.Duration) string {
	tb.Helper()
	var name string
	p.wait(tb, timeout, "a matching name of "+roomID.String(), func() bool {
		name = p.names[roomID]
		return match(name)
	})
	return name
}

// Text returns the text of a message event as a person reads it: the
// latest edit's new content is not applied (use Edited for that), the body
// of an edit event is its new content's body.
func Text(evt *event.Event) string {
	c, ok := evt.Content.Parsed.(*event.MessageEventContent)
	if !ok {
		return ""
	}
	if c.NewContent != nil {
		return c.NewContent.Body
	}
	return c.Body
}

// ReplaceOf returns the event id that evt edits (m.replace), or "".
func ReplaceOf(evt *event.Event) id.EventID {
	c, ok := evt.Content.Parsed.(*event.MessageEventContent)
	if !ok || c.RelatesTo == nil || c.RelatesTo.Type != event.RelReplace {
		return ""
	}
	return c.RelatesTo.EventID
}

// Edited returns the current text of the message original in the room as a
// client shows it: the body of the latest m.replace edit by the same
// sender, or the original's body; "" when the original was not seen.
func (p *Person) Edited(roomID id.RoomID, original id.EventID) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var orig *event.Event
	text := ""
	for _, evt := range p.events[roomID] {
		switch {
		case evt.ID == original:
			orig, text = evt, Text(evt)
		case orig != nil && ReplaceOf(evt) == original && evt.Sender == orig.Sender:
			text = Text(evt)
		}
	}
	return text
}

// IsMatrixError reports whether err is the homeserver's error with this
// errcode (for instance "M_FORBIDDEN").
func IsMatrixError(err error, errcode string) bool {
	var re mautrix.HTTPError
	if errors.As(err, &re) && re.RespError != nil {
		return re.RespError.ErrCode == errcode
	}
	return false
}
