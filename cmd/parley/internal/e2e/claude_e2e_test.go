package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
)

// The agent parley runs, end to end: parley serve with [agent] kind =
// "claude-code" runs the real Claude Code CLI, which talks to a fake
// Anthropic Messages API (claudetest) scripted per test; people write in a
// Telegram topic (telegramtest) and the page's state is read over /api.

// ccStack is a Telegram stack whose agent is Claude Code run by parley.
type ccStack struct {
	*tgStack
	api     *claudetest.API
	workdir string
}

func newCCStack(t *testing.T, configure func(*config.Agent)) *ccStack {
	t.Helper()
	return newCCStackConfig(t, func(c *config.Config) {
		if configure != nil {
			configure(&c.Agent)
		}
	})
}

// newCCStackConfig is newCCStack whose whole configuration configure may
// change before the start.
func newCCStackConfig(t *testing.T, configure func(*config.Config)) *ccStack {
	t.Helper()
	cli := claudetest.CLI(t)
	api := claudetest.NewAPI(t)
	st := newTGStackStopped(t, telegramtest.Options{RichMessages: true})
	st.noAgent = true
	if os.Getenv("PARLEY_TEST_LOG") != "" {
		st.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cc := &ccStack{tgStack: st, api: api, workdir: t.TempDir()}
	st.cfg.Agent = config.Agent{Kind: config.AgentClaudeCode, Command: cli, Workdir: cc.workdir,
		Permissions: config.PermissionsAsk, MaxRunning: 4, Env: claudetest.Env(t, api.URL)}
	if configure != nil {
		configure(&st.cfg)
	}
	st.start()
	return cc
}

// sessionID is the id of the stack's only session.
func (cc *ccStack) sessionID() string {
	cc.t.Helper()
	ss, err := cc.m.Daemon().Store.Sessions(context.Background())
	if err != nil || len(ss) != 1 {
		cc.t.Fatalf("sessions %v: %v", ss, err)
	}
	return string(ss[0].ID)
}

// shown is every bot message of the topic that contains text.
func (cc *ccStack) shown(topic int, text string) []telegramtest.Message {
	var out []telegramtest.Message
	for _, m := range botMessages(cc.srv.Messages(cc.forum, topic)) {
		if strings.Contains(m.Text, text) {
			out = append(out, m)
		}
	}
	return out
}

// question waits for the approval question about text: the message with
// buttons (the progress message names the call too).
func (cc *ccStack) question(topic int, text string) telegramtest.Message {
	cc.t.Helper()
	var q telegramtest.Message
	cc.await("the question about "+text, func() bool {
		for _, m := range cc.shown(topic, text) {
			if len(m.Buttons) > 0 {
				q = m
				return true
			}
		}
		return false
	})
	return q
}

// answeredOnce waits until text is shown in the topic and checks that it
// is shown in exactly one message.
func (cc *ccStack) answeredOnce(topic int, text string) telegramtest.Message {
	cc.t.Helper()
	m := cc.showing(topic, text)
	if n := len(cc.shown(topic, text)); n != 1 {
		cc.t.Fatalf("%q is shown in %d messages, want one", text, n)
	}
	return m
}

// TestClaudeCodeAnswersAndResumes: a person's message is answered by
// Claude Code, streamed into one output message; the next message
// continues the same conversation (the model is sent the earlier turn); a
// long answer is edited in place and whole at the end.
func TestClaudeCodeAnswersAndResumes(t *testing.T) {
	t.Parallel()
	cc := newCCStack(t, nil)
	topic := cc.newTopic("work")
	if n := len(cc.shown(topic, "no agent")); n != 0 {
		t.Fatalf("a session parley's agent listens to got a no-agent notice")
	}

	cc.api.Say(claudetest.Chunks(20*time.Millisecond, "The answer", " is", " 42."))
	cc.srv.SendText(cc.forum, topic, ann, "What is the answer?")
	cc.answeredOnce(topic, "The answer is 42.")
	if n := len(cc.shown(topic, "No agent")); n != 0 {
		t.Fatal("people were told no agent listens")
	}

	cc.api.Say(claudetest.Text("You asked for the answer."))
	cc.srv.SendText(cc.forum, topic, ann, "What did I ask?")
	cc.answeredOnce(topic, "You asked for the answer.")
	reqs := cc.api.ModelRequests()
	last := strings.Join(reqs[len(reqs)-1].Texts("user"), "\n") + strings.Join(reqs[len(reqs)-1].Texts("assistant"), "\n")
	for _, want := range []string{"What is the answer?", "The answer is 42.", "What did I ask?"} {
		if !strings.Contains(last, want) {
			t.Errorf("the second turn's request does not carry %q:\n%s", want, last)
		}
	}

	// From the web page, the answer is on the page (people's last input
	// came from there), in the same conversation. Written with the page's
	// composer (origin web): POST /api/chat is a tool's message (origin
	// api), which leaves the reply where the person last wrote, the topic.
	cc.api.Say(claudetest.Text("Hello, page."))
	session := cc.sessionID()
	slWebPost(t, http.DefaultClient, cc.m.Addr(), session, "Hello from the page.")
	cc.await("the answer on the page", func() bool { return strings.Contains(rawState(t, cc.m.Addr(), session), "Hello, page.") })
	// Absent from the topic once the turn is complete and every platform
	// operation it made is done, not merely before Telegram's paced send.
	cc.await("the page's turn complete", func() bool { return cc.status(session) == core.StatusIdle })
	cc.idle()
	if n := len(cc.shown(topic, "Hello, page.")); n != 0 {
		t.Errorf("the page's answer went to the topic too:\n%s", cc.explain(session, topic))
	}

	long := longAnswer(6000)
	var pieces []string
	for rest := long; rest != ""; {
		n := min(len(rest), 400)
		pieces = append(pieces, rest[:n])
		rest = rest[n:]
	}
	cc.api.Say(claudetest.Chunks(150*time.Millisecond, pieces...))
	cc.srv.SendText(cc.forum, topic, ann, "Explain the retry loop.")
	lastLine := strings.TrimSpace(long[strings.LastIndex(strings.TrimSpace(long), "\n")+1:])
	var output telegramtest.Message
	cc.await("the long answer whole", func() bool {
		for _, m := range botMessages(cc.srv.Messages(cc.forum, topic)) {
			if m.Markdown == long || strings.TrimSpace(m.Markdown) == strings.TrimSpace(long) {
				output = m
				return true
			}
		}
		return false
	})
	if output.Edits == 0 {
		t.Errorf("the long answer was not streamed into its message (no edits)")
	}
	if n := len(cc.shown(topic, lastLine)); n != 1 {
		t.Errorf("the answer's last line is shown in %d messages, want one", n)
	}
}

// TestClaudeCodeApprovals: a Bash call that needs permission is put to the
// session's people with three buttons; a stranger's click decides nothing;
// Ann's Approve runs it (its output in the page's ToolGroup); Deny and
// continue gives the model a denial it reads; Deny and abort ends the turn.
func TestClaudeCodeApprovals(t *testing.T) {
	t.Parallel()
	cc := newCCStack(t, nil)
	topic := cc.newTopic("work")

	cc.api.Script(claudetest.Reply{Blocks: []claudetest.Block{claudetest.Bash("touch approved.txt && echo made it", "Create a file")}},
		claudetest.Reply{Blocks: []claudetest.Block{claudetest.Text("Created approved.txt.")}})
	cc.srv.SendText(cc.forum, topic, ann, "Make a file.")
	question := cc.question(topic, "touch approved.txt")
	if len(question.Buttons) != 3 || question.Buttons[0][0].Text != "Approve" ||
		question.Buttons[1][0].Text != "Deny and continue" || question.Buttons[2][0].Text != "Deny and abort" {
		t.Fatalf("approval buttons %+v", question.Buttons)
	}
	q := cc.srv.Click(cc.forum, question.ID, stranger, question.Buttons[0][0].CallbackData)
	cc.await("the stranger's click answered", func() bool { return len(cc.srv.CallbackAnswers(q)) == 1 })
	if _, err := os.Stat(filepath.Join(cc.workdir, "approved.txt")); err == nil {
		t.Fatal("the stranger's click ran the command")
	}
	cc.srv.Click(cc.forum, question.ID, ann, question.Buttons[0][0].CallbackData)
	cc.answeredOnce(topic, "Created approved.txt.")
	if _, err := os.Stat(filepath.Join(cc.workdir, "approved.txt")); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}
	session := cc.sessionID()
	groups := getState(t, cc.m.Addr(), session).toolGroups()
	if len(groups) != 1 || !strings.Contains(groups[0], `"touch approved.txt && echo made it" exit 0 "made it`) ||
		!strings.Contains(groups[0], "approve (approve by telegram 42)") {
		t.Fatalf("the page shows tool groups %q", groups)
	}

	before := len(cc.api.ModelRequests())
	cc.api.Script(claudetest.Reply{Blocks: []claudetest.Block{claudetest.Bash("touch denied.txt", "Create another file")}},
		claudetest.Reply{Blocks: []claudetest.Block{claudetest.Text("Understood, I did not create it.")}})
	cc.srv.SendText(cc.forum, topic, ann, "Make another.")
	question = cc.question(topic, "touch denied.txt")
	cc.srv.Click(cc.forum, question.ID, ann, question.Buttons[1][0].CallbackData)
	cc.answeredOnce(topic, "Understood, I did not create it.")
	if _, err := os.Stat(filepath.Join(cc.workdir, "denied.txt")); err == nil {
		t.Fatal("a denied command ran")
	}
	reqs := cc.api.ModelRequests()
	if len(reqs) != before+2 {
		t.Fatalf("%d model requests for the denied turn, want 2", len(reqs)-before)
	}
	results := reqs[len(reqs)-1].ToolResults()
	if len(results) == 0 || !results[len(results)-1].IsError || !strings.Contains(results[len(results)-1].Text, "denied") {
		t.Fatalf("the model was sent %+v, want the denial", results)
	}

	before = len(cc.api.ModelRequests())
	cc.api.Script(claudetest.Reply{Blocks: []claudetest.Block{claudetest.Bash("touch aborted.txt", "Create a third file")}},
		claudetest.Reply{Blocks: []claudetest.Block{claudetest.Text("This must not be asked for.")}})
	cc.srv.SendText(cc.forum, topic, ann, "And a third.")
	question = cc.question(topic, "touch aborted.txt")
	cc.srv.Click(cc.forum, question.ID, ann, question.Buttons[2][0].CallbackData)
	cc.await("the aborted turn over", func() bool {
		groups := getState(t, cc.m.Addr(), session).toolGroups()
		return len(groups) == 3 && strings.Contains(groups[2], "deny_abort") && cc.status(session) == core.StatusIdle
	})
	if _, err := os.Stat(filepath.Join(cc.workdir, "aborted.txt")); err == nil {
		t.Fatal("an aborted command ran")
	}
	if n := len(cc.api.ModelRequests()) - before; n != 1 {
		t.Fatalf("%d model requests after Deny and abort, want the one that asked", n)
	}
}

