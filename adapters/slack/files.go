package slack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/adapters/filename"
	"github.com/parley-chat/parley/adapters/inbound"
	"github.com/parley-chat/parley/core"
)

// Files people share are fetched before the message is handed to the
// handler, with the bot token, from url_private_download (files:read), and
// copied as they arrive into parley's store of files (Options.Files,
// adapters/inbound's Put): the agent is handed the copy. Names are
// sanitised; a file larger than MaxFileSize, one stored outside Slack, or
// one the workspace hides is refused with a notice.
//
// Acknowledgement: the envelope of a message with files is acknowledged
// after the download and the durable append, like every other envelope,
// not before: acknowledging first would lose the message if parley died
// mid-download. A large file may therefore outlast Slack's 3 seconds;
// Slack then delivers the envelope again, and the redelivery, queued
// behind the first in the conversation's lane, is acknowledged at once
// once the first is durable (Adapter.handled), or after a restart found a
// duplicate by the handler's dedup key. Messages without files are
// appended and acknowledged well within the 3 seconds.

// downloadTimeout bounds one file's download.
const downloadTimeout = 2 * time.Minute

// onFiles stores the files of a message and hands them to the agent with
// the message's text.
func (a *Adapter) onFiles(ctx context.Context, h core.Handler, base core.Command, files []slack.File, text string) error {
	var atts []core.Attachment
	var refusals []string
	for _, f := range files {
		name := displayName(f)
		switch {
		case f.Mode == "tombstone":
			continue
		case f.IsExternal || f.URLPrivateDownload == "":
			refusals = append(refusals, "📎 "+name+" is not stored in Slack; share its content or a link instead.")
			continue
		case f.Mode == "hidden_by_limit":
			refusals = append(refusals, "📎 "+name+" is hidden by the workspace's plan; parley cannot fetch it.")
			continue
		case int64(f.Size) > a.opts.MaxFileSize:
			refusals = append(refusals, fmt.Sprintf("📎 %s is %s; parley takes files up to %s. Share a link instead.",
				name, inbound.Size(int64(f.Size)), inbound.Size(a.opts.MaxFileSize)))
			continue
		}
		att, err := a.download(ctx, f)
		if err != nil {
			if !core.IsPermanent(err) {
				return err
			}
			a.log.Warn("could not fetch a shared file", "file", f.ID, "err", err)
			refusals = append(refusals, "⚠️ Could not fetch "+name+": "+err.Error())
			continue
		}
		atts = append(atts, att)
	}
	if len(atts) > 0 {
		defer a.opts.Files.Release(atts...)
	}
	for _, r := range refusals {
		a.input().Notice(ctx, h, base, r)
	}
	if len(atts) == 0 && strings.TrimSpace(text) == "" {
		return nil
	}
	var names []string
	for _, att := range atts {
		names = append(names, att.Name)
	}
	if len(names) > 0 {
		a.input().Notice(ctx, h, base, "📎 Received "+strings.Join(names, ", "))
	}
	cmd := base
	cmd.Kind, cmd.Text, cmd.Attachments = core.SendMessage, text, atts
	_, err := a.input().Submit(ctx, h, base, cmd)
	return err
}

// download fetches f into parley's store of files, refusing it past
// MaxFileSize. slack-go writes the download; the store reads it through a
// pipe as it comes.
func (a *Adapter) download(ctx context.Context, f slack.File) (core.Attachment, error) {
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	pr, pw := io.Pipe()
	fetched := make(chan error, 1)
	go func() {
		err := a.api.GetFileContext(ctx, f.URLPrivateDownload, pw)
		pw.CloseWithError(err) // nil: the reader sees the end
		fetched <- err
	}()
	att, err := inbound.Put(ctx, a.opts.Files, filename.Safe(first(f.Name, f.Title, f.ID)), f.Mimetype, pr, a.opts.MaxFileSize)
	// A Put that stopped early (too large) ends the download's writes.
	pr.CloseWithError(io.ErrClosedPipe)
	ferr := <-fetched
	switch {
	case err != nil && core.IsPermanent(err):
		return core.Attachment{}, err
	case ferr != nil:
		if err == nil {
			a.opts.Files.Release(att)
		}
		return core.Attachment{}, downloadError(ferr)
	case err != nil:
		return core.Attachment{}, fmt.Errorf("slack: %w", err)
	}
	return att, nil
}

// downloadError classifies a failed download: a refusal by the server
// (4xx), the size limit, or slack-go refusing to send the token to the
// file's host are permanent; the rest is worth another try.
func downloadError(err error) error {
	var sc slack.StatusCodeError
	switch {
	case errors.As(err, &sc):
		if sc.Code >= 400 && sc.Code < 500 && sc.Code != http.StatusTooManyRequests {
			return core.Permanent(fmt.Errorf("Slack answered %s", sc.Status))
		}
		return fmt.Errorf("slack: download: %w", err)
	case strings.Contains(err.Error(), "refusing to send the token"):
		return core.Permanent(fmt.Errorf("the file is not on Slack's servers or [slack] api_url's host, where the bot token may go: %w", err))
	case strings.Contains(err.Error(), "sign-in page"):
		return core.Permanent(fmt.Errorf("the bot may not read it (is the files:read scope granted?)"))
	}
	return fmt.Errorf("slack: download: %w", err)
}

// displayName is how a file is named to people.
func displayName(f slack.File) string {
	if n := first(f.Name, f.Title); n != "" {
		return filename.Safe(n)
	}
	return "the file"
}
