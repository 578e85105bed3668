package telegram

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/parley-chat/parley/adapters/filename"
	"github.com/parley-chat/parley/core"
)

// onFile stores a document or photo a person sent and hands it to the agent
// as a message with the file attached.
func (a *Adapter) onFile(ctx context.Context, h core.Handler, base core.Command, fileID, name, mime string, size int64, caption string) error {
	if size > maxDownload {
		a.input().Notice(ctx, h, base, fmt.Sprintf("📎 %s is %.1f MB; Telegram lets bots fetch files up to 20 MB. Share a link instead.", displayName(name), float64(size)/(1<<20)))
		return nil
	}
	att, err := a.download(ctx, base.Place, fileID, name, mime)
	if err != nil {
		if core.IsPermanent(err) {
			a.input().Notice(ctx, h, base, "⚠️ Could not fetch "+displayName(name)+": "+err.Error())
			return nil
		}
		return err
	}
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
	att, err := a.download(ctx, base.Place, v.FileID, fmt.Sprintf("voice-%s.ogg", strings.ReplaceAll(base.PlatformID, ":", "-")), v.MimeType)
	if err != nil {
		if core.IsPermanent(err) {
			a.input().Notice(ctx, h, base, "⚠️ Could not fetch the voice note: "+err.Error())
			return nil
		}
		return err
	}
	text := ""
	switch {
	case a.opts.Transcriber == nil:
		a.input().Notice(ctx, h, base, "🎤 Voice notes are passed on as audio: set [transcription] api_url (an OpenAI-compatible /v1/audio/transcriptions endpoint) to have them transcribed.")
		text = "(voice note, not transcribed)"
	default:
		a.input().Notice(ctx, h, base, "🎤 Transcribing…")
		audio, rerr := os.ReadFile(att.Path)
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

// download fetches a file into FileDir/telegram/<chat>/<thread>/ under a
// sanitised, collision-free name.
func (a *Adapter) download(ctx context.Context, p core.Place, fileID, name, mime string) (core.Attachment, error) {
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
	dir := filepath.Join(a.opts.FileDir, "telegram", filename.Safe(p.Chat), filename.Safe(p.Thread))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return core.Attachment{}, fmt.Errorf("telegram: %w", err)
	}
	if name == "" {
		name = filepath.Base(f.FilePath)
	}
	out, path, err := create(dir, filename.Safe(name))
	if err != nil {
		return core.Attachment{}, fmt.Errorf("telegram: %w", err)
	}
	n, err := io.Copy(out, io.LimitReader(resp.Body, maxDownload+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil || n > maxDownload {
		os.Remove(path)
		if err == nil {
			return core.Attachment{}, core.Permanent(fmt.Errorf("the file is larger than 20 MB"))
		}
		return core.Attachment{}, fmt.Errorf("telegram: save file: %w", err)
	}
	if mime == "" {
		mime = "application/octet-stream"
	}
	return core.Attachment{Name: filepath.Base(path), Mime: mime, Size: n, Path: path}, nil
}

// create makes a new file named name in dir, or name-2, name-3, … when the
// name is taken, never overwriting.
func create(dir, name string) (*os.File, string, error) {
	ext := filepath.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 1; i < 10000; i++ {
		n := name
		if i > 1 {
			n = stem + "-" + strconv.Itoa(i) + ext
		}
		path := filepath.Join(dir, n)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return f, path, nil
		}
		if !os.IsExist(err) {
			return nil, "", err
		}
	}
	return nil, "", fmt.Errorf("no free name for %s", name)
}

func displayName(name string) string {
	if name == "" {
		return "the file"
	}
	return filename.Safe(name)
}
