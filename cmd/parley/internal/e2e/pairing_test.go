package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

var pairingCodeRE = regexp.MustCompile(`[A-Z2-9]{4}-[A-Z2-9]{4}`)

// TestTelegramPairing: with [access] pairing on, a stranger who writes to
// the bot privately gets a code and nothing else; the operator sees it with
// `parley pairing list`, admits them with `parley pairing approve`, and
// from then on their messages reach the agent. Strangers in the group hear
// nothing.
func TestTelegramPairing(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	st := newTGStackOn(t, srv)
	st.cfg.Access.Pairing = true
	st.start()

	dm := srv.NewPrivateChat(stranger)
	srv.SendText(st.forum, 0, stranger, "hello group")
	srv.SendText(dm, 0, stranger, "let me in")
	var code string
	st.await("a pairing code in the private chat", func() bool {
		for _, m := range botMessages(srv.Messages(dm, 0)) {
			if c := pairingCodeRE.FindString(m.Text); c != "" && strings.Contains(m.Text, "parley pairing approve "+c) {
				code = c
				return true
			}
		}
		return false
	})
	var r readResult
	st.agent.call(t, "chat_read_since", map[string]any{}, &r)
	if len(r.Messages) != 0 {
		t.Fatalf("a stranger's message reached the agent: %+v", r.Messages)
	}
	if msgs := botMessages(srv.Messages(st.forum, 0)); len(msgs) != 0 {
		t.Fatalf("the bot spoke to a stranger in the group: %+v", msgs)
	}

	pairing := func(args ...string) (int, string) {
		t.Helper()
		argv := append([]string{"pairing", "--url", "http://" + st.m.Addr(), "--token", "s3cret"}, args...)
		return runParley(t, []string{"PARLEY_DATA_DIR=" + t.TempDir()}, argv...)
	}
	if exit, out := pairing("list"); exit != exitOK || !strings.Contains(out, code) || !strings.Contains(out, "666") || !strings.Contains(out, "Mallory") {
		t.Fatalf("pairing list: exit %d\n%s", exit, out)
	}
	if exit, out := pairing("approve", strings.ToLower(code)); exit != exitOK || !strings.Contains(out, "admitted 666") {
		t.Fatalf("pairing approve: exit %d\n%s", exit, out)
	}
	st.await("the welcome", func() bool {
		for _, m := range botMessages(srv.Messages(dm, 0)) {
			if strings.Contains(m.Text, "You're in") {
				return true
			}
		}
		return false
	})
	srv.SendText(dm, 0, stranger, "hello again")
	if r := st.heard(""); len(r.Messages) != 1 || r.Messages[0].Content != "hello again" {
		t.Fatalf("after approval the agent read %+v", r.Messages)
	}
	if exit, out := pairing("approve", code); exit != exitFailed || !strings.Contains(out, "no pairing code "+code+" is waiting") {
		t.Errorf("approving twice: exit %d\n%s", exit, out)
	}
	if exit, out := pairing("list"); exit != exitOK || !strings.Contains(out, "No pairing codes are waiting") || !strings.Contains(out, "ADMITTED") {
		t.Errorf("pairing list after approval: exit %d\n%s", exit, out)
	}
	if exit, out := pairing("approve"); exit != exitUsage || !strings.Contains(out, "parley pairing approve CODE") {
		t.Errorf("approve without a code: exit %d\n%s", exit, out)
	}
}
