package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// fast is a stack without Telegram's rate limits, for behaviour that does
// not depend on pacing, on a fake clock (call it inside synctest.Test).
func fast(t *testing.T, rich bool) *tgStack {
	t.Helper()
	st := newTGBubbleStackStopped(t, telegramtest.Options{RichMessages: rich})
	st.start()
	return st
}

// fastReal is fast in real time, for a test that talks to a server of its
// own besides the fake (a transcription API).
func fastReal(t *testing.T, rich bool) *tgStack {
	return newTGStackWith(t, telegramtest.Options{RichMessages: rich})
}

// session has Ann start a session and say something; it returns the topic,
// the session id and the agent's watermark.
func (st *tgStack) session(text string) (int, string, string) {
	st.t.Helper()
	topic := st.newTopic("work")
	st.srv.SendText(st.forum, topic, ann, text)
	r := st.heard("")
	return topic, r.Messages[0].SessionID, r.LastID
}

func (st *tgStack) showing(topic int, text string) telegramtest.Message {
	st.t.Helper()
	var found telegramtest.Message
	st.await("a message showing "+text, func() bool {
		for _, m := range botMessages(st.srv.Messages(st.forum, topic)) {
			if strings.Contains(m.Text, text) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// TestTelegramStartupErrorsNameTheFix: each refusal people meet setting
// Telegram up is reported as such, with what to fix; parley serves on.
func TestTelegramStartupErrorsNameTheFix(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("Team")
	plain := srv.NewGroupWithoutTopics("Plain")
	weak := srv.NewForum("Weak")
	srv.SetBotRights(weak, telegramtest.Rights{Admin: false})
	tests := []struct {
		name  string
		token string
		chat  int64
		want  string
	}{
		{"wrong token", "1:wrong", forum, "token was refused"},
		{"group without topics", srv.Token, plain, "enable Topics"},
		{"bot without rights", srv.Token, weak, "must be an administrator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			telegramConfig(&cfg).Token, telegramConfig(&cfg).APIURL, telegramConfig(&cfg).ChatID, telegramConfig(&cfg).AllowedUsers = tt.token, srv.URL, tt.chat, []int64{1}
			// parley serves without Telegram, which is refused (and
			// retried slowly), with the error and its fix in the log.
			m := servetest.Start(t, cfg, platforms.All())
			err := servetest.WaitDown(t, m, "telegram", core.PlatformRefused)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestTelegramDeletedTopicIsRecreated(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := fast(t, false)
		topic, session, _ := st.session("hello")
		st.srv.DeleteTopic(st.forum, topic)
		st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "still here?"}, nil)
		st.await("a new topic with the message", func() bool {
			topics := st.srv.Topics(st.forum)
			last := topics[len(topics)-1]
			if last.ID == topic || last.Deleted {
				return false
			}
			for _, m := range st.srv.Messages(st.forum, last.ID) {
				if strings.Contains(m.Text, "still here?") {
					return true
				}
			}
			return false
		})
	})
}

func TestTelegramUnparsableHTMLFallsBackToPlainText(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := fast(t, false)
		topic, session, _ := st.session("hello")
		st.srv.FailNext("sendMessage", telegramtest.Error{Code: 400, Description: "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0"})
		st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "a **bold** answer"}, nil)
		m := st.showing(topic, "bold")
		if m.ParseMode != "" {
			t.Errorf("parse mode %q, want the plain-text retry", m.ParseMode)
		}
	})
}

func TestTelegramOutputMessageGoneAndRestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := fast(t, true)
		topic, session, _ := st.session("hello")
		st.output(session, "first take")
		first := st.showing(topic, "first take")

		st.restart() // mid-stream: the next update edits the same message
		st.output(session, "second take")
		second := st.showing(topic, "second take")
		if second.ID != first.ID {
			t.Errorf("after a restart the output moved from message %d to %d", first.ID, second.ID)
		}

		st.srv.DeleteMessage(st.forum, second.ID) // a person deleted it
		st.output(session, "third take")
		third := st.showing(topic, "third take")
		if third.ID == second.ID {
			t.Error("the deleted output message was not replaced")
		}
	})
}

