package slack

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/core"
)

// filePrefix marks a reference to a file parley uploaded: Slack answers an
// upload with the file's id, not the ts of the message that shares it.
const filePrefix = "file:"

// Send implements core.Adapter: chat.postMessage in the place's thread.
// When Slack refuses the blocks or their length, the message goes once
// more as text only (renderText) before the refusal counts.
//
// A reply whose thread root was deleted (and had no other replies) is not
// refused by Slack: it is posted at the channel's top level instead. The
// answer's message then has no thread_ts; Send deletes that stray message
// and reports core.ErrThreadGone, so core binds the session anew.
func (a *Adapter) Send(ctx context.Context, p core.Place, m core.OutMessage) (core.MessageRef, error) {
	if p.Chat == "" {
		return core.MessageRef{}, core.Permanent(fmt.Errorf("slack: send: no channel in place %+v", p))
	}
	pl, err := fit(m)
	if err != nil {
		return core.MessageRef{}, err
	}
	if ts, ok, err := a.startStream(ctx, p, m); ok || err != nil {
		return ref(p, ts), err
	}
	if m.Kind != core.KindOutput && m.Kind != core.KindProgress {
		// The turn's answer, question or "done" follows its output; the
		// tool progress, shown while the output streams, does not end it.
		a.endStreams(ctx, p)
	}
	ts, err := a.post(ctx, p, pl.options(false))
	if len(pl.Blocks) > 0 && hasCode(err, codeInvalidBlocks, codeMsgTooLong) {
		a.log.Warn("Slack refused the message's blocks; sending it as text", "channel", p.Chat, "err", err)
		ts, err = a.post(ctx, p, renderText(m).options(false))
	}
	if err != nil {
		return core.MessageRef{}, err
	}
	return ref(p, ts), nil
}

// fit is how m goes to Slack: its markdown in a markdown block when it
// fits one (maxMarkdown, which core's MaxLength keeps it within), else as
// Slack's mrkdwn text, which takes up to 40,000 characters. A message too
// long for that too is refused for good, never cut: core splits what it
// sends, so only a caller that ignores MaxLength gets here.
func fit(m core.OutMessage) (payload, error) {
	if len(m.Text) <= maxMarkdown {
		return render(m), nil
	}
	text := mrkdwnText(m)
	if len(text) > maxText {
		return payload{}, core.Permanent(fmt.Errorf("slack: a message of %d bytes is more than Slack takes (%d characters)", len(text), maxText))
	}
	return payload{Text: text}, nil
}

// post posts at p and checks that a reply landed in its thread. With
// streaming on it keeps to the channel's one post a second by asking the
// outbox (see streamLimits).
func (a *Adapter) post(ctx context.Context, p core.Place, opts []slack.MsgOption) (string, error) {
	if p.Thread != "" {
		opts = append(opts, slack.MsgOptionTS(p.Thread))
	}
	if wait := a.pace(p, "chat.postMessage"); wait > 0 {
		return "", spent("chat.postMessage", wait)
	}
	_, ts, msg, err := a.api.PostMessageWithResponseContext(ctx, p.Chat, opts...)
	if err != nil {
		return "", classify("chat.postMessage", err)
	}
	if p.Thread != "" && unthreaded(msg) {
		a.log.Info("the thread's root is gone: Slack posted the reply at the top level; deleting it", "channel", p.Chat, "thread", p.Thread)
		if derr := a.deleteStray(ctx, p.Chat, ts); derr != nil {
			a.log.Warn("could not delete the stray top-level message", "channel", p.Chat, "ts", ts, "err", derr)
		}
		return "", fmt.Errorf("slack: chat.postMessage: thread %s: %w", p.Thread, core.ErrThreadGone)
	}
	return ts, nil
}

// strayTimeout bounds deleting a message parley posted by mistake.
const strayTimeout = 10 * time.Second

