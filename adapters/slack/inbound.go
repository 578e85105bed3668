package slack

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/parley-chat/parley/adapters/inbound"
	"github.com/parley-chat/parley/core"
)

// origin is the adapter's origin.
const origin = core.Origin(Name)

// messageID is the dedup key of a Slack message: its channel and ts. A
// redelivered envelope (Slack's retry, with a new envelope_id) carries the
// same message and is recognised by it.
func messageID(channel, ts string) string { return channel + ":" + ts }

// me is the bot's identity, once Check learnt it.
func (a *Adapter) me() identity {
	if id := a.self.Load(); id != nil {
		return *id
	}
	return identity{}
}

// onEvent handles one Events API event; its error means "try again".
func (a *Adapter) onEvent(ctx context.Context, h core.Handler, ev slackevents.EventsAPIEvent) error {
	if ev.Type != slackevents.CallbackEvent {
		return nil
	}
	// app_mention is not handled: the message events of the channel carry
	// the same messages.
	if m, ok := ev.InnerEvent.Data.(*slackevents.MessageEvent); ok {
		return a.onMessage(ctx, h, m)
	}
	return nil
}

// people are the message subtypes that are a person writing; the others
// (joins, topic changes, bot messages, edits, deletions, …) are not input.
var people = map[string]bool{"": true, "file_share": true, "thread_broadcast": true, "me_message": true}

// skip says why a message event is not input, or "" when it is.
func (a *Adapter) skip(m *slackevents.MessageEvent) string {
	me := a.me()
	switch {
	case m.SubType == "message_changed":
		// Decision: an edit is not sent again. The agent has the original
		// and may be acting on it; a changed mind is a new message.
		return "an edited message"
	case m.SubType == "message_deleted":
		// Deleting a message does not take it back from the agent.
		return "a deleted message"
	case !people[m.SubType]:
		return "subtype " + m.SubType
	case m.BotID != "":
		return "a bot's message"
	case m.User == "" || (me.UserID != "" && m.User == me.UserID):
		return "not a person's message"
	case m.Channel != a.opts.Channel && !isDM(m):
		return "another channel"
	}
	return ""
}

// isDM reports whether m is in a direct message with the bot (whose
// channel ids start with D).
func isDM(m *slackevents.MessageEvent) bool {
	return m.ChannelType == slackevents.ChannelTypeIM || m.ChannelType == "" && strings.HasPrefix(m.Channel, "D")
}

// authorized asks the allow-list (Options.Authorizer), before anything is
// fetched, created or said for the actor.
func (a *Adapter) authorized(who core.Actor) bool {
	return a.opts.Authorizer.Authorized(origin, who)
}

// onMessage turns a person's message into commands. A top-level message
// (in the channel or a direct message with the bot) starts a session
// whose conversation is its thread, titled by its first line, and is the
// session's first message; a reply goes to the thread's session (core
// starts one there when none lives in it yet). Text starting with "!" is
// a command (see commands.go).
func (a *Adapter) onMessage(ctx context.Context, h core.Handler, m *slackevents.MessageEvent) error {
	if why := a.skip(m); why != "" {
		a.log.Debug("ignoring a message", "why", why, "channel", m.Channel, "ts", m.TimeStamp)
		return nil
	}
	who := core.Actor{ID: m.User}
	if !a.authorized(who) {
		a.log.Debug("ignoring a message from someone not allowed", "user", m.User, "channel", m.Channel)
		if isDM(m) && a.pairs() {
			// With pairing on, the handler answers with a one-time code
			// for the operator, in the message's thread; otherwise it
			// refuses silently. The channel never hears a word.
			who.Name = a.userName(ctx, m.User)
			root := cmp.Or(m.ThreadTimeStamp, m.TimeStamp)
			_, err := h.Handle(ctx, core.Command{Kind: core.Pair, Origin: origin, Actor: who, Place: core.Place{Chat: m.Channel, Thread: root}})
			if err != nil && !errors.Is(err, core.ErrUnauthorized) && !errors.Is(err, core.ErrInvalid) {
				return err
			}
		}
		return nil
	}
	who.Name = a.userName(ctx, m.User)
	top := m.ThreadTimeStamp == "" || m.ThreadTimeStamp == m.TimeStamp
	root := m.ThreadTimeStamp
	if top {
		root = m.TimeStamp
	}
	p := core.Place{Chat: m.Channel, Thread: root}
	a.heard(p, m.User)
	base := core.Command{Origin: origin, Actor: who, Place: p, PlatformID: messageID(m.Channel, m.TimeStamp), Ref: ref(p, m.TimeStamp)}
	text := fromSlack(m.Text, a.me().UserID, a.cachedName)
	if ok, err := a.input().Command(ctx, h, base, a.commands(h, base, top), text); ok {
		return err
	}
	var files []slack.File
	if m.Message != nil {
		files = m.Message.Files
	}
	if strings.TrimSpace(text) == "" && len(files) == 0 {
		return nil
	}
	if top {
		id, err := a.startSession(ctx, h, base, titleOf(text), "")
		if err != nil || id == "" {
			return err
		}
		base.Session = id
	}
	if len(files) > 0 {
		return a.onFiles(ctx, h, base, files, text)
	}
	cmd := base
	cmd.Kind, cmd.Text = core.SendMessage, text
	_, err := a.input().Submit(ctx, h, base, cmd)
	return err
}