func TestTelegramRetryAfterIsHonored(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := fast(t, true)
		topic, session, _ := st.session("hello")
		st.output(session, "v1")
		st.showing(topic, "v1")
		st.srv.FailNext("editMessageText", telegramtest.Error{Code: 429, Description: "Too Many Requests: retry after 2", RetryAfter: 2})
		start := time.Now()
		st.output(session, "v2")
		st.output(session, "v3")
		st.showing(topic, "v3")
		if waited := time.Since(start); waited < 2*time.Second-100*time.Millisecond {
			t.Errorf("latest text shown %s after the 429, want it to wait retry_after=2s", waited)
		}
	})
}

func TestTelegramVoiceNotes(t *testing.T) {
	t.Parallel()
	t.Run("without transcription", func(t *testing.T) {
		st := fastReal(t, false)
		topic := st.newTopic("voice")
		st.srv.SendVoice(st.forum, topic, ann, []byte("OggS voice"), 3)
		st.showing(topic, "set [transcription] api_url")
		r := st.heard("")
		if len(r.Messages) != 1 || !strings.Contains(r.Messages[0].Content, "not transcribed") {
			t.Fatalf("agent read %+v", r.Messages)
		}
	})
	t.Run("transcribed", func(t *testing.T) {
		whisper := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f, _, err := r.FormFile("file")
			if err != nil {
				http.Error(w, `{"error":{"message":"no file"}}`, 400)
				return
			}
			audio, _ := io.ReadAll(f)
			if string(audio) != "OggS voice" {
				http.Error(w, `{"error":{"message":"wrong audio"}}`, 400)
				return
			}
			_, _ = io.WriteString(w, `{"text":"please run the tests"}`)
		}))
		defer whisper.Close()
		srv := telegramtest.NewServer(t, telegramtest.Options{})
		st := newTGStackOn(t, srv)
		st.cfg.Transcription.APIURL = whisper.URL + "/v1"
		st.start()
		topic := st.newTopic("voice")
		st.srv.SendVoice(st.forum, topic, ann, []byte("OggS voice"), 3)
		r := st.heard("")
		if len(r.Messages) != 1 || r.Messages[0].Content != "please run the tests" {
			t.Fatalf("agent read %+v", r.Messages)
		}
		st.showing(topic, "🎤 please run the tests")
	})
}

func TestTelegramFiles(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := fast(t, false)
		topic := st.newTopic("files")
		st.srv.SendDocument(st.forum, topic, ann, "../../.bashrc", "text/plain", []byte("echo pwned"))
		r := st.heard("")
		if len(r.Messages) != 1 {
			t.Fatalf("agent read %+v", r.Messages)
		}
		msgs, err := st.m.Daemon().Store.Inbox(context.Background(), "", "", 0)
		if err != nil || len(msgs) != 1 || len(msgs[0].Attachments) != 1 {
			t.Fatalf("inbox %+v %v", msgs, err)
		}
		att := msgs[0].Attachments[0]
		rel, err := filepath.Rel(st.cfg.DataDir, att.Path)
		if err != nil || strings.HasPrefix(rel, "..") || strings.HasPrefix(att.Name, ".") {
			t.Errorf("file stored at %s as %q: outside the data directory or hidden", att.Path, att.Name)
		}
		if b, _ := os.ReadFile(att.Path); string(b) != "echo pwned" || att.Size != 10 {
			t.Errorf("stored %q (%d bytes)", b, att.Size)
		}
		// The agent reads parley's copy, named by its content and
		// read-only: what it reads is what was received.
		sum := sha256.Sum256([]byte("echo pwned"))
		if att.Digest != hex.EncodeToString(sum[:]) || att.Path != filepath.Join(st.cfg.DataDir, "blobs", att.Digest) {
			t.Errorf("attachment %+v, want the copy named by its digest in data_dir/blobs", att)
		}
		if fi, err := os.Stat(att.Path); err != nil || fi.Mode().Perm() != 0o400 {
			t.Errorf("the copy's mode: %v, %v; want read-only", fi, err)
		}
		st.srv.SendFile(st.forum, topic, ann, telegramtest.File{Name: "huge.iso", MIME: "application/octet-stream", Size: 25 << 20})
		st.showing(topic, "up to 20 MB")
	})
}

