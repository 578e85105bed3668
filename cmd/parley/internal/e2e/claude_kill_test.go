//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
)

// Crash safety of the agent parley runs: `parley serve` (a child process,
// parleyBin) runs the real Claude Code CLI against the fake Messages
// API in the test process, and is killed with SIGKILL in the middle of a
// turn. Linux only: what the kill left running is found in /proc.

// TestClaudeCodeKilledMidTurn: the agent has started a Bash command that
// does not end and streams its answer slowly; once part of the answer is
// visible in the topic, parley is killed with SIGKILL and restarted on the
// same data directory. The person's message is answered once: the model is
// asked it again (Claude Code keeps no answer of a killed turn, and its
// resumed conversation first ends a turn of its own reporting the
// unfinished command, which must not pass for the answer), the answer is
// shown in exactly one message, nothing is posted twice, and nothing the
// killed run's claude started (claude itself, its Bash command) runs on.
// The next message continues the conversation.
func TestClaudeCodeKilledMidTurn(t *testing.T) {
	t.Parallel()
	cli := claudetest.CLI(t)
	api := claudetest.NewAPI(t)
	srv := telegramtest.NewServer(t, telegramtest.Options{RichMessages: true})
	forum := srv.NewForum("Team")
	dir, listen, workdir := t.TempDir(), freeAddr(t), t.TempDir()
	env := []string{
		"PARLEY_TELEGRAM_TOKEN=" + srv.Token, "PARLEY_TELEGRAM_API_URL=" + srv.URL,
		"PARLEY_TELEGRAM_CHAT_ID=" + strconv.FormatInt(forum, 10),
		"PARLEY_TELEGRAM_ALLOWED_USERS=" + strconv.FormatInt(ann.ID, 10),
		"PARLEY_LOG_FORMAT=json", "PARLEY_LOG_LEVEL=debug",
		"PARLEY_AGENT_KIND=claude-code", "PARLEY_AGENT_COMMAND=" + cli, "PARLEY_AGENT_WORKDIR=" + workdir,
		// [agent] env is comma-separated in the environment: none of the
		// test environment's values holds a comma.
		"PARLEY_AGENT_ENV=" + strings.Join(claudetest.Env(t, api.URL), ","),
	}
	d := startDaemon(t, dir, listen, env...)
	cc := &ccStack{tgStack: &tgStack{stack: stackOf(t, nil), srv: srv, forum: forum}, api: api, workdir: workdir}
	topic := cc.newTopic("work")

	// The model first starts a command that never ends, in the background
	// (Claude Code runs it in a session of its own, where no signal to
	// claude's process group reaches it; it asks first, and Ann approves),
	// then streams its answer slowly.
	const question = "Why is the build slow?"
	pieces := []string{"The build is slow", " because every package", " is compiled with the race detector"}
	for i := range 40 {
		pieces = append(pieces, fmt.Sprintf(" and step %d waits", i))
	}
	pieces = append(pieces, ". KILLED-RUN-END")
	api.Script(
		claudetest.Reply{Blocks: []claudetest.Block{claudetest.Tool("Bash", map[string]any{
			"command": "tail -f /dev/null", "description": "Watch the build log", "run_in_background": true})}},
		claudetest.Reply{Blocks: []claudetest.Block{claudetest.Chunks(300*time.Millisecond, pieces...)}},
	)
	srv.SendText(forum, topic, ann, question)
	ask := cc.question(topic, "tail -f /dev/null")
	if len(ask.Buttons) == 0 || ask.Buttons[0][0].Text != "Approve" {
		t.Fatalf("the background command was not put to people: %q %+v", ask.Text, ask.Buttons)
	}
	srv.Click(forum, ask.ID, ann, ask.Buttons[0][0].CallbackData)
	// Killed once the output message was edited: parley had recorded the
	// message by then (a kill between Telegram's answer to the send and
	// that record leaves a message parley cannot know of, which no
	// platform without idempotency keys avoids).
	output := cc.showing(topic, "because every package")
	cc.await("the streamed answer edited", func() bool {
		for _, m := range botMessages(srv.Messages(forum, topic)) {
			if m.ID == output.ID && m.Edits > 0 {
				return true
			}
		}
		return false
	})

	// What the killed run's claude started: every process carrying the
	// marker its pidfile records.
	recs := agentPidfiles(t, dir)
	if len(recs) != 1 {
		t.Fatalf("%d agent pidfiles in %s, want one: %+v", len(recs), filepath.Join(dir, "agents"), recs)
	}
	var left []procID
	servetest.PollUntil(t, 30*time.Second, "claude and its background command", func() bool {
		left = markedProcs(recs[0].Marker)
		return hasCommand(left, "tail -f /dev/null") && hasPID(left, recs[0].PID)
	}, nil)
	requestsBefore := len(api.ModelRequests())
	d.kill()
	if n := len(cc.shown(topic, "KILLED-RUN-END")); n != 0 {
		t.Fatal("the turn ended before the kill; the test needs it killed mid-stream")
	}
	t.Logf("killed parley mid-turn; its agent's processes: %v; still running after the kill: %v", left, running(left))

	// The model's answer to the message handed again.
	const answer = "The build is slow because of the race detector. RESTARTED-RUN-END"
	api.Say(claudetest.Chunks(50*time.Millisecond, "The build is slow", " because of the race detector.", " RESTARTED-RUN-END"))
	startDaemon(t, dir, listen, env...)
	t.Cleanup(func() {
		if t.Failed() {
			logRequests(t, api)
			for _, m := range botMessages(srv.Messages(forum, topic)) {
				t.Logf("topic message %d (%d edits): %q", m.ID, m.Edits, m.Text)
			}
		}
	})
	if m := cc.answeredOnce(topic, answer); m.ID != output.ID {
		t.Errorf("the answer is in message %d, not in the killed turn's output message %d", m.ID, output.ID)
	}
	if n := len(cc.shown(topic, "because every package")); n != 0 {
		t.Errorf("the killed turn's partial answer is still shown in %d messages", n)
	}
	if still := running(left); len(still) > 0 {
		t.Errorf("processes of the killed run's agent still run after the restart: %v", still)
	}
	reqs := api.ModelRequests()
	if len(reqs) <= requestsBefore {
		t.Fatal("the restarted parley answered without asking the model")
	}
	// Claude Code 2.1.328 keeps the killed turn's message (written before
	// the model was asked) and its finished tool calls, not the partial
	// answer; resumed, it adds "No response requested." as the answer.
	// parley cannot see from outside what the transcript kept, so it hands
	// the message again: the model is asked it now, as the last message,
	// and may see it twice, never not at all.
	again := reqs[requestsBefore]
	users := again.Texts("user")
	if len(users) == 0 || users[len(users)-1] != question {
		t.Errorf("the first model request after the restart does not end with the question: %q", users)
	}
	t.Logf("the model was sent the question %d times after the restart", strings.Count(strings.Join(users, "\n"), question))
	if strings.Contains(strings.Join(again.Texts("assistant"), "\n"), "every package") {
		t.Errorf("the model was sent the killed turn's partial answer: %q", again.Texts("assistant"))
	}

	// The next message continues the conversation.
	const second = "And how do I make it faster?"
	api.Say(claudetest.Text("Run only the test you changed. SECOND-END"))
	srv.SendText(forum, topic, ann, second)
	cc.answeredOnce(topic, "Run only the test you changed. SECOND-END")
	reqs = api.ModelRequests()
	last := reqs[len(reqs)-1]
	seen := strings.Join(last.Texts("user"), "\n") + "\n" + strings.Join(last.Texts("assistant"), "\n")
	for _, want := range []string{question, "RESTARTED-RUN-END", second} {
		if !strings.Contains(seen, want) {
			t.Errorf("the second turn's request does not carry %q:\n%s", want, seen)
		}
	}
	if n := strings.Count(seen, "RESTARTED-RUN-END"); n != 1 {
		t.Errorf("the second turn's request carries the answer %d times, want once", n)
	}

	// The restart's first start (--session-id of a conversation the
	// killed turn created) fails; the resume that follows is no failure
	// people need to hear of.
	postedOnceNoFailure(t, botMessages(srv.Messages(forum, topic)))
}