// TestClaudeCodeCancel: /cancel stops a turn mid-stream; the output keeps
// what was streamed and says it was cancelled.
func TestClaudeCodeCancel(t *testing.T) {
	t.Parallel()
	cc := newCCStack(t, nil)
	topic := cc.newTopic("work")
	words := make([]string, 40)
	for i := range words {
		words[i] = "word" + string(rune('A'+i%26)) + " "
	}
	words[len(words)-1] = "THE-END"
	cc.api.Say(claudetest.Chunks(250*time.Millisecond, words...))
	cc.srv.SendText(cc.forum, topic, ann, "Count slowly.")
	cc.showing(topic, "wordA wordB")
	cc.srv.SendText(cc.forum, topic, ann, "/cancel")
	m := cc.showing(topic, "Cancelled")
	if strings.Contains(m.Text, "THE-END") {
		t.Fatalf("the cancelled turn streamed to its end: %q", m.Text)
	}
	cc.api.Say(claudetest.Text("Fresh start."))
	cc.srv.SendText(cc.forum, topic, ann, "Go on.")
	cc.answeredOnce(topic, "Fresh start.")
	if n := len(cc.shown(topic, "THE-END")); n != 0 {
		t.Fatal("the cancelled stream went on")
	}
}

// TestClaudeCodeMissingCommand: an agent command that does not exist gives
// the person one notice with the cause and the fix.
func TestClaudeCodeMissingCommand(t *testing.T) {
	t.Parallel()
	cc := newCCStack(t, func(a *config.Agent) { a.Command = filepath.Join(t.TempDir(), "no-such-claude") })
	topic := cc.newTopic("work")
	cc.srv.SendText(cc.forum, topic, ann, "Hello?")
	notice := cc.showing(topic, "no-such-claude")
	if !strings.Contains(notice.Text, "PARLEY_AGENT_COMMAND") {
		t.Errorf("the notice does not say the fix: %q", notice.Text)
	}
	if n := len(cc.shown(topic, "no-such-claude")); n != 1 {
		t.Errorf("the notice is shown %d times, want once", n)
	}
}

