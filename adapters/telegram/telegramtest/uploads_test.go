package telegramtest_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

// pngOf is a w×h PNG image.
func pngOf(tb testing.TB, w, h int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// TestBotSendsPhotos: a photo the bot sends comes back, as on Telegram, in
// several sizes, the last the original and the first a thumbnail at most
// 320 pixels on its longer side; a small photo has its one size. It is
// recorded with Documents like any upload.
func TestBotSendsPhotos(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	chat := srv.NewPrivateChat(alice)
	b := newBot(t, srv)
	ctx := context.Background()
	big := pngOf(t, 640, 480)
	sent, err := b.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: chat, Photo: &models.InputFileUpload{Filename: "chart.png", Data: bytes.NewReader(big)},
		Caption: "<i>weekly</i>", ParseMode: models.ParseModeHTML, DisableNotification: true})
	if err != nil {
		t.Fatal(err)
	}
	if p := sent.Photo; len(p) != 2 || p[0].Width != 320 || p[0].Height != 240 || p[1].Width != 640 || p[1].Height != 480 {
		t.Errorf("sizes = %+v, want 320×240 then 640×480", sent.Photo)
	}
	if sent.Caption != "weekly" || sent.Text != "" {
		t.Errorf("caption %q, text %q; want the parsed caption and no text", sent.Caption, sent.Text)
	}
	docs := srv.Documents()
	if len(docs) != 1 || docs[0].Name != "chart.png" || docs[0].MIME != "image/png" || !bytes.Equal(docs[0].Content, big) ||
		!docs[0].Silent || docs[0].MessageID != sent.ID {
		t.Errorf("documents = %+v", docs)
	}

	small, err := b.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: chat, Photo: &models.InputFileUpload{Filename: "dot.png", Data: bytes.NewReader(pngOf(t, 100, 50))}})
	if err != nil {
		t.Fatal(err)
	}
	if p := small.Photo; len(p) != 1 || p[0].Width != 100 || p[0].Height != 50 {
		t.Errorf("a small photo's sizes = %+v, want its own size alone", small.Photo)
	}
}

// TestSendByFileID: a file Telegram already has is sent again by its
// file_id, without uploading it; an unknown id, an empty upload, no file
// at all and a caption over 1024 characters are refused with Telegram's
// descriptions.
func TestSendByFileID(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	chat := srv.NewPrivateChat(alice)
	b := newBot(t, srv)
	ctx := context.Background()
	srv.SendDocument(chat, 0, alice, "notes.txt", "text/plain", []byte("remember the milk"))
	_, ups, _ := getUpdates(t, srv, `{}`)
	if len(ups) != 1 || ups[0].Message.Document == nil {
		t.Fatalf("updates = %+v, want alice's document", ups)
	}
	doc := ups[0].Message.Document
	if doc.FileName != "notes.txt" || doc.MimeType != "text/plain" || doc.FileSize != 17 {
		t.Errorf("document = %+v", doc)
	}

	sent, err := b.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chat, Document: &models.InputFileString{Data: doc.FileID}})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Document == nil || sent.Document.FileID != doc.FileID {
		t.Errorf("resent = %+v, want the same file", sent.Document)
	}
	if docs := srv.Documents(); len(docs) != 1 || string(docs[0].Content) != "remember the milk" || docs[0].Name != "notes.txt" {
		t.Errorf("documents = %+v", docs)
	}

	_, err = b.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chat, Document: &models.InputFileString{Data: "BQACAgIAAxnope"}})
	wantBadRequest(t, err, "Bad Request: wrong file identifier/HTTP URL specified")
	_, err = b.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chat, Document: &models.InputFileUpload{Filename: "empty.txt", Data: strings.NewReader("")}})
	wantBadRequest(t, err, "Bad Request: file must be non-empty")
	_, err = b.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: chat, Photo: &models.InputFileString{}})
	wantBadRequest(t, err, "Bad Request: there is no photo in the request")
	_, err = b.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chat, Document: &models.InputFileString{Data: doc.FileID}, Caption: strings.Repeat("c", 1025)})
	wantBadRequest(t, err, "Bad Request: message caption is too long")
	if n := len(srv.Documents()); n != 1 {
		t.Errorf("%d documents after refused sends, want 1", n)
	}
}

// TestPersonEditsMessage: a person's edit reaches the bot as an
// edited_message update with the new text, its commands marked, and
// edit_date set.
func TestPersonEditsMessage(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	chat := srv.NewPrivateChat(alice)
	id := srv.SendText(chat, 0, alice, "typo")
	srv.EditText(chat, id, "fixed, /status please")
	_, ups, _ := getUpdates(t, srv, `{}`)
	if len(ups) != 2 || ups[1].EditedMessage == nil || ups[1].Message != nil {
		t.Fatalf("updates = %+v, want a message then an edited_message", ups)
	}
	m := ups[1].EditedMessage
	if m.ID != id || m.Text != "fixed, /status please" || m.EditDate == 0 {
		t.Errorf("edited message = %+v", m)
	}
	if len(m.Entities) != 1 || m.Entities[0].Type != models.MessageEntityTypeBotCommand || m.Entities[0].Offset != 7 || m.Entities[0].Length != 7 {
		t.Errorf("entities = %+v, want /status marked", m.Entities)
	}
	if got, ok := srv.Message(chat, id); !ok || got.Text != "fixed, /status please" {
		t.Errorf("Message = %+v, %v", got, ok)
	}
}

// TestDeleteMyCommands: deleting a scope's commands leaves the other
// scopes' lists, and a scope naming an unknown chat is refused.
func TestDeleteMyCommands(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("team")
	b := newBot(t, srv)
	ctx := context.Background()
	cmds := []models.BotCommand{{Command: "new", Description: "Start a session"}}
	inForum := &models.BotCommandScopeChat{ChatID: forum}
	for _, scope := range []models.BotCommandScope{nil, inForum} {
		if _, err := b.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: cmds, Scope: scope}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.DeleteMyCommands(ctx, &bot.DeleteMyCommandsParams{Scope: inForum}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.GetMyCommands(ctx, &bot.GetMyCommandsParams{Scope: inForum}); err != nil || len(got) != 0 {
		t.Errorf("forum commands after delete = %+v, %v; want none", got, err)
	}
	if got, err := b.GetMyCommands(ctx, &bot.GetMyCommandsParams{}); err != nil || len(got) != 1 || got[0].Command != "new" {
		t.Errorf("default commands = %+v, %v; want them kept", got, err)
	}
	_, err := b.DeleteMyCommands(ctx, &bot.DeleteMyCommandsParams{Scope: &models.BotCommandScopeChat{ChatID: 42}})
	wantBadRequest(t, err, "Bad Request: chat not found")
}
