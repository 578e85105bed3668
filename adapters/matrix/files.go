package matrix

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/filename"
	"github.com/parley-chat/parley/adapters/inbound"
	"github.com/parley-chat/parley/core"
)

// downloadTimeout bounds one file's download.
const downloadTimeout = 2 * time.Minute

// onFile fetches a file people sent (m.file, m.image, m.audio, m.video)
// through authenticated media and hands it to the agent; a voice message
// is transcribed as on Telegram. A file too large, encrypted, or that the
// homeserver refuses is declined with a notice.
func (a *Adapter) onFile(ctx context.Context, h core.Handler, base core.Command, c inContent) error {
	name := c.FileName
	if name == "" {
		name = c.Body
	}
	name = filename.Safe(name)
	mime := "application/octet-stream"
	var size int64
	if c.Info != nil {
		size = c.Info.Size
		if c.Info.MimeType != "" {
			mime = c.Info.MimeType
		}
	}
	switch {
	case len(c.File) > 0:
		a.input().Notice(ctx, h, base, "📎 "+name+" is encrypted; parley cannot read encrypted files yet.")
		return nil
	case size > a.opts.MaxFileSize:
		a.input().Notice(ctx, h, base, fmt.Sprintf("📎 %s is %s; parley takes files up to %s. Share a link instead.", name, mb(size), mb(a.opts.MaxFileSize)))
		return nil
	}
	att, err := a.download(ctx, c.URL, name, mime)
	if err != nil {
		if core.IsPermanent(err) {
			a.log.Warn("could not fetch a file", "room", base.Place.Chat, "err", err)
			a.input().Notice(ctx, h, base, "⚠️ Could not fetch "+name+": "+err.Error())
			return nil
		}
		return err
	}
	defer a.opts.Files.Release(att)
	text := ""
	if c.MsgType == string(event.MsgAudio) && len(c.Voice) > 0 {
		text = a.transcribe(ctx, h, base, att)
	} else {
		a.input().Notice(ctx, h, base, "📎 Received "+att.Name)
		// A caption, where the client sends one (filename and body differ).
		if c.FileName != "" && c.Body != c.FileName {
			text = c.Body
		}
	}
	cmd := base
	cmd.Kind, cmd.Text, cmd.Attachments = core.SendMessage, text, []core.Attachment{att}
	_, err = a.input().Submit(ctx, h, base, cmd)
	return err
}

// transcribe turns a voice message into the text of the person's message.
// Without a transcriber, or when it fails, the recording still reaches the
// agent (attached, with a note instead of the text) and the person is told
// why.
func (a *Adapter) transcribe(ctx context.Context, h core.Handler, base core.Command, att core.Attachment) string {
	if a.opts.Transcriber == nil {
		a.input().Notice(ctx, h, base, "🎤 Voice messages are passed on as audio: set [transcription] api_url (an OpenAI-compatible /v1/audio/transcriptions endpoint) to have them transcribed.")
		return "(voice message, not transcribed)"
	}
	a.input().Notice(ctx, h, base, "🎤 Transcribing…")
	audio, err := inbound.Content(a.opts.Files, att)
	text := ""
	if err == nil {
		text, err = a.opts.Transcriber.Transcribe(ctx, att.Name, audio)
	}
	if err != nil {
		a.log.Warn("transcription failed", "err", err)
		a.input().Notice(ctx, h, base, "⚠️ Could not transcribe the voice message ("+err.Error()+"); it is passed on as audio.")
		return "(voice message, transcription failed)"
	}
	// Shown to the person, and deleted with their next input.
	a.input().NoticeFor(ctx, h, base, "🎤 "+text, core.LifetimeNextInput)
	return text
}

// download fetches mxc through the authenticated media API (see fetch)
// into parley's store of files (Options.Files, inbound.Put), refusing it
// past MaxFileSize.
func (a *Adapter) download(ctx context.Context, mxc, name, mime string) (core.Attachment, error) {
	uri, err := id.ParseContentURI(mxc)
	if err != nil || uri.IsEmpty() {
		return core.Attachment{}, core.Permanent(fmt.Errorf("the file has no valid mxc:// URL"))
	}
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	resp, err := a.fetch(ctx, uri)
	if err != nil {
		if errors.Is(err, mautrix.MNotFound) || errors.Is(err, mautrix.MTooLarge) {
			return core.Attachment{}, core.Permanent(fmt.Errorf("the homeserver does not give it: %w", err))
		}
		return core.Attachment{}, classify("download "+mxc, opOther, err, false)
	}
	defer resp.Body.Close()
	att, err := inbound.Put(ctx, a.opts.Files, name, mime, resp.Body, a.opts.MaxFileSize)
	if err != nil && !core.IsPermanent(err) {
		return core.Attachment{}, fmt.Errorf("matrix: download %s: %w", mxc, err)
	}
	return att, err
}

// fetch asks for the file through authenticated media
// (/_matrix/client/v1/media, Matrix 1.11). A homeserver from before it
// answers that endpoint 404 M_UNRECOGNIZED (or a bare 404); then, and from
// then on, the file comes from the unauthenticated /_matrix/media/v3 path,
// which such a server still serves. A 404 M_NOT_FOUND is the file missing,
// not the endpoint: no fallback.
func (a *Adapter) fetch(ctx context.Context, uri id.ContentURI) (*http.Response, error) {
	if !a.legacyMedia.Load() {
		resp, err := a.cli.Download(ctx, uri)
		if !unrecognized(err) {
			return resp, err
		}
		a.log.Info("the homeserver has no authenticated media; fetching files through /_matrix/media/v3")
		a.legacyMedia.Store(true)
	}
	_, resp, err := a.cli.MakeFullRequestWithResp(ctx, mautrix.FullRequest{
		Method:           http.MethodGet,
		URL:              a.cli.BuildURL(mautrix.MediaURLPath{"v3", "download", uri.Homeserver, uri.FileID}),
		DontReadResponse: true,
	})
	return resp, err
}

// unrecognized reports whether err says the endpoint does not exist: 404
// with M_UNRECOGNIZED or without a Matrix error.
func unrecognized(err error) bool {
	var herr mautrix.HTTPError
	if !errors.As(err, &herr) || !herr.IsStatus(http.StatusNotFound) {
		return false
	}
	return herr.RespError == nil || herr.RespError.ErrCode == mautrix.MUnrecognized.ErrCode
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }
