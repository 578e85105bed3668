package e2e

// The file an agent names is the file people get. A file is checked when
// the agent posts it and delivered when the journal gets to it, possibly
// much later; the race a probe won — post a harmless file behind a queue,
// swap it for a symlink to parley.toml, have the bot token uploaded — is
// closed by the copy parley takes at the post (store/files): Telegram is
// sent that copy, whatever the path holds by then, a restart included.
// Delivery is held in the outbox (the platform unreachable, as it were)
// while the test changes the file, so the premise holds on any machine.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/parley-chat/parley/adapters/telegram"
	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

// newFileStack is a Telegram stack on the fake clock whose agent may send
// files from send, with its configuration file, holding the bot's token,
// next to send (outside it, as a person's parley.toml would be).
func newFileStack(t *testing.T) (st *tgStack, send, config string) {
	t.Helper()
	st = newTGBubbleStackStopped(t, telegramtest.Options{})
	root := t.TempDir()
	send = filepath.Join(root, "work")
	if err := os.Mkdir(send, 0o700); err != nil {
		t.Fatal(err)
	}
	config = writeFile(t, filepath.Join(root, "parley.toml"), "[telegram]\ntoken = \""+st.srv.Token+"\"\n")
	st.configPath = config
	st.cfg.MCP.SendDirs = []string{send}
	st.start()
	return st, send, config
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// holdTelegram stops (true) or resumes (false) every Telegram operation.
func (st *tgStack) holdTelegram(hold bool) { st.m.Daemon().Outbox.Hold(telegram.Name, hold) }

// postHeld has the agent post send/report.csv in a new session's topic
// while Telegram's operations are held; it returns the topic and the
// report's path.
func (st *tgStack) postHeld(send string) (int, string) {
	st.t.Helper()
	topic, session, _ := st.session("send me the report")
	report := writeFile(st.t, filepath.Join(send, "report.csv"), "a,b\n1,2\n")
	st.holdTelegram(true)
	st.agent.call(st.t, "chat.assistant.post", map[string]any{"session_id": session, "content": "Here it is.", "files": []string{report}}, nil)
	return topic, report
}

// document waits for the one document Telegram received and returns its
// content, failing if the configuration's token reached Telegram.
func (st *tgStack) document(name string) string {
	st.t.Helper()
	st.await("the document", func() bool { return len(st.srv.Documents()) > 0 })
	st.idle()
	docs := st.srv.Documents()
	for _, d := range docs {
		if strings.Contains(string(d.Content), st.srv.Token) {
			st.t.Errorf("the configuration file, with the bot token, was uploaded as %s", d.Name)
		}
	}
	if len(docs) != 1 || docs[0].Name != name {
		st.t.Fatalf("documents %+v, want one named %s", docs, name)
	}
	return string(docs[0].Content)
}

// TestFileChangedAfterPost: the agent posts a harmless report, and before
// Telegram gets it the path is swapped for a symlink to parley.toml,
// another file is renamed over it, or it is removed. Telegram gets the
// report as it was posted, every time.
func TestFileChangedAfterPost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path, config string)
	}{
		{"swapped for a symlink to the config file", func(t *testing.T, path, config string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(config, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"another file renamed over it", func(t *testing.T, path, _ string) {
			if err := os.Rename(writeFile(t, path+".new", "tampered,after\nthe,post\n"), path); err != nil {
				t.Fatal(err)
			}
		}},
		{"removed", func(t *testing.T, path, _ string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				st, send, config := newFileStack(t)
				topic, report := st.postHeld(send)
				tc.change(t, report, config)
				st.holdTelegram(false)
				st.showing(topic, "Here it is.")
				if got := st.document("report.csv"); got != "a,b\n1,2\n" {
					t.Errorf("Telegram got %q, want the report as it was posted", got)
				}
			})
		})
	}
}

// TestFileAfterCrash: the agent posts a report, Telegram is unreachable,
// the report is rewritten, parley is killed (kill -9) and started again on
// what it left — the old data directory gone, only the copy it wrote
// there carried over. The journal's replay sends the report as it was
// posted.
func TestFileAfterCrash(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st, send, _ := newFileStack(t)
		topic, report := st.postHeld(send)
		writeFile(t, report, "rewritten,after\nthe,post\n")
		killed := st.cfg.DataDir
		st.crash()
		if err := os.RemoveAll(killed); err != nil {
			t.Fatal(err)
		}
		st.start()
		st.showing(topic, "Here it is.")
		if got := st.document("report.csv"); got != "a,b\n1,2\n" {
			t.Errorf("after the restart Telegram got %q, want the report as it was posted", got)
		}
	})
}
