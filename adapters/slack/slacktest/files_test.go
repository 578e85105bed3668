package slacktest_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

func TestUploadFile(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{})
	root := srv.Post(ann, ch, "", "send me the log")
	data := []byte("line 1\nline 2\n")

	sum, err := api.UploadFileContext(ctx(t), slack.UploadFileParameters{
		Reader: bytes.NewReader(data), FileSize: len(data), Filename: "out.txt", Title: "Output",
		Channel: ch, ThreadTimestamp: root, InitialComment: "here it is",
	})
	if err != nil {
		t.Fatal(err)
	}
	replies := srv.Replies(ch, root)
	if len(replies) != 2 {
		t.Fatalf("thread = %+v, want the root and the file", replies)
	}
	m := replies[1]
	if m.User != srv.BotUserID || m.Text != "here it is" || len(m.Files) != 1 {
		t.Fatalf("file message = %+v", m)
	}
	if f := m.Files[0]; f.ID != sum.ID || f.Name != "out.txt" || !bytes.Equal(f.Data, data) {
		t.Fatalf("file = %+v, summary %+v", f, sum)
	}

	info, _, _, err := api.GetFileInfoContext(ctx(t), sum.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if info.Title != "Output" || info.Size != len(data) || len(info.Shares.Public[ch]) != 1 || info.Shares.Public[ch][0].ThreadTs != root {
		t.Fatalf("files.info = %+v", info)
	}
	var got bytes.Buffer
	if err := api.GetFileContext(ctx(t), info.URLPrivateDownload, &got); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("download = %q, %v", got.Bytes(), err)
	}

	t.Run("errors", func(t *testing.T) {
		_, err := api.CompleteUploadExternalContext(ctx(t), slack.CompleteUploadExternalParameters{Files: []slack.FileSummary{{ID: "F404"}}, Channel: ch})
		wantCode(t, err, "file_not_found")
		_, _, _, err = api.GetFileInfoContext(ctx(t), "F404", 0, 0)
		wantCode(t, err, "file_not_found")
		_, err = api.UploadFileContext(ctx(t), slack.UploadFileParameters{
			Reader: bytes.NewReader(data), FileSize: len(data), Filename: "x.txt", Channel: srv.NewChannelWithoutBot("x"),
		})
		wantCode(t, err, "not_in_channel")
	})
}

func TestPersonSharesFile(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{})
	data := []byte("%PDF-1.7 fake")
	sock := startSocket(t, srv, ackAll)
	ts := srv.PostFile(ann, ch, "", "report.pdf", "application/pdf", data)
	ev := sock.next(t, "events_api")
	msg := messageEvent(t, ev)
	if msg.SubType != "file_share" || msg.TimeStamp != ts || msg.User != ann.ID || len(msg.Message.Files) != 1 {
		t.Fatalf("event = %+v", msg)
	}
	f := msg.Message.Files[0]
	if f.Name != "report.pdf" || f.Mimetype != "application/pdf" || !strings.HasPrefix(f.URLPrivateDownload, strings.TrimSuffix(srv.URL, "/api/")) {
		t.Fatalf("file = %+v", f)
	}

	var got bytes.Buffer
	if err := api.GetFileContext(ctx(t), f.URLPrivateDownload, &got); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("download with the bot token = %q, %v", got.Bytes(), err)
	}
	stranger := slack.New("xoxb-not-ours", slack.OptionAPIURL(srv.URL))
	got.Reset()
	if err := stranger.GetFileContext(ctx(t), f.URLPrivateDownload, &got); err == nil || !strings.Contains(err.Error(), "sign-in") {
		t.Fatalf("download with another token = %q, %v; want the sign-in redirect", got.Bytes(), err)
	}
	if m, _ := srv.Message(ch, ts); len(m.Files) != 1 || !bytes.Equal(m.Files[0].Data, data) || m.Files[0].Mime != "application/pdf" {
		t.Fatalf("stored = %+v", m)
	}
}