// status is the session's status as the store has it.
func (cc *ccStack) status(session string) core.Status {
	cc.t.Helper()
	s, err := cc.m.Daemon().Store.Session(context.Background(), core.SessionID(session))
	if err != nil {
		cc.t.Fatal(err)
	}
	return s.Status
}

// explain describes, for a failure, what the topic shows, the session's
// routing state and the events that led there.
func (cc *ccStack) explain(session string, topic int) string {
	var b strings.Builder
	for _, m := range cc.srv.Messages(cc.forum, topic) {
		fmt.Fprintf(&b, "topic message %d bot=%v edits=%d deleted=%v edited=%s: %q\n",
			m.ID, m.FromBot, m.Edits, m.Deleted, m.EditedAt.Format("15:04:05.000"), m.Text)
	}
	st := cc.m.Daemon().Store
	ctx := context.Background()
	if s, err := st.Session(ctx, core.SessionID(session)); err == nil {
		fmt.Fprintf(&b, "session turn=%d status=%s last_input_origin=%q\n", s.Turn, s.Status, s.LastInputOrigin)
		for n, bd := range s.Bindings {
			fmt.Fprintf(&b, "binding %s output=%+v\n", n, bd.Output)
		}
	}
	es, err := st.EventsSince(ctx, 0, 1000)
	if err != nil {
		fmt.Fprintf(&b, "events: %v\n", err)
	}
	for _, e := range es {
		text := e.Text
		if e.Message != nil {
			text = e.Message.Content
		}
		fmt.Fprintf(&b, "event %d %s %s origin=%q turn=%d final=%v status=%s: %.60q\n",
			e.Seq, e.Time.Format("15:04:05.000"), e.Kind, e.Origin, e.Turn, e.Final, e.Status, text)
	}
	return b.String()
}

// rawState is the page's state of a session as the API sends it.
func rawState(t *testing.T, listen, session string) string {
	t.Helper()
	resp, err := http.Get("http://" + listen + "/api/sessions/" + session + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET state: %s %v", resp.Status, err)
	}
	return string(b)
}
