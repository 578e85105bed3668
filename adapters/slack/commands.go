package slack

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/adapters/chatcmd"
	"github.com/parley-chat/parley/adapters/inbound"
	"github.com/parley-chat/parley/adapters/markdown"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Commands. Slack's slash commands carry the channel but not the thread
// they were typed in, so /parley acts only at the channel's level: /parley
// new [title] posts a root message for a new session, /parley help lists
// the commands, and the commands that act on a session say to type them in
// its thread. There, commands are text starting with "!" ("!cancel",
// "!title New name"): "/parley cancel" cannot be typed as text, since
// Slack's composer takes it for the slash command. A top-level "!new
// title" starts a session in that message's thread.
//
// A slash command's reply goes with its acknowledgement, seen only by the
// person who typed it. /parley new is acknowledged once its session is
// stored, like everything else; when its root message must wait for the
// channel's budget (or a 429), that can pass Slack's 3 seconds, and Slack
// then tells the person the command timed out although the session starts.
var (
	threadCommands = chatcmd.Parser{Prefix: "!"}
	slashCommands  = chatcmd.Parser{Prefix: "/parley "}
)

// commands are the commands typed as text in the message base came in;
// top says it was typed at the top level rather than in a thread, where
// new starts a session in that message's own thread.
func (a *Adapter) commands(h core.Handler, base core.Command, top bool) inbound.Commands {
	return inbound.Commands{Parser: threadCommands, Help: helpText, New: func(ctx context.Context, title, agent string) error {
		var err error
		if top {
			_, err = a.startSession(ctx, h, base, title, agent)
		} else {
			_, err = a.newRooted(ctx, h, base, base.Place.Chat, title, agent)
		}
		return err
	}}
}

// helpText is the help, in markdown.
func helpText() string {
	var b strings.Builder
	b.WriteString("**parley**: each session is a thread. Write a message in the channel (or to the bot) to start one, then reply in its thread. ")
	b.WriteString("`" + slashCommands.Usage("new") + "` starts one with a message of its own.\n\nIn a session's thread:\n\n")
	for _, c := range threadCommands.Table() {
		b.WriteString("- `" + threadCommands.Usage(c.Name) + "` — " + c.Help + "\n")
	}
	return b.String()
}

// slashReply is the answer to a slash command, sent with its
// acknowledgement: only the person who typed it sees it.
type slashReply struct {
	ResponseType string `json:"response_type"`
	Text         string `json:"text"`
}

func ephemeral(md string) *slashReply {
	return &slashReply{ResponseType: "ephemeral", Text: markdown.Render(md, markdown.Slack)}
}

// onSlash runs /parley. Its reply (nil for none) goes with the
// acknowledgement; its error means "try again".
func (a *Adapter) onSlash(ctx context.Context, h core.Handler, c slack.SlashCommand) (*slashReply, error) {
	who := core.Actor{ID: c.UserID, Name: c.UserName}
	if !a.authorized(who) {
		a.log.Debug("ignoring a slash command from someone not allowed", "user", c.UserID, "channel", c.ChannelID)
		return nil, nil
	}
	if c.ChannelID != a.opts.Channel && !strings.HasPrefix(c.ChannelID, "D") {
		// Written in mrkdwn: <#C…> links the channel.
		return &slashReply{ResponseType: "ephemeral",
			Text: "parley's sessions live in <#" + a.opts.Channel + ">: use `/parley` there, or in a direct message with the bot."}, nil
	}
	parsed, ok, perr := slashCommands.Parse("/parley " + c.Text)
	switch {
	case perr != nil:
		msg, _ := delivery.UserMessage(perr)
		return ephemeral("⚠️ " + chatcmd.Capitalize(msg)), nil
	case !ok || parsed.Command.Name == "help":
		return ephemeral(helpText()), nil
	case parsed.Command.Name != "new":
		return ephemeral("Type `" + threadCommands.Usage(parsed.Command.Name) + "` in the session's thread: Slack does not tell parley which thread a slash command comes from."), nil
	}
	who.Name = a.userName(ctx, c.UserID)
	base := core.Command{Origin: origin, Actor: who, Place: core.Place{Chat: c.ChannelID}, PlatformID: "slash:" + c.TriggerID}
	title, agent, perr := chatcmd.ParseNew(parsed.Arg)
	if perr == nil && agent != "" {
		check := base
		check.Kind, check.Agent, check.PlatformID = core.CheckAgent, agent, ""
		if _, err := h.Handle(ctx, check); err != nil {
			if !errors.Is(err, core.ErrInvalid) {
				return nil, err
			}
			perr = err
		}
	}
	if perr != nil {
		msg, _ := delivery.UserMessage(perr)
		return ephemeral("⚠️ " + chatcmd.Capitalize(msg)), nil
	}
	id, err := a.newRooted(ctx, h, base, c.ChannelID, title, agent)
	if err != nil || id == "" {
		return nil, err
	}
	return nil, nil // the new root message says it all
}

