//go:build linux

package acp

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/agent"
	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
)

// OpenCodeVersion is the OpenCode release the integration tests run: npm
// opencode-ai at exactly this version, installed by the Makefile into
// $PARLEY_OPENCODE_DIR (default ~/.cache/parley/opencode-<version>).
const OpenCodeVersion = "1.18.33"

// openCodeDirEnv names the variable holding the directory OpenCode was
// installed into (the npm prefix).
const openCodeDirEnv = "PARLEY_OPENCODE_DIR"

// openCodeBin returns the opencode binary, skipping the test when it is
// missing (failing it in CI or with PARLEY_TEST_DEPS=required).
func openCodeBin(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv(openCodeDirEnv)
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "parley", "opencode-"+OpenCodeVersion)
	}
	bin := filepath.Join(dir, "node_modules", ".bin", "opencode")
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("no OpenCode at %s (%s): run make test-deps", bin, openCodeDirEnv)
		if os.Getenv("CI") != "" || os.Getenv("PARLEY_TEST_DEPS") == "required" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return bin
}

// openCodeModel is the model the tests configure; the fake API answers
// any.
const openCodeModel = "claude-sonnet-4-5"

// openCode is a real OpenCode behind the driver, talking only to a fake
// Anthropic Messages API.
type openCode struct {
	api  *claudetest.API
	opts Options
}

