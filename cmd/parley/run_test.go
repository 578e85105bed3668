package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
)

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Run(context.Background(), []string{"version"}, nil, nil, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "parley ") {
		t.Errorf("version printed %q", out.String())
	}
}

// TestUsage: parley without a command, or with one it does not know,
// prints its usage on stderr and exits 2; help prints it on stdout and
// succeeds.
func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args        []string
		exit        int
		out, stderr string
	}{
		{nil, exitUsage, "", "Usage:"},
		{[]string{"serv"}, exitUsage, "", `unknown command "serv"`},
		{[]string{"help"}, exitOK, "Usage:", ""},
		{[]string{"--help"}, exitOK, "Usage:", ""},
		{[]string{"--version"}, exitOK, "parley ", ""},
	} {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), c.args, nil, nil, &out, &errOut)
		if code != c.exit || !strings.Contains(out.String(), c.out) || !strings.Contains(errOut.String(), c.stderr) ||
			(c.out == "") != (out.Len() == 0) {
			t.Errorf("parley %q: exit %d, stdout %q, stderr %q", c.args, code, out.String(), errOut.String())
		}
	}
}

func TestServeRefusesBadConfigNamingTheKey(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"bad env value", []string{"serve"}, []string{"PARLEY_LOG_FORMAT=yaml"}, "PARLEY_LOG_FORMAT"},
		{"bad flag value", []string{"serve", "--listen", "0.0.0.0:80"}, nil, "token"},
		{"adapter not in this build", []string{"serve"}, []string{"PARLEY_DISCORD_TOKEN=d-1"}, "no Discord adapter"},
		{"matrix user id malformed", []string{"serve"}, []string{"PARLEY_MATRIX_HOMESERVER=http://127.0.0.1:1", "PARLEY_MATRIX_USER_ID=parley", "PARLEY_MATRIX_ACCESS_TOKEN=syt-1", "PARLEY_MATRIX_ALLOWED_USERS=@a:e"}, "matrix.user_id: \"parley\" is not a full Matrix id"},
		{"slack channel by name", []string{"serve"}, []string{"PARLEY_SLACK_BOT_TOKEN=xoxb-1", "PARLEY_SLACK_APP_TOKEN=xapp-1", "PARLEY_SLACK_CHANNEL=#general", "PARLEY_SLACK_ALLOWED_USERS=U1AB"}, "slack.channel: \"#general\" is not a channel id"},
		{"unknown flag", []string{"serve", "--nope"}, nil, "flag provided but not defined"},
		{"missing config file", []string{"serve", "--config", "/nonexistent/parley.toml"}, nil, "/nonexistent/parley.toml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string{"PARLEY_DATA_DIR=" + t.TempDir()}, tt.env...)
			var out, errOut bytes.Buffer
			code := Run(context.Background(), tt.args, env, nil, &out, &errOut)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr: %s", code, exitUsage, errOut.String())
			}
			if !strings.Contains(errOut.String(), tt.want) {
				t.Errorf("stderr %q does not mention %q", errOut.String(), tt.want)
			}
		})
	}
}

// TestServeStartsAndStopsGracefully runs the daemon with a config file
// enabling a platform (Telegram, on its fake Bot API) and stops it as
// SIGTERM would (by ending the context).
func TestServeStartsAndStopsGracefully(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "parley.toml")
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("Team")
	file := fmt.Sprintf("[log]\nformat = \"json\"\n[telegram]\ntoken = %q\napi_url = %q\nchat_id = %d\nallowed_users = [1]\n", srv.Token, srv.URL, forum)
	if err := os.WriteFile(cfg, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var errOut servetest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--config", cfg, "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0"}, nil, nil, &bytes.Buffer{}, &errOut)
	}()
	deadline := time.After(10 * time.Second)
	for !strings.Contains(errOut.String(), `"msg":"parley started"`) {
		select {
		case code := <-done:
			t.Fatalf("exited early with %d: %s", code, errOut.String())
		case <-deadline:
			t.Fatalf("no start-up log line: %s", errOut.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	addr := startedAt(t, errOut.String())
	// "parley started" is logged once everything is built; the adapters,
	// the web page's included, attach to the running daemon a moment
	// later, and until then the probe truthfully answers 503.
	for ready := time.After(10 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/api/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-ready:
			t.Fatalf("/api/health never answered 200: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	for path, want := range map[string]string{
		"/api/health": `{"ok":true,`,
		"/metrics":    "parley_outbox_queue_depth",
		"/":           "<title>parley",
	} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %.200q, want %q", path, resp.StatusCode, body, want)
		}
	}
	// A second parley on the same data directory says so.
	var errOut2 bytes.Buffer
	code := Run(context.Background(), []string{"serve", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0"}, nil, nil, &bytes.Buffer{}, &errOut2)
	if want := "another parley is using " + filepath.Join(dir, "data"); code == exitOK || !strings.Contains(errOut2.String(), want) {
		t.Errorf("second parley on the same data directory: exit %d, stderr %q; want it to say %q", code, errOut2.String(), want)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop")
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "parley.db")); err != nil {
		t.Errorf("no database in the data directory: %v", err)
	}
	if !strings.Contains(errOut.String(), `"adapters":["telegram","web"]`) {
		t.Errorf("configured adapter not started: %s", errOut.String())
	}
}

// startedAt returns the listen address from the "parley started" log line.
func startedAt(t *testing.T, log string) string {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Msg    string `json:"msg"`
			Listen string `json:"listen"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "parley started" {
			return rec.Listen
		}
	}
	t.Fatalf("no start-up line in %s", log)
	return ""
}