// postedOnceNoFailure checks that no text was posted twice in msgs and
// that none tells people of a failure (⚠️).
func postedOnceNoFailure(t *testing.T, msgs []telegramtest.Message) {
	t.Helper()
	texts := map[string]int{}
	for _, m := range msgs {
		texts[m.Text]++
	}
	for text, n := range texts {
		if n > 1 {
			t.Errorf("posted %d times in the topic: %q", n, text)
		}
		if strings.Contains(text, "⚠️") {
			t.Errorf("people were told of a failure: %q", text)
		}
	}
}

// agentPidRecord is what the Claude Code driver writes in a pidfile under
// data_dir/agents: the process, its start time, and the marker variable
// everything it starts inherits.
type agentPidRecord struct {
	PID    int    `json:"pid"`
	Start  uint64 `json:"start"`
	Marker string `json:"marker"`
}

// agentPidfiles reads the pidfiles the daemon's agents left in dir.
func agentPidfiles(t *testing.T, dir string) []agentPidRecord {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "agents", "*.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var out []agentPidRecord
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rec agentPidRecord
		if err := json.Unmarshal(b, &rec); err != nil || rec.PID <= 1 || rec.Marker == "" {
			t.Fatalf("pidfile %s: %q: %v", f, b, err)
		}
		out = append(out, rec)
	}
	return out
}

