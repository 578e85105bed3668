package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"maunium.net/go/mautrix/event"
)

// TestMatrixQuestionsAndFiles: ui.ask shows the question with numbered
// options in the session's room. Eve, whom Ann invited but who is not
// allowed, replies with a number and reacts with a number emoji: neither
// answers. Ann's reply with the number answers the first question; a
// second question is answered by Ann's number-emoji reaction; each answer
// reaches the inbox once. A file Ann uploads arrives in the inbox as an
// attachment stored under the data directory with a safe name.
func TestMatrixQuestionsAndFiles(t *testing.T) {
	t.Parallel()
	st := newMXStack(t, mxOptions{})
	lobby, _ := st.room("Lobby")
	room, session := st.mxNew(lobby, "Deploy")
	st.ann.Invite(t, room, st.eve.User.ID)
	st.eve.WaitInvite(t, st.ann.User.ID, mxWait)
	st.eve.Join(t, room)

	answer := st.ask(string(session), "Deploy now?", "Yes", "No")
	q := st.mxShowing(st.ann, room, "Deploy now?")
	if text := st.ann.Edited(room, q.ID); !strings.Contains(text, "1️⃣ Yes") || !strings.Contains(text, "2️⃣ No") {
		t.Errorf("the question shows %q, want its options numbered with their emoji", text)
	}
	if mxMsgType(q) != event.MsgText {
		t.Errorf("the question is an %s, want a notifying m.text", mxMsgType(q))
	}
	st.eve.Reply(t, room, q.ID, "2")
	st.eve.React(t, room, q.ID, "2️⃣")
	st.ann.Reply(t, room, q.ID, "1")
	select {
	case a := <-answer:
		if a != "Yes" {
			t.Errorf("ui.ask answered %q, want Yes: Ann replied 1 (Eve's 2 and 2️⃣ came first)", a)
		}
	case <-time.After(mxWait):
		t.Fatal("ui.ask did not return after Ann's reply")
	}

	answer = st.ask(string(session), "Roll back?", "Yes", "No")
	q2 := st.mxShowing(st.ann, room, "Roll back?")
	st.eve.React(t, room, q2.ID, "1️⃣")
	st.ann.React(t, room, q2.ID, "2️⃣")
	select {
	case a := <-answer:
		if a != "No" {
			t.Errorf("ui.ask answered %q, want No: Ann reacted 2️⃣ (Eve's 1️⃣ came first)", a)
		}
	case <-time.After(mxWait):
		t.Fatal("ui.ask did not return after Ann's reaction")
	}

	st.ann.UploadFile(t, room, "../../notes.txt", "text/plain", []byte("the notes"))
	var att struct{ path, name string }
	servetest.PollUntil(t, mxWait, "the file in the inbox", func() bool {
		for _, m := range st.inbox() {
			for _, a := range m.Attachments {
				att.path, att.name = a.Path, a.Name
				return true
			}
		}
		return false
	}, nil)
	rel, err := filepath.Rel(st.cfg.DataDir, att.path)
	if err != nil || strings.HasPrefix(rel, "..") || strings.HasPrefix(att.name, ".") || strings.ContainsAny(att.name, `/\`) {
		t.Errorf("file stored at %s as %q: outside the data directory, hidden or with a path", att.path, att.name)
	}
	if b, err := os.ReadFile(att.path); err != nil || string(b) != "the notes" {
		t.Errorf("the stored file holds %q (%v), want what Ann uploaded", b, err)
	}
	st.idle()

	count := map[string]int{}
	for _, m := range st.inbox() {
		count[m.Content]++
	}
	if count["Yes"] != 1 || count["No"] != 1 {
		t.Errorf("the inbox has Yes %d times and No %d times, want each once", count["Yes"], count["No"])
	}
	for _, m := range st.inbox() {
		if m.Actor.ID == string(st.eve.User.ID) {
			t.Errorf("Eve's %q reached the inbox", m.Content)
		}
	}
}