// deleteStray deletes a message parley just posted by mistake, even when
// the call that posted it ran out of time.
func (a *Adapter) deleteStray(ctx context.Context, channel, ts string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), strayTimeout)
	defer cancel()
	_, _, err := a.api.DeleteMessageContext(ctx, channel, ts)
	return err
}

// unthreaded reports whether Slack's answer to a reply shows a message
// outside any thread. An answer without the message object says nothing.
func unthreaded(m slack.Message) bool {
	return m.Timestamp != "" && m.ThreadTimestamp == ""
}

// Edit implements core.Editor: chat.update, with the same second try as
// Send. Slack does not report an unchanged message, so this never returns
// core.ErrNotModified.
func (a *Adapter) Edit(ctx context.Context, r core.MessageRef, m core.OutMessage) error {
	if strings.HasPrefix(r.ID, filePrefix) {
		return core.Permanent(fmt.Errorf("slack: edit %s: a file cannot be edited: %w", r.ID, core.ErrUnsupported))
	}
	pl, err := fit(m)
	if err != nil {
		return err
	}
	if st := a.openStream(r); st != nil {
		if handled, err := a.editStream(ctx, st, m); handled || err != nil {
			return err
		}
	}
	err = a.updateStreamed(ctx, r.Place.Chat, r.ID, pl.options(true))
	if len(pl.Blocks) > 0 && hasCode(err, codeInvalidBlocks, codeMsgTooLong) {
		a.log.Warn("Slack refused the message's blocks; editing it to text", "channel", r.Place.Chat, "err", err)
		err = a.updateStreamed(ctx, r.Place.Chat, r.ID, renderText(m).options(true))
	}
	return classify("chat.update", err)
}

// update is chat.update; its error is slack-go's, unclassified, or, with
// streaming on, spent when chat.update's own budget has no room (see
// Pacing in stream.go). The budget is the workspace's: the channel is
// place enough.
func (a *Adapter) update(ctx context.Context, channel, ts string, opts []slack.MsgOption) error {
	if wait := a.pace(core.Place{Chat: channel}, "chat.update"); wait > 0 {
		return spent("chat.update", wait)
	}
	_, _, _, err := a.api.UpdateMessageContext(ctx, channel, ts, opts...)
	return err
}

// Delete implements core.Deleter: chat.delete for messages, files.delete
// for files parley uploaded. Slack lets bots delete only their own.
func (a *Adapter) Delete(ctx context.Context, r core.MessageRef) error {
	if id, ok := strings.CutPrefix(r.ID, filePrefix); ok {
		err := a.api.DeleteFileContext(ctx, id)
		if hasCode(err, codeFileNotFound) {
			return fmt.Errorf("slack: files.delete: %w", core.ErrMessageGone)
		}
		return classify("files.delete", err)
	}
	_, _, err := a.api.DeleteMessageContext(ctx, r.Place.Chat, r.ID)
	return classify("chat.delete", err)
}

// SendFile implements core.FileSender: the file is uploaded (Slack's
// three-step external upload) and shared in the place's thread with the
// caption as its comment. The reference is the file's id (filePrefix):
// Slack's answer names the file, not the message sharing it.
func (a *Adapter) SendFile(ctx context.Context, p core.Place, f core.Attachment, body io.Reader, caption string) (core.MessageRef, error) {
	if f.Size == 0 {
		return core.MessageRef{}, core.Permanent(fmt.Errorf("slack: send file %s: the file is empty", f.Name))
	}
	name := f.Name
	if name == "" {
		name = "file"
	}
	sum, err := a.api.UploadFileContext(ctx, slack.UploadFileParameters{
		Reader: body, FileSize: int(f.Size), Filename: name, Title: name,
		Channel: p.Chat, ThreadTimestamp: p.Thread, InitialComment: caption,
	})
	if err != nil {
		return core.MessageRef{}, classify("files.upload", err)
	}
	return ref(p, filePrefix+sum.ID), nil
}