func TestTelegramButtons(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := fast(t, false)
		topic, session, _ := st.session("deploy?")
		answer := make(chan string, 1)
		go func() {
			var out struct {
				Answer string `json:"answer"`
			}
			st.agent.call(t, "ui.ask", map[string]any{"session_id": session, "question": "Deploy now?", "options": []string{"Yes", "No"}}, &out)
			answer <- out.Answer
		}()
		q := st.showing(topic, "Deploy now?")
		if len(q.Buttons) != 2 || len(q.Buttons[0][0].CallbackData) > 64 {
			t.Fatalf("question shown with buttons %+v", q.Buttons)
		}
		strangerClick := st.srv.Click(st.forum, q.ID, stranger, q.Buttons[0][0].CallbackData)
		click := st.srv.Click(st.forum, q.ID, ann, q.Buttons[0][0].CallbackData)
		select {
		case a := <-answer:
			if a != "Yes" {
				t.Errorf("ui.ask answered %q", a)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("ui.ask did not return")
		}
		st.await("both clicks answered", func() bool {
			return len(st.srv.CallbackAnswers(click)) == 1 && len(st.srv.CallbackAnswers(strangerClick)) == 1
		})
		if a := st.srv.CallbackAnswers(strangerClick)[0]; a.Text != "" {
			t.Errorf("the stranger's click was answered with %q, want silence", a.Text)
		}
	})
}

func TestTelegramNoUpdateLostOrRepeatedAcrossRestarts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := fast(t, false)
		topic, _, _ := st.session("one")
		st.srv.SendText(st.forum, topic, ann, "two")
		st.heard("")
		st.restart()
		st.srv.SendText(st.forum, topic, ann, "three")
		st.heard("")
		msgs, _ := st.m.Daemon().Store.Inbox(context.Background(), "", "", 0)
		var got []string
		for _, m := range msgs {
			got = append(got, m.Content)
		}
		if strings.Join(got, "|") != "one|two|three" {
			t.Errorf("inbox %q, want each message exactly once", got)
		}
	})
}

func TestTelegramNotModifiedIsSuccess(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := fast(t, false)
		topic, session, _ := st.session("hello")
		st.output(session, "*v1*")
		st.showing(topic, "v1")
		// Different markdown, the same rendering: Telegram answers "message is
		// not modified", which is success, not something to retry.
		st.output(session, "_v1_")
		st.m.Daemon().WaitIdle(context.Background())
		st.output(session, "v3")
		st.showing(topic, "v3")
		notModified := 0
		for _, c := range st.srv.Calls() {
			if c.Method == "editMessageText" && strings.Contains(c.Err, "not modified") {
				notModified++
			}
		}
		if notModified != 1 {
			t.Errorf("%d 'not modified' answers, want exactly 1 (no retries)", notModified)
		}
	})
}

func TestTelegramAgentSendsFiles(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := fast(t, false)
		topic, session, _ := st.session("send me the report")
		report := filepath.Join(t.TempDir(), "report.csv")
		if err := os.WriteFile(report, []byte("a,b\n1,2\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "Here it is.", "files": []string{report}}, nil)
		st.showing(topic, "Here it is.")
		st.await("the document", func() bool {
			for _, d := range st.srv.Documents() {
				if d.Name == "report.csv" && string(d.Content) == "a,b\n1,2\n" {
					return true
				}
			}
			return false
		})
	})
}