// startSession starts a session in the thread of the person's top-level
// message base came from, which is its root. Its dedup key is derived from
// the message's, so a redelivery starts nothing new.
func (a *Adapter) startSession(ctx context.Context, h core.Handler, base core.Command, title, agent string) (core.SessionID, error) {
	cmd := base
	cmd.Kind, cmd.Title, cmd.Agent, cmd.Ref, cmd.PlatformID = core.CreateSession, title, agent, core.MessageRef{}, "new:"+base.PlatformID
	// Known before Handle: the new session's status may be shown (by the
	// dispatcher, on the events Handle publishes) before Handle returns,
	// and without it ShowStatus would have to probe the root.
	a.remember(base.Place, ownerPerson)
	res, err := h.Handle(ctx, cmd)
	if err != nil {
		a.roots.Delete(base.Place)
	}
	_, err = a.input().Settle(ctx, h, base, err)
	return res.Session, err
}

// input is how the adapter deals with people's input, in Slack's words:
// after a refusal, how to start a session (startHint); a mistyped command
// is told as a sentence.
func (a *Adapter) input() inbound.Input {
	return inbound.Input{Log: a.log, PlaceKey: "channel", AfterClosed: startHint, NoSession: startHint, CapitalizeErrors: true}
}

// startHint says how to start a session.
const startHint = "Write a new message in the channel (not in a thread) to start a session, or use `/parley new`."

// userName is a member's display name, from users.info, cached. It is
// asked only for allowed people, bounded in time (the envelope waits for
// it), and "" when Slack does not answer.
func (a *Adapter) userName(ctx context.Context, id string) string {
	if name := a.cachedName(id); name != "" {
		return name
	}
	ctx, cancel := context.WithTimeout(ctx, nameTimeout)
	defer cancel()
	u, err := a.api.GetUserInfoContext(ctx, id)
	if err != nil {
		a.log.Debug("users.info", "user", id, "err", err)
		return ""
	}
	name := u.Profile.DisplayName
	if name == "" {
		name = u.RealName
	}
	if name == "" {
		name = u.Name
	}
	if name != "" {
		a.names.Store(id, name)
	}
	return name
}

// nameTimeout bounds the users.info call in front of an acknowledgement.
const nameTimeout = 1500 * time.Millisecond

// cachedName is a member's name if known, without calling Slack.
func (a *Adapter) cachedName(id string) string {
	if v, ok := a.names.Load(id); ok {
		return v.(string)
	}
	return ""
}

// pairs reports whether a stranger's private message is answered with a
// pairing code.
func (a *Adapter) pairs() bool { return a.opts.Pairer != nil && a.opts.Pairer.Pairing() }
