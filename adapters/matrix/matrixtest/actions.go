package matrixtest

import (
	"context"
	"strings"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// The person's actions: each is one client-API call with a deadline that
// fails the test when the homeserver refuses it. To observe a refusal, call
// the same method on Person.Client instead.

func (p *Person) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

func (p *Person) check(tb testing.TB, what string, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("%s: %s: %v", p.User.ID, what, err)
	}
}

// SendContent sends a message event of the given type and returns its id.
func (p *Person) SendContent(tb testing.TB, roomID id.RoomID, typ event.Type, content any) id.EventID {
	tb.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	resp, err := p.Client.SendMessageEvent(ctx, roomID, typ, content)
	p.check(tb, "send "+typ.Type+" to "+roomID.String(), err)
	return resp.EventID
}

// Send writes a plain m.text message.
func (p *Person) Send(tb testing.TB, roomID id.RoomID, text string) id.EventID {
	tb.Helper()
	return p.SendContent(tb, roomID, event.EventMessage, &event.MessageEventContent{MsgType: event.MsgText, Body: text})
}

// Reply writes an m.text message replying to the event to (m.in_reply_to,
// without a quoted fallback, as current clients send).
func (p *Person) Reply(tb testing.TB, roomID id.RoomID, to id.EventID, text string) id.EventID {
	tb.Helper()
	c := &event.MessageEventContent{MsgType: event.MsgText, Body: text}
	c.RelatesTo = (&event.RelatesTo{}).SetReplyTo(to)
	return p.SendContent(tb, roomID, event.EventMessage, c)
}

// Edit replaces the text of the person's own message original (m.replace,
// with the "* " fallback body clients send).
func (p *Person) Edit(tb testing.TB, roomID id.RoomID, original id.EventID, text string) id.EventID {
	tb.Helper()
	c := &event.MessageEventContent{MsgType: event.MsgText, Body: text}
	c.SetEdit(original)
	return p.SendContent(tb, roomID, event.EventMessage, c)
}

// React annotates the event with key (an emoji such as "1️⃣").
func (p *Person) React(tb testing.TB, roomID id.RoomID, eventID id.EventID, key string) id.EventID {
	tb.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	resp, err := p.Client.SendReaction(ctx, roomID, eventID, key)
	p.check(tb, "react to "+eventID.String(), err)
	return resp.EventID
}

// Redact deletes an event (the person's own, or another's where the
// person's power level allows) and returns the redaction's id.
func (p *Person) Redact(tb testing.TB, roomID id.RoomID, eventID id.EventID) id.EventID {
	tb.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	resp, err := p.Client.RedactEvent(ctx, roomID, eventID)
	p.check(tb, "redact "+eventID.String(), err)
	return resp.EventID
}

// UploadFile uploads data and posts it in the room as m.image, m.audio or
// m.file according to contentType, with name as its body and file name.
func (p *Person) UploadFile(tb testing.TB, roomID id.RoomID, name, contentType string, data []byte) id.EventID {
	tb.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	up, err := p.Client.UploadBytesWithName(ctx, data, contentType, name)
	p.check(tb, "upload "+name, err)
	msgType := event.MsgFile
	switch {
	case strings.HasPrefix(contentType, "image/"):
		msgType = event.MsgImage
	case strings.HasPrefix(contentType, "audio/"):
		msgType = event.MsgAudio
	}
	return p.SendContent(tb, roomID, event.EventMessage, &event.MessageEventContent{
		MsgType:  msgType,
		Body:     name,
		FileName: name,
		URL:      up.ContentURI.CUString(),
		Info:     &event.FileInfo{MimeType: contentType, Size: len(data)},
	})
}

// CreateRoom creates a room with the given name (preset private_chat: the
// creator has power level 100, invitees 0) and invites the users.
func (p *Person) CreateRoom(tb testing.TB, name string, invite ...id.UserID) id.RoomID {
	tb.Helper()
	return p.CreateRoomWith(tb, &mautrix.ReqCreateRoom{
		Name:   name,
		Preset: "private_chat",
		Invite: invite,
	})
}

// CreateRoomWith creates a room as req says — for instance with an
// m.room.encryption initial state, as clients create encrypted rooms.
func (p *Person) CreateRoomWith(tb testing.TB, req *mautrix.ReqCreateRoom) id.RoomID {
	tb.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	resp, err := p.Client.CreateRoom(ctx, req)
	p.check(tb, "create room "+req.Name, err)
	return resp.RoomID
}

// SetPowerLevel gives the user the power level in the room (50 lets a user
// redact others' events under the default power levels).
func (p *Person) SetPowerLevel(tb testing.TB, roomID id.RoomID, userID id.UserID, level int) {
	tb.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	var pl event.PowerLevelsEventContent
	p.check(tb, "read power levels of "+roomID.String(),
		p.Client.StateEvent(ctx, roomID, event.StatePowerLevels, "", &pl))
	pl.SetUserLevel(userID, level)
	_, err := p.Client.SendStateEvent(ctx, roomID, event.StatePowerLevels, "", &pl)
	p.check(tb, "set power level of "+userID.String(), err)
}

// Typing tells the room that the person is typing, or stopped.
func (p *Person) Typing(tb testing.TB, roomID id.RoomID, typing bool) {
	tb.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	_, err := p.Client.UserTyping(ctx, roomID, typing, callTimeout)
	p.check(tb, "typing in "+roomID.String(), err)
}

// SetRoomName renames the room (an m.room.name state event).
func (p *Person) SetRoomName(tb testing.TB, roomID id.RoomID, name string) {
	tb.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	_, err := p.Client.SendStateEvent(ctx, roomID, event.StateRoomName, "", &event.RoomNameEventContent{Name: name})
	p.check(tb, "rename "+roomID.String(), err)
}

// Invite invites the user to the room.
func (p *Person) Invite(tb testing.TB, roomID id.RoomID, userID id.UserID) {
	tb.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	_, err := p.Client.InviteUser(ctx, roomID, &mautrix.ReqInviteUser{UserID: userID})
	p.check(tb, "invite "+userID.String(), err)
}

// Kick removes the user from the room.
func (p *Person) Kick(tb testing.TB, roomID id.RoomID, userID id.UserID) {
	tb.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	_, err := p.Client.KickUser(ctx, roomID, &mautrix.ReqKickUser{UserID: userID})
	p.check(tb, "kick "+userID.String(), err)
}

// Join joins the room (accepting an invite).
func (p *Person) Join(tb testing.TB, roomID id.RoomID) {
	tb.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	_, err := p.Client.JoinRoomByID(ctx, roomID)
	p.check(tb, "join "+roomID.String(), err)
}

// Leave leaves the room (or declines an invite).
func (p *Person) Leave(tb testing.TB, roomID id.RoomID) {
	tb.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	_, err := p.Client.LeaveRoom(ctx, roomID)
	p.check(tb, "leave "+roomID.String(), err)
}
