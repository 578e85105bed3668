package slack

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Buttons. A question's options are buttons whose value is core's
// ButtonData; a click from an allowed person becomes an Answer command,
// deduplicated by the click's action_ts. Once the handler took it (or found
// the question no longer open: answered elsewhere, or closed), the
// question message is edited to show the outcome in place of its buttons,
// so nobody clicks a dead button; a second click on a question this
// process saw answered (a double click, sent before the buttons went)
// changes nothing, so that the question keeps showing its answer. That edit is made after the
// acknowledgement, through the pacer. A stranger's click changes nothing
// and gets no reply.

// answerTimeout bounds showing an answer, pacing included.
const answerTimeout = 2 * time.Minute

// onAction handles an interactive payload; its error means "try again".
func (a *Adapter) onAction(ctx context.Context, h core.Handler, ic *slack.InteractionCallback) error {
	if ic.Type != slack.InteractionTypeBlockActions {
		return nil
	}
	var act *slack.BlockAction
	for _, b := range ic.ActionCallback.BlockActions {
		if strings.HasPrefix(b.ActionID, answerPrefix) {
			act = b
			break
		}
	}
	if act == nil {
		return nil
	}
	who := core.Actor{ID: ic.User.ID, Name: ic.User.Name}
	if !a.authorized(who) {
		a.log.Debug("ignoring a click from someone not allowed", "user", ic.User.ID)
		return nil
	}
	qid, option, ok := delivery.ParseButtonData(act.Value)
	if !ok {
		a.log.Debug("ignoring a button parley does not know", "value", act.Value)
		return nil
	}
	channel := first(ic.Container.ChannelID, ic.Channel.ID)
	msgTS := first(ic.Container.MessageTs, ic.Message.Timestamp)
	p := core.Place{Chat: channel, Thread: first(ic.Container.ThreadTs, ic.Message.ThreadTimestamp, msgTS)}
	if who.Name == "" {
		who.Name = a.userName(ctx, who.ID)
	}
	cmd := core.Command{Kind: core.Answer, Origin: origin, Actor: who, Place: p,
		PlatformID: "click:" + messageID(channel, msgTS) + ":" + who.ID + ":" + first(act.ActionTs, ic.ActionTs),
		QuestionID: qid, Option: option}
	_, err := h.Handle(ctx, cmd)
	question := messageID(channel, msgTS)
	switch {
	case err == nil:
		a.clicked.add(question)
		a.showAnswer(p, msgTS, ic.Message, "✅ <@"+who.ID+"> chose *"+escapeText(act.Text.Text)+"*")
	case errors.Is(err, core.ErrUnauthorized):
	case a.clicked.has(question):
		// A second click before the buttons went (a double click): the
		// question shows, or is about to show, its answer; keep it.
		a.log.Debug("ignoring a click on a question answered already", "channel", channel, "ts", msgTS, "user", who.ID)
	case errors.Is(err, core.ErrInvalid), errors.Is(err, core.ErrNotFound), errors.Is(err, core.ErrSessionClosed):
		a.showAnswer(p, msgTS, ic.Message, "This question is no longer open.")
	default:
		return err
	}
	return nil
}

// showAnswer edits the question message msgTS at p to show note instead
// of its buttons, in the background: the click is acknowledged first.
func (a *Adapter) showAnswer(p core.Place, msgTS string, q slack.Message, note string) {
	if p.Chat == "" || msgTS == "" {
		return
	}
	a.background(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, answerTimeout)
		defer cancel()
		run := func(ctx context.Context, _ core.Place) error { return a.answered(ctx, p.Chat, msgTS, q, note) }
		var err error
		if a.opts.Pacer == nil {
			err = run(ctx, p)
		} else {
			err = a.opts.Pacer.Do(ctx, core.Op{Kind: core.OpEdit, Adapter: Name, Place: p,
				Key: "answered\x00" + p.Chat + "\x00" + msgTS, Run: run})
		}
		if err != nil {
			a.log.Warn("could not show the answer on the question", "channel", p.Chat, "ts", msgTS, "err", err)
		}
	})
}

// answered is the chat.update that shows note on the question q: its
// blocks without the buttons, and note beneath; as text if Slack refuses
// the blocks it sent itself.
func (a *Adapter) answered(ctx context.Context, channel, ts string, q slack.Message, note string) error {
	var blocks []slack.Block
	for _, b := range q.Blocks.BlockSet {
		if b.BlockType() != slack.MBTAction {
			blocks = append(blocks, b)
		}
	}
	blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, note, false, false)))
	text := q.Text
	if text == "" {
		text = note
	}
	err := a.update(ctx, channel, ts, payload{Text: text, Blocks: blocks}.options(true))
	if hasCode(err, codeInvalidBlocks, codeMsgTooLong) {
		err = a.update(ctx, channel, ts, payload{Text: shorten(text, maxText-len(note)-1) + "\n" + note}.options(true))
	}
	return classify("chat.update", err)
}

// first is the first of ss that is not empty.
func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
