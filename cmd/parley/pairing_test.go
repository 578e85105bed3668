package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

var pairingCodeRE = regexp.MustCompile(`[A-Z2-9]{4}-[A-Z2-9]{4}`)

// TestPairingCommand: `parley pairing` as an operator uses it against a
// running daemon with [access] pairing on and a stranger who asked to be
// let in (the end-to-end story, from the stranger's private chat on
// Telegram to their first message, is in internal/e2e): list shows the
// waiting code and who asked, approve admits them (a code is case- and
// dash-tolerant), approving twice fails, deny drops a code, and the
// admitted person is listed. A wrong token, a missing code and a bad
// configuration are clear errors with their own exit codes.
func TestPairingCommand(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.DataDir, cfg.HTTP.Listen, cfg.HTTP.Token = t.TempDir(), "127.0.0.1:0", "s3cret"
	cfg.Access.Pairing = true
	// Only person 1 is on the allow-list: 666 and 667 are strangers.
	table := []platform.Platform{testPlatform("fake", probeSection{on: true, users: []string{"1"}},
		func(context.Context, probeSection, platform.Deps) (core.Adapter, error) {
			return fake.New("fake", core.Capabilities{Markup: core.MarkupMarkdown}), nil
		})}
	m := servetest.Start(t, cfg, table)
	ask := func(id, name string) {
		t.Helper()
		cmd := core.Command{Kind: core.Pair, Origin: "fake", Actor: core.Actor{ID: id, Name: name}, Place: core.Place{Chat: "dm-" + id}}
		if _, err := m.Daemon().Service.Handle(t.Context(), cmd); err != nil {
			t.Fatalf("%s asks to pair: %v", name, err)
		}
	}
	pairing := func(env []string, args ...string) (int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		argv := append([]string{"pairing", "--url", "http://" + m.Addr()}, args...)
		code := Run(t.Context(), argv, append(env, "PARLEY_DATA_DIR="+t.TempDir()), nil, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	token := []string{"PARLEY_HTTP_TOKEN=s3cret"}

	ask("666", "Mallory")
	exit, out := pairing(token, "list")
	code := pairingCodeRE.FindString(out)
	if exit != exitOK || code == "" || !strings.Contains(out, "666") || !strings.Contains(out, "Mallory") || !strings.Contains(out, "fake") {
		t.Fatalf("pairing list: exit %d\n%s", exit, out)
	}
	if exit, out := pairing(nil, "--token", "wrong", "list"); exit != exitFailed || !strings.Contains(out, "parley pairing:") {
		t.Errorf("a wrong token: exit %d\n%s", exit, out)
	}
	if exit, out := pairing(token, "approve", strings.ToLower(code)); exit != exitOK || !strings.Contains(out, "admitted 666 (Mallory) on fake") {
		t.Fatalf("pairing approve: exit %d\n%s", exit, out)
	}
	if exit, out := pairing(token, "approve", code); exit != exitFailed || !strings.Contains(out, "no pairing code "+code+" is waiting") {
		t.Errorf("approving twice: exit %d\n%s", exit, out)
	}

	ask("667", "Eve")
	_, out = pairing(token, "list")
	second := pairingCodeRE.FindString(strings.Split(out, "ADMITTED")[0])
	if second == "" || second == code {
		t.Fatalf("the second stranger's code is not listed:\n%s", out)
	}
	if exit, out := pairing(token, "deny", second); exit != exitOK || !strings.Contains(out, "dropped code "+second+" of 667 (Eve) on fake") {
		t.Errorf("pairing deny: exit %d\n%s", exit, out)
	}
	exit, out = pairing(token, "list")
	if exit != exitOK || !strings.Contains(out, "No pairing codes are waiting") || !strings.Contains(out, "ADMITTED") || !strings.Contains(out, code) || strings.Contains(out, "Eve") {
		t.Errorf("pairing list after approve and deny: exit %d\n%s", exit, out)
	}

	for _, args := range [][]string{{"approve"}, {"list", "extra"}, {"revoke", code}, {}} {
		if exit, out := pairing(token, args...); exit != exitUsage || !strings.Contains(out, "parley pairing approve CODE") {
			t.Errorf("pairing %q: exit %d\n%s", args, exit, out)
		}
	}
	if exit, out := pairing(append(token, "PARLEY_HTTP_LISTEN=not an address"), "list"); exit != exitUsage || !strings.Contains(out, "invalid configuration") {
		t.Errorf("a bad configuration: exit %d\n%s", exit, out)
	}
}
