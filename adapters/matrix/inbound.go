package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/chatcmd"
	"github.com/parley-chat/parley/adapters/inbound"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// inContent is what the adapter reads of an event's content.
type inContent struct {
	MsgType  string `json:"msgtype"`
	Body     string `json:"body"`
	FileName string `json:"filename"`
	URL      string `json:"url"`
	// File is set for an encrypted attachment, which the adapter cannot
	// read.
	File json.RawMessage `json:"file"`
	Info *struct {
		MimeType string `json:"mimetype"`
		Size     int64  `json:"size"`
	} `json:"info"`
	RelatesTo *struct {
		RelType   string `json:"rel_type"`
		EventID   string `json:"event_id"`
		Key       string `json:"key"`
		InReplyTo *struct {
			EventID string `json:"event_id"`
		} `json:"m.in_reply_to"`
	} `json:"m.relates_to"`
	// Voice marks an m.audio event as a recorded voice message
	// (MSC3245, which Element sets).
	Voice      json.RawMessage `json:"org.matrix.msc3245.voice"`
	Buttons    []button        `json:"org.parley.buttons"`
	Membership string          `json:"membership"`
	Name       string          `json:"name"`
}

func parseContent(ev *event.Event) inContent {
	var c inContent
	_ = json.Unmarshal(ev.Content.VeryRaw, &c)
	return c
}

// replyTo is the event c replies to, if any.
func (c inContent) replyTo() id.EventID {
	if c.RelatesTo == nil || c.RelatesTo.InReplyTo == nil {
		return ""
	}
	return id.EventID(c.RelatesTo.InReplyTo.EventID)
}

// actor is the person behind a Matrix id. The id is the allow-list's key;
// the name is its localpart, which needs no profile lookup.
func actor(u id.UserID) core.Actor {
	name := u.Localpart()
	if name == "" {
		name = string(u)
	}
	return core.Actor{ID: string(u), Name: name}
}

// authorized asks the allow-list (Options.Authorizer) whether who may
// act, before the adapter does anything for them: joining a room, creating
// one, fetching a file.
func (a *Adapter) authorized(who core.Actor) bool {
	return a.opts.Authorizer.Authorized(core.Origin(Name), who)
}

// parser recognises Matrix's "!" commands.
func parser() chatcmd.Parser { return chatcmd.Parser{Prefix: "!"} }

// onEvent handles one timeline event of a joined room; its error means
// "try again". The bot's own events, notices, people's edits and state
// events other than the encryption switch are not input.
func (a *Adapter) onEvent(ctx context.Context, h core.Handler, ev *event.Event) error {
	a.onState(ev.RoomID, ev)
	if ev.Sender == a.cli.UserID {
		return nil
	}
	switch ev.Type {
	case event.StateEncryption:
		return a.refuseEncrypted(ctx, ev.RoomID, ev.Sender)
	case event.EventMessage:
		return a.onMessage(ctx, h, ev)
	case event.EventReaction:
		return a.onReaction(ctx, h, ev)
	}
	return nil
}

func (a *Adapter) onMessage(ctx context.Context, h core.Handler, ev *event.Event) error {
	c := parseContent(ev)
	switch {
	case c.MsgType == string(event.MsgNotice):
		return nil // other bots' output, by convention never answered
	case c.RelatesTo != nil && c.RelatesTo.RelType == string(event.RelReplace):
		// Decision, as on the other platforms: an edit is not sent
		// again. The agent has the original and may be acting on it; a
		// changed mind is a new message.
		a.log.Debug("ignoring an edited message", "room", ev.RoomID, "event", ev.ID)
		return nil
	}
	who := actor(ev.Sender)
	if !a.authorized(who) {
		a.log.Debug("ignoring a message from someone not allowed", "user", ev.Sender, "room", ev.RoomID)
		return nil
	}
	room := ev.RoomID
	base := core.Command{Origin: core.Origin(Name), Actor: who, Place: place(room), PlatformID: string(ev.ID), Ref: ref(room, ev.ID)}
	text := c.Body
	if c.replyTo() != "" {
		text = event.TrimReplyFallbackText(text)
	}
	switch event.MessageType(c.MsgType) {
	case event.MsgText, event.MsgEmote:
	case event.MsgFile, event.MsgImage, event.MsgAudio, event.MsgVideo:
		return a.onFile(ctx, h, base, c)
	default:
		return nil // locations, stickers, polls: nothing for the agent
	}
	newRoom := func(ctx context.Context, title, agent string) error { return a.newRoom(ctx, h, base, title, agent) }
	if ok, err := a.input().Command(ctx, h, base, inbound.Commands{Parser: parser(), New: newRoom}, text); ok {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return nil
	}
	if r := c.replyTo(); r != "" {
		target, err := a.cli.GetEvent(ctx, room, r)
		switch {
		case err != nil && (errors.Is(err, mautrix.MNotFound) || forbidden(err)):
			// The message replied to is gone: the reply stands alone.
		case err != nil:
			return classify("read the message replied to", opOther, err, false)
		default:
			tc := parseContent(target)
			if target.Sender == a.cli.UserID && len(tc.Buttons) > 0 {
				return a.answer(ctx, h, base, tc.Buttons, text, 0)
			}
			text = withQuote(tc.Body, text)
		}
	}
	cmd := base
	cmd.Kind, cmd.Text = core.SendMessage, text
	_, err := a.input().Submit(ctx, h, base, cmd)
	return err
}

