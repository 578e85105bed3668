package telegram

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/parley-chat/parley/adapters/filename"
	"github.com/parley-chat/parley/adapters/inbound"
	"github.com/parley-chat/parley/core"
)

// onFile stores a document or photo a person sent and hands it to the agent
// as a message with the file attached.
func (a *Adapter) onFile(ctx context.Context, h core.Handler, base core.Command, fileID, name, mime string, size int64, caption string) error {
	if size > maxDownload {
		a.input().Notice(ctx, h, base, fmt.Sprintf("📎 %s is %.1f MB; Telegram lets bots fetch files up to 20 MB. Share a link instead.", displayName(name), float64(size)/(1<<20)))
		return nil
	}
	att, err := a.download(ctx, fileID, name, mime)
	if err != nil {
		if core.IsPermanent(err) {
			a.input().Notice(ctx, h, base, "⚠️ Could not fetch "+displayName(name)+": "+err.Error())
			return nil
		}
		return err
	}
	defer a.opts.Files.Release(att)
	a.input().Notice(ctx, h, base, "📎 Received "+att.Name)
	cmd := base
	cmd.Kind, cmd.Text, cmd.Attachments = core.SendMessage, caption, []core.Attachment{att}
	_, err = a.input().Submit(ctx, h, base, cmd)
	return err
}

// onVoice transcribes a voice note and posts the text as the person's
// message, with the recording attached. Without a transcriber, or when it
// fails, the recording still reaches the agent (attached, with a note
// instead of the text) and the person is told why.
func (a *Adapter) onVoice(ctx context.Context, h core.Handler, base core.Command, v *models.Voice) error {
	if v.FileSize > maxDownload {
		a.input().Notice(ctx, h, base, "🎤 That voice note is longer than Telegram lets bots fetch (20 MB).")
		return nil
	}
	att, err := a.download(ctx, v.FileID, fmt.Sprintf("voice-%s.ogg", strings.ReplaceAll(base.PlatformID, ":", "-")), v.MimeType)
	if err != nil {
		if core.IsPermanent(err) {
			a.input().Notice(ctx, h, base, "⚠️ Could not fetch the voice note: "+err.Error())
			return nil
		}
		return err
	}
	defer a.opts.Files.Release(att)
	text := ""
	switch {
	case a.opts.Transcriber == nil:
		a.input().Notice(ctx, h, base, "🎤 Voice notes are passed on as audio: set [transcription] api_url (an OpenAI-compatible /v1/audio/transcriptions endpoint) to have them transcribed.")
		text = "(voice note, not transcribed)"
	default:
		a.input().Notice(ctx, h, base, "🎤 Transcribing…")
		audio, rerr := inbound.Content(a.opts.Files, att)
		if rerr == nil {
			text, rerr = a.opts.Transcriber.Transcribe(ctx, att.Name, audio)
		}
		if rerr != nil {
			a.log.Warn("transcription failed", "err", rerr)
			a.input().Notice(ctx, h, base, "⚠️ Could not transcribe the voice note ("+rerr.Error()+"); it is passed on as audio.")
			text = "(voice note, transcription failed)"
		} else {
			// Shown to the person, and deleted with their next input.
			a.input().NoticeFor(ctx, h, base, "🎤 "+text, core.LifetimeNextInput)
		}
	}
	cmd := base
	cmd.Kind, cmd.Text, cmd.Attachments = core.SendMessage, text, []core.Attachment{att}
	_, err = a.input().Submit(ctx, h, base, cmd)
	return err
}

// download fetches a file into parley's store of files (Options.Files,
// inbound.Put), at most maxDownload bytes, and returns the attachment of
// its copy.
func (a *Adapter) download(ctx context.Context, fileID, name, mime string) (core.Attachment, error) {
	f, err := a.bot.GetFile(ctx, &bot.GetFileParams{FileID: fileID})
	if err != nil {
		return core.Attachment{}, classify("get file", err)
	}
	if f.FileSize > maxDownload {
		return core.Attachment{}, core.Permanent(fmt.Errorf("the file is larger than 20 MB"))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.bot.FileDownloadLink(f), nil)
	if err != nil {
		return core.Attachment{}, core.Permanent(err)
	}
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		return core.Attachment{}, fmt.Errorf("telegram: download: %s", strings.ReplaceAll(err.Error(), a.opts.Token, "***"))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return core.Attachment{}, fmt.Errorf("telegram: download: %s", resp.Status)
	}
	if name == "" {
		name = path.Base(f.FilePath)
	}
	att, err := inbound.Put(ctx, a.opts.Files, filename.Safe(name), mime, resp.Body, maxDownload)
	if err != nil && !core.IsPermanent(err) {
		// The body's read error may carry the download URL, and so the token.
		return core.Attachment{}, fmt.Errorf("telegram: %s", strings.ReplaceAll(err.Error(), a.opts.Token, "***"))
	}
	return att, err
}

func displayName(name string) string {
	if name == "" {
		return "the file"
	}
	return filename.Safe(name)
}
