package inbound

import (
	"context"
	"errors"
	"log/slog"

	"github.com/parley-chat/parley/adapters/chatcmd"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Input is one adapter's way with people's input: the words its platform
// needs in what people are told, and where its log lines point. It is a
// value, only read, safe for concurrent use.
type Input struct {
	// Log receives the notices that could not be stored; nil discards
	// them.
	Log *slog.Logger
	// PlaceKey is the log attribute naming a command's Place.Chat:
	// "chat" on Telegram, "channel" on Slack, "room" on Matrix.
	PlaceKey string
	// AfterClosed and NoSession say, in the platform's words, how to
	// start a session after a refusal for a closed session or for a
	// place without one ("/new starts another one.", "/new starts
	// one."); see chatcmd.Refusal.
	AfterClosed, NoSession string
	// CapitalizeErrors writes the parser's refusals of a mistyped
	// command as sentences ("⚠️ Unknown command …", Slack's way) rather
	// than as the parser words them ("⚠️ unknown command …").
	CapitalizeErrors bool
}

// Notice tells the person who caused base something (feedback, help, a
// refusal) through h, as a notice deleted at the next one
// (core.LifetimeNextNotice). Where no session lives, core addresses it to
// base's place. It says nothing to people the allow-list refuses, and a
// notice h could not store is logged, not retried.
func (in Input) Notice(ctx context.Context, h core.Handler, base core.Command, text string) {
	in.NoticeFor(ctx, h, base, text, core.LifetimeNextNotice)
}

// NoticeFor is Notice with the cleanup lifetime lt: a voice note's
// transcription shown to the person lives until their next input
// (core.LifetimeNextInput).
func (in Input) NoticeFor(ctx context.Context, h core.Handler, base core.Command, text string, lt core.Lifetime) {
	cmd := base
	cmd.Kind, cmd.Text, cmd.Lifetime = core.Notice, text, lt
	// The notice is not the person's message: no ledger entry for it, no
	// dedup key (a redelivery tells them again), nothing of what base
	// carried for another kind.
	cmd.Ref, cmd.PlatformID, cmd.Title, cmd.Placeholder, cmd.Attachments = core.MessageRef{}, "", "", false, nil
	if _, err := h.Handle(ctx, cmd); err != nil && !errors.Is(err, core.ErrUnauthorized) && in.Log != nil {
		in.Log.Warn("notice not stored", in.PlaceKey, base.Place.Chat, "err", err)
	}
}

// Settle reports whether h's answer err to input base settles it: nil, or
// a refusal retrying cannot change (chatcmd.Refusal), which it tells the
// person in h's words with the platform's hints. For any other error it
// reports false and err: the input was not stored, and the platform update
// must come again rather than be acknowledged. For a settled input the
// returned error is nil.
func (in Input) Settle(ctx context.Context, h core.Handler, base core.Command, err error) (bool, error) {
	notice, ok := chatcmd.Refusal(err, in.AfterClosed, in.NoSession)
	if notice != "" {
		in.Notice(ctx, h, base, notice)
	}
	if !ok {
		return false, err
	}
	return true, nil
}

// Submit hands cmd, made from the person's input base, to h and settles
// the answer (Settle). Its error means "try again"; the result is h's.
func (in Input) Submit(ctx context.Context, h core.Handler, base, cmd core.Command) (core.Result, error) {
	res, err := h.Handle(ctx, cmd)
	_, err = in.Settle(ctx, h, base, err)
	return res, err
}

// NewArgs reads /new's argument arg (chatcmd.ParseNew) typed in base:
// the title, and the agent, which the Handler is asked about
// (core.CheckAgent) before the platform makes a place for the session.
// ok is false when the person was told it will not do (an unknown agent,
// a flag without a name); err means "try again".
func (in Input) NewArgs(ctx context.Context, h core.Handler, base core.Command, arg string) (title, agent string, ok bool, err error) {
	title, agent, perr := chatcmd.ParseNew(arg)
	if perr != nil {
		msg, _ := delivery.UserMessage(perr)
		in.Notice(ctx, h, base, "⚠️ "+msg)
		return "", "", false, nil
	}
	if agent == "" {
		return title, "", true, nil
	}
	check := base
	check.Kind, check.Agent, check.Text, check.Ref, check.PlatformID = core.CheckAgent, agent, "", core.MessageRef{}, ""
	if _, err := h.Handle(ctx, check); err != nil {
		// A refusal is told (and settles the input); anything else is
		// tried again.
		_, err = in.Settle(ctx, h, base, err)
		return "", "", false, err
	}
	return title, agent, true, nil
}

// Commands is how an adapter answers the commands people type as text.
type Commands struct {
	// Parser recognises them, with the platform's prefix.
	Parser chatcmd.Parser
	// Help is the answer to help; nil answers "parley commands:" and
	// Parser's list.
	Help func() string
	// New starts a session titled title ("" for none), run with the
	// agent named agent ("" for the default), where the platform makes
	// it: a forum topic, a thread, a room. Its error means "try again".
	// The agent's name was checked already (NewArgs).
	New func(ctx context.Context, title, agent string) error
}

// Command runs text as a command if c.Parser recognises one there, and
// reports whether it did; base is the person's input the text came in.
// A mistyped command is answered with a notice saying how to type it.
// help is answered with a notice, new by c.New, status by a
// core.StatusQuery whose answer core sends as a notice, and the other
// commands become their core.Command (chatcmd.Parsed.Build). Its error
// means "try again".
func (in Input) Command(ctx context.Context, h core.Handler, base core.Command, c Commands, text string) (bool, error) {
	p, ok, perr := c.Parser.Parse(text)
	if !ok {
		return false, nil
	}
	if perr != nil {
		msg, _ := delivery.UserMessage(perr)
		if in.CapitalizeErrors {
			msg = chatcmd.Capitalize(msg)
		}
		in.Notice(ctx, h, base, "⚠️ "+msg)
		return true, nil
	}
	switch p.Command.Name {
	case "help":
		help := "parley commands:\n" + c.Parser.Help()
		if c.Help != nil {
			help = c.Help()
		}
		in.Notice(ctx, h, base, help)
		return true, nil
	case "new":
		title, agent, ok, err := in.NewArgs(ctx, h, base, p.Arg)
		if !ok {
			return true, err
		}
		return true, c.New(ctx, title, agent)
	case "status":
		cmd := base
		cmd.Kind = core.StatusQuery
		_, err := in.Submit(ctx, h, base, cmd)
		return true, err
	}
	cmd, ok := p.Build(base)
	if !ok {
		return true, nil
	}
	_, err := in.Submit(ctx, h, base, cmd)
	return true, err
}