// withQuote prefixes a reply with the start of the message it answers, so
// the agent knows what "yes, that one" refers to.
func withQuote(quoted, text string) string {
	quoted = event.TrimReplyFallbackText(quoted)
	quoted, _, _ = strings.Cut(strings.TrimSpace(quoted), "\n")
	if quoted == "" {
		return text
	}
	return "> " + shorten(quoted, 200) + "\n\n" + text
}

// onReaction answers a question with the option whose number emoji a
// person reacted with. Other reactions are not input.
func (a *Adapter) onReaction(ctx context.Context, h core.Handler, ev *event.Event) error {
	c := parseContent(ev)
	if c.RelatesTo == nil || c.RelatesTo.RelType != string(event.RelAnnotation) {
		return nil
	}
	n := emojiNumber(c.RelatesTo.Key)
	if n == 0 {
		return nil
	}
	who := actor(ev.Sender)
	if !a.authorized(who) {
		return nil
	}
	target, err := a.cli.GetEvent(ctx, ev.RoomID, id.EventID(c.RelatesTo.EventID))
	switch {
	case err != nil && (errors.Is(err, mautrix.MNotFound) || forbidden(err)):
		return nil
	case err != nil:
		return classify("read the message reacted to", opOther, err, false)
	}
	tc := parseContent(target)
	if target.Sender != a.cli.UserID || len(tc.Buttons) == 0 {
		return nil
	}
	base := core.Command{Origin: core.Origin(Name), Actor: who, Place: place(ev.RoomID), PlatformID: string(ev.ID), Ref: ref(ev.RoomID, ev.ID)}
	return a.answer(ctx, h, base, tc.Buttons, "", n)
}

// emojiNumber is the option a number emoji stands for (0 when it is not
// one), with or without the emoji variation selector.
func emojiNumber(key string) int {
	key = strings.ReplaceAll(key, "\ufe0f", "")
	for i, e := range numberEmoji {
		if key == strings.ReplaceAll(e, "\ufe0f", "") {
			return i + 1
		}
	}
	return 0
}

// answer answers the question whose buttons are given: option n when n is
// set, else the option text names (its number or its label), else text as
// a free answer.
func (a *Adapter) answer(ctx context.Context, h core.Handler, base core.Command, buttons []button, text string, n int) error {
	qid, _, ok := delivery.ParseButtonData(buttons[0].Data)
	if !ok {
		return nil
	}
	if n == 0 {
		t := strings.TrimSpace(text)
		if v, err := strconv.Atoi(t); err == nil && v >= 1 && v <= len(buttons) {
			n = v
		}
		for i, b := range buttons {
			if n == 0 && strings.EqualFold(strings.TrimSpace(b.Label), t) {
				n = i + 1
			}
		}
	}
	if n > len(buttons) {
		return nil
	}
	cmd := base
	cmd.Kind, cmd.QuestionID = core.Answer, qid
	if n > 0 {
		_, cmd.Option, _ = delivery.ParseButtonData(buttons[n-1].Data)
	} else {
		cmd.Text = text
	}
	_, err := a.input().Submit(ctx, h, base, cmd)
	return err
}