// procID names one process for good: a pid with its start time (field 22
// of /proc/PID/stat), since a pid may be given to another process.
type procID struct {
	PID     int
	Start   uint64
	Command string
}

func (p procID) String() string { return fmt.Sprintf("%d %q", p.PID, p.Command) }

// markedProcs lists the live processes whose environment holds marker.
func markedProcs(marker string) []procID {
	ents, _ := os.ReadDir("/proc")
	var out []procID
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(append(append([]byte{0}, env...), 0), []byte("\x00"+marker+"\x00")) {
			continue
		}
		start, state, ok := procStat(pid)
		if !ok || state == "Z" {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, procID{PID: pid, Start: start, Command: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))})
	}
	return out
}

// running returns the processes of ps that still run: the same pid with
// the same start time, not a zombie (a zombie has ended; only its parent's
// wait is missing).
func running(ps []procID) []procID {
	var out []procID
	for _, p := range ps {
		if start, state, ok := procStat(p.PID); ok && start == p.Start && state != "Z" {
			out = append(out, p)
		}
	}
	return out
}

// procStat reads a process's start time and state from /proc/PID/stat;
// the fields are counted after the command name's last ')', which may
// hold spaces.
func procStat(pid int) (start uint64, state string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, "", false
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return start, f[0], err == nil
}

func hasCommand(ps []procID, s string) bool {
	for _, p := range ps {
		if strings.Contains(p.Command, s) {
			return true
		}
	}
	return false
}

func hasPID(ps []procID, pid int) bool {
	for _, p := range ps {
		if p.PID == pid {
			return true
		}
	}
	return false
}

// logRequests logs what the model was sent, for a failed test.
func logRequests(t *testing.T, api *claudetest.API) {
	for i, r := range api.Requests() {
		t.Logf("request %d %s %s stream=%v tools=%d users=%q assistant=%q", i, r.Method, r.Path, r.Stream, r.Tools, r.Texts("user"), r.Texts("assistant"))
	}
}