// newRooted starts a session in the thread of a root message parley posts
// in channel (through the pacer: a post counts against the channel's
// budget). A root already posted for the same command (a retry after the
// handler failed) is used again; if the handler finds the command was
// handled before (a redelivery after a restart), the new root is deleted.
func (a *Adapter) newRooted(ctx context.Context, h core.Handler, base core.Command, channel, title, agent string) (core.SessionID, error) {
	placeholder := title == ""
	if placeholder {
		// The root message needs a title before the session exists.
		title = inbound.PlaceholderTitle(time.Now())
	}
	key := "new:" + base.PlatformID
	ts, err := a.postRoot(ctx, key, channel, core.StatusView{Title: title, Status: core.StatusIdle})
	if err != nil {
		if core.IsPermanent(err) {
			a.input().Notice(ctx, h, base, "⚠️ Could not start a session: "+err.Error())
			return "", nil
		}
		return "", err
	}
	p := core.Place{Chat: channel, Thread: ts}
	a.remember(p, ownerBot)
	cmd := base
	cmd.Kind, cmd.Title, cmd.Placeholder, cmd.Place, cmd.Ref, cmd.PlatformID = core.CreateSession, title, placeholder, p, core.MessageRef{}, key
	cmd.Agent = agent
	res, err := h.Handle(ctx, cmd)
	if ok, serr := a.input().Settle(ctx, h, base, err); !ok {
		return "", serr // the root is used again by the next try
	}
	a.rootPosted.Delete(key)
	if err != nil || res.Duplicate {
		// Refused (told already), or handled before: the root is a stray.
		a.roots.Delete(p)
		if derr := a.deleteStray(ctx, channel, ts); derr != nil {
			a.log.Warn("could not delete a root no session uses", "channel", channel, "ts", ts, "err", derr)
		}
	}
	return res.Session, nil
}

// postRoot posts a session's root message in channel, once per key.
func (a *Adapter) postRoot(ctx context.Context, key, channel string, v core.StatusView) (string, error) {
	if ts, ok := a.rootPosted.Load(key); ok {
		return ts.(string), nil
	}
	var mu sync.Mutex
	var ts string
	run := func(ctx context.Context, _ core.Place) error {
		got, err := a.post(ctx, core.Place{Chat: channel}, payload{Text: rootText(v)}.options(false))
		mu.Lock()
		ts = got
		mu.Unlock()
		return err
	}
	var err error
	if a.opts.Pacer == nil {
		err = run(ctx, core.Place{})
	} else {
		err = a.opts.Pacer.Do(ctx, core.Op{Kind: core.OpSend, Adapter: Name, Place: core.Place{Chat: channel}, Run: run})
	}
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		return "", err
	}
	a.rootPosted.Store(key, ts)
	return ts, nil
}