// newRoom starts a session for !new (run with agent, "" for the default)
// in a room of its own, with the person invited; the session lives there, not where the command was typed. The
// room made for the command is kept in the store under the command's
// event id before the session is created, so a redelivered !new finds it
// instead of creating a second room.
func (a *Adapter) newRoom(ctx context.Context, h core.Handler, base core.Command, title, agent string) error {
	placeholder := title == ""
	if placeholder {
		// The room needs a name before the session exists.
		title = inbound.PlaceholderTitle(time.Now())
	}
	key := "matrix.new\x00" + base.PlatformID
	made, err := a.opts.Cursors.Cursor(ctx, key)
	if err != nil {
		return err
	}
	room := id.RoomID(made)
	if room == "" {
		create := func(ctx context.Context, _ core.Place) error {
			r, err := a.createRoom(ctx, roomName(core.StatusView{Title: title, Status: core.StatusIdle}), "parley session", []id.UserID{id.UserID(base.Actor.ID)})
			room = r
			return err
		}
		if a.opts.Pacer != nil {
			err = a.opts.Pacer.Do(ctx, core.Op{Kind: core.OpSend, Adapter: Name, Run: create})
		} else {
			err = create(ctx, core.Place{})
		}
		if err != nil {
			if core.IsPermanent(err) {
				a.input().Notice(ctx, h, base, "⚠️ Could not create a room for the session: "+err.Error())
				return nil
			}
			return err
		}
		if err := a.opts.Cursors.SetCursor(ctx, key, string(room)); err != nil {
			return err
		}
	}
	cmd := base
	cmd.Kind, cmd.Title, cmd.Placeholder, cmd.Ref, cmd.Place = core.CreateSession, title, placeholder, core.MessageRef{}, place(room)
	cmd.Agent = agent
	_, err = a.input().Submit(ctx, h, base, cmd)
	return err
}

// input is how the adapter deals with people's input, in Matrix's words:
// the commands that help after a refusal start with "!".
func (a *Adapter) input() inbound.Input {
	return inbound.Input{Log: a.log, PlaceKey: "room", AfterClosed: "!new starts another one.", NoSession: "!new starts one."}
}

// onInvite follows an allowed person's invite (the room becomes a session
// titled by its name) and declines anyone else's, starting nothing.
func (a *Adapter) onInvite(ctx context.Context, h core.Handler, room id.RoomID, state []*event.Event) error {
	var inviter id.UserID
	var name, inviteID string
	encrypted := false
	for _, ev := range state {
		switch {
		case ev.Type == event.StateMember && ev.StateKey != nil && *ev.StateKey == string(a.cli.UserID):
			inviter = ev.Sender
			inviteID = string(ev.ID)
			if inviteID == "" && ev.Timestamp != 0 {
				inviteID = strconv.FormatInt(ev.Timestamp, 10)
			}
		case ev.Type == event.StateRoomName:
			name = parseContent(ev).Name
		case ev.Type == event.StateEncryption:
			encrypted = true
		}
	}
	if inviter == "" {
		return nil
	}
	who := actor(inviter)
	if !a.authorized(who) {
		a.log.Info("declining an invite from someone not allowed", "room", room, "user", inviter)
		if _, err := a.cli.LeaveRoom(ctx, room); err != nil {
			if err := classify("decline an invite", opOther, err, false); !core.IsPermanent(err) {
				return err
			}
		}
		return nil
	}
	if _, err := a.cli.JoinRoomByID(ctx, room); err != nil {
		err = classify("join "+string(room), opOther, err, false)
		if core.IsPermanent(err) {
			a.log.Warn("could not join the room an allowed person invited the bot to", "room", room, "user", inviter, "err", err)
			return nil
		}
		return err
	}
	if !encrypted {
		var enc event.EncryptionEventContent
		err := a.cli.StateEvent(ctx, room, event.StateEncryption, "", &enc)
		switch {
		case err == nil:
			encrypted = enc.Algorithm != ""
		case !errors.Is(err, mautrix.MNotFound):
			return classify("read the room's encryption", opOther, err, false)
		}
	}
	if encrypted {
		return a.refuseEncrypted(ctx, room, inviter)
	}
	cmd := core.Command{Kind: core.CreateSession, Origin: core.Origin(Name), Actor: who, Place: place(room), Title: name,
		PlatformID: "invite:" + string(room) + ":" + inviteID}
	_, err := a.input().Submit(ctx, h, cmd, cmd)
	return err
}

// refuseEncrypted says in an encrypted room, in the clear (the only way
// the adapter can speak), that encrypted rooms are not supported, and
// leaves it: the bot cannot read what people write there, and must not
// look as if it did.
func (a *Adapter) refuseEncrypted(ctx context.Context, room id.RoomID, who id.UserID) error {
	a.log.Warn("encrypted rooms are not supported yet; leaving the room", "room", room, "user", who)
	b, _ := encode(content(core.OutMessage{Text: "🔒 This room is end-to-end encrypted, and parley does not support encrypted rooms yet: " +
		"it cannot read what is written here. Invite it to an unencrypted room, or send !new in a room shared with it.", Silent: true}))
	if _, err := a.sendRaw(ctx, room, event.EventMessage, txnID("e2ee\x00"+string(room)), b); err != nil {
		a.log.Warn("could not tell the encrypted room that it is not supported", "room", room, "err", err)
	}
	if _, err := a.cli.LeaveRoom(ctx, room); err != nil {
		if err := classify("leave the encrypted room", opOther, err, false); !core.IsPermanent(err) {
			return err
		}
	}
	return nil
}