// newOpenCode writes the work dir's opencode.json (the fake API as the
// anthropic provider's baseURL, shell calls asked for) and gives OpenCode
// a HOME of its own, where it keeps its sessions.
func newOpenCode(tb testing.TB) *openCode {
	tb.Helper()
	bin := openCodeBin(tb)
	api := claudetest.NewAPI(tb)
	work := tb.TempDir()
	cfg := fmt.Sprintf(`{
  "$schema": "https://opencode.ai/config.json",
  "provider": {"anthropic": {"options": {"baseURL": %q, "apiKey": %q}}},
  "model": "anthropic/%s",
  "permission": {"bash": "ask"}
}`, api.URL+"/v1", claudetest.APIKey, openCodeModel)
	if err := os.WriteFile(filepath.Join(work, "opencode.json"), []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	home := tb.TempDir()
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	opts := Options{
		Name:    "opencode",
		Command: bin,
		Args:    []string{"acp"},
		Workdir: work,
		Env: []string{"PATH=" + path, "HOME=" + home,
			// Offline: no model list, update, share or LSP download.
			"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_DEFAULT_PLUGINS=1"},
		StateDir:    filepath.Join(tb.TempDir(), "state"),
		CallTimeout: 3 * time.Minute,
		Logger:      slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	return &openCode{api: api, opts: opts}
}

// start starts a driver of oc for the test.
func (oc *openCode) driver(tb testing.TB) *Driver {
	d := New(oc.opts)
	tb.Cleanup(func() { d.Close() })
	return d
}

// TestOpenCodeAnswer: a prompt is answered with streamed text, each chunk
// as it comes, the whole block at the end.
func TestOpenCodeAnswer(t *testing.T) {
	oc := newOpenCode(t)
	d := oc.driver(t)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	oc.api.Say(claudetest.Chunks(20*time.Millisecond, "Hello ", "from ", "the fake."))
	got := runTurn(t, c, "hi")
	want := []agent.Event{
		agent.Init{Conversation: c.ID(), Model: "anthropic/" + openCodeModel},
		agent.TextDelta{Block: 0, Text: "Hello "},
		agent.TextDelta{Block: 0, Text: "from "},
		agent.TextDelta{Block: 0, Text: "the fake."},
		agent.Text{Block: 0, Text: "Hello from the fake."},
		agent.Result{Stop: agent.StopEndTurn},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %#v\nwant %#v", got, want)
	}
	if reqs := oc.api.ModelRequests(); len(reqs) != 1 || !slices.Contains(reqs[0].Texts("user"), "hi") {
		t.Fatalf("model requests %+v", reqs)
	}
}

// bashScript makes the model call OpenCode's bash tool with command, then
// answer "Done."
func (oc *openCode) bashScript(command string) {
	oc.api.Say(claudetest.Text("Let me run it."), claudetest.Tool("bash", map[string]string{"command": command, "description": "Run it"}))
	oc.api.Say(claudetest.Text("Done."))
}

// TestOpenCodeShellApproved: a shell call is asked for, approved, run, and
// its output and exit code seen; the model gets the output.
func TestOpenCodeShellApproved(t *testing.T) {
	oc := newOpenCode(t)
	d := oc.driver(t)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	cmd := "echo parley-$((6*7)); exit 3"
	oc.bashScript(cmd)
	if err := c.Send(t.Context(), "run it"); err != nil {
		t.Fatal(err)
	}
	got := collect(t, c, isPermission)
	pr := got[len(got)-1].(agent.PermissionRequest)
	if pr.Show != cmd || !pr.CanAlways || pr.ToolName != "bash" {
		t.Fatalf("request %#v", pr)
	}
	if uses := of[agent.ToolUse](got); len(uses) != 1 || uses[0].Kind != "execute" || uses[0].ID != pr.ToolUseID {
		t.Fatalf("tool use %#v", got)
	}
	if err := c.Answer(pr.RequestID, agent.Decision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	rest := collect(t, c, isResult)
	res := of[agent.ToolResult](rest)
	if len(res) != 1 || res[0].Stdout != "parley-42\n" || res[0].ExitCode == nil || *res[0].ExitCode != 3 || res[0].IsError {
		t.Fatalf("result %#v", rest)
	}
	if txt := of[agent.Text](rest); len(txt) != 1 || txt[0].Text != "Done." {
		t.Fatalf("text %#v", rest)
	}
	if r := lastResult(t, rest); r.Stop != agent.StopEndTurn {
		t.Fatalf("result %+v", r)
	}
	reqs := oc.api.ModelRequests()
	if tr := reqs[len(reqs)-1].ToolResults(); len(tr) != 1 || !strings.Contains(tr[0].Text, "parley-42") {
		t.Fatalf("the model got %+v", tr)
	}
}

// TestOpenCodeShellRejected: a rejected shell call does not run; OpenCode
// marks it failed and ends the turn.
func TestOpenCodeShellRejected(t *testing.T) {
	oc := newOpenCode(t)
	d := oc.driver(t)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	oc.bashScript("touch ran")
	if err := c.Send(t.Context(), "run it"); err != nil {
		t.Fatal(err)
	}
	got := collect(t, c, isPermission)
	if err := c.Answer(got[len(got)-1].(agent.PermissionRequest).RequestID, agent.Decision{Message: "not now"}); err != nil {
		t.Fatal(err)
	}
	rest := collect(t, c, isResult)
	res := of[agent.ToolResult](rest)
	if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Stderr, "rejected") {
		t.Fatalf("result %#v", rest)
	}
	if r := lastResult(t, rest); r.Stop != agent.StopEndTurn {
		t.Fatalf("result %+v", r)
	}
	if _, err := os.Stat(filepath.Join(oc.opts.Workdir, "ran")); !os.IsNotExist(err) {
		t.Fatalf("the rejected command ran: %v", err)
	}
}

// TestOpenCodeTwoSessions: two conversations on one OpenCode process.
func TestOpenCodeTwoSessions(t *testing.T) {
	oc := newOpenCode(t)
	d := oc.driver(t)
	c1 := start(t, d, agent.StartRequest{Session: "s1"})
	pid := d.cur.proc.PID
	c2 := start(t, d, agent.StartRequest{Session: "s2"})
	if c1.ID() == c2.ID() || d.cur.proc.PID != pid {
		t.Fatalf("ids %s %s; pid %d then %d", c1.ID(), c2.ID(), pid, d.cur.proc.PID)
	}
	oc.api.Say(claudetest.Text("one"))
	if txt := of[agent.Text](runTurn(t, c1, "first")); len(txt) != 1 || txt[0].Text != "one" {
		t.Fatalf("first %v", txt)
	}
	oc.api.Say(claudetest.Text("two"))
	if txt := of[agent.Text](runTurn(t, c2, "second")); len(txt) != 1 || txt[0].Text != "two" {
		t.Fatalf("second %v", txt)
	}
	// Each session's model request holds its own conversation only.
	for _, r := range oc.api.ModelRequests() {
		u := r.Texts("user")
		if slices.Contains(u, "first") && slices.Contains(u, "second") {
			t.Fatalf("the sessions mixed: %v", u)
		}
	}
}

// TestOpenCodeRestart: after the driver (parley) restarts, the
// conversation continues: resumed, or loaded with its replay not
// reported; the model sees the earlier turn.
func TestOpenCodeRestart(t *testing.T) {
	for _, load := range []bool{false, true} {
		t.Run(map[bool]string{false: "resume", true: "load"}[load], func(t *testing.T) {
			oc := newOpenCode(t)
			d := New(oc.opts)
			c := start(t, d, agent.StartRequest{Session: "s1"})
			oc.api.Say(claudetest.Text("the first answer"))
			runTurn(t, c, "first question")
			d.Close()

			d2 := oc.driver(t)
			d2.noResume = load
			var mu sync.Mutex
			replayed := 0
			d2.lineRead = func(line []byte) {
				if bytes.Contains(line, []byte("the first answer")) {
					mu.Lock()
					replayed++
					mu.Unlock()
				}
			}
			c2 := start(t, d2, agent.StartRequest{Session: "s1", Conversation: c.ID(), Resume: true})
			mu.Lock()
			if load && replayed == 0 || !load && replayed > 0 {
				t.Errorf("load %v: the first answer came %d times", load, replayed)
			}
			mu.Unlock()
			oc.api.Say(claudetest.Text("the second answer"))
			got := runTurn(t, c2, "second question")
			for _, e := range got {
				if strings.Contains(fmtEvent(e), "first") {
					t.Fatalf("the history was reported: %#v", got)
				}
			}
			if txt := of[agent.Text](got); len(txt) != 1 || txt[0].Text != "the second answer" {
				t.Fatalf("events %#v", got)
			}
			reqs := oc.api.ModelRequests()
			if u := reqs[len(reqs)-1].Texts("user"); !slices.Contains(u, "first question") {
				t.Fatalf("the model lost the first turn: %v", u)
			}
		})
	}
}

// TestOpenCodeCancel: Interrupt mid-stream ends the turn cancelled, and
// the next turn runs.
func TestOpenCodeCancel(t *testing.T) {
	oc := newOpenCode(t)
	d := oc.driver(t)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	chunks := make([]string, 50)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("word%d ", i)
	}
	// 50 chunks 1 s apart: the turn is cut long before its end.
	oc.api.Say(claudetest.Chunks(time.Second, chunks...))
	if err := c.Send(t.Context(), "talk"); err != nil {
		t.Fatal(err)
	}
	collect(t, c, func(e agent.Event) bool { _, ok := e.(agent.TextDelta); return ok })
	if err := c.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := lastResult(t, collect(t, c, isResult)); r.Stop != agent.StopCancelled {
		t.Fatalf("result %+v", r)
	}
	oc.api.Say(claudetest.Text("again"))
	if r := lastResult(t, runTurn(t, c, "next")); r.Stop != agent.StopEndTurn {
		t.Fatalf("result %+v", r)
	}
}

// TestOpenCodeAPIError: a model API that refuses ends the turn with an
// error saying what the API said (OpenCode answers the prompt with a
// JSON-RPC error), and the conversation goes on.
func TestOpenCodeAPIError(t *testing.T) {
	oc := newOpenCode(t)
	d := oc.driver(t)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	oc.api.Script(claudetest.Reply{Status: 401})
	r := lastResult(t, runTurn(t, c, "hi"))
	if r.Stop != agent.StopError || len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "invalid x-api-key") {
		t.Fatalf("result %+v", r)
	}
	oc.api.Say(claudetest.Text("fine now"))
	if txt := of[agent.Text](runTurn(t, c, "again")); len(txt) != 1 || txt[0].Text != "fine now" {
		t.Fatalf("text %v", txt)
	}
}
