package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

// pageState is what GET /api/sessions/{id}/state shows of a session.
type pageState struct {
	State struct {
		Items []struct {
			ID       string `json:"id"`
			Kind     string `json:"kind"`
			Tool     string `json:"tool"`
			CallID   string `json:"call_id"`
			Cmd      string `json:"cmd"`
			Stdout   string `json:"stdout"`
			Stderr   string `json:"stderr"`
			ExitCode *int   `json:"exit_code"`
			// Approvals are the decisions' kinds, as the specification
			// has them; ApprovalsDetail (parley's) says who made them.
			Approvals       []string `json:"approvals"`
			ApprovalsDetail []struct {
				Decision string `json:"decision"`
				Actor    struct {
					ID string `json:"id"`
				} `json:"actor"`
				Origin string `json:"origin"`
			} `json:"approvals_detail"`
		} `json:"items"`
	} `json:"state"`
}

func getState(t *testing.T, listen, session string) pageState {
	t.Helper()
	return getStateVia(t, http.DefaultClient, listen, session)
}

// getStateVia is getState through client (a stack's on the fake clock).
func getStateVia(t *testing.T, client *http.Client, listen, session string) pageState {
	t.Helper()
	resp, err := client.Get("http://" + listen + "/api/sessions/" + session + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s pageState
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&s) != nil {
		t.Fatalf("GET state: %s", resp.Status)
	}
	return s
}

// toolGroups describes the page's tool groups, one line each.
func (s pageState) toolGroups() []string {
	var out []string
	for _, it := range s.State.Items {
		if it.Kind != "ToolGroup" {
			continue
		}
		line := fmt.Sprintf("%s %s %q", it.CallID, it.Tool, it.Cmd)
		if it.ExitCode != nil {
			line += fmt.Sprintf(" exit %d %q %q", *it.ExitCode, it.Stdout, it.Stderr)
		}
		for i, d := range it.Approvals {
			line += " " + d
			if i < len(it.ApprovalsDetail) {
				a := it.ApprovalsDetail[i]
				line += fmt.Sprintf(" (%s by %s %s)", a.Decision, a.Origin, a.Actor.ID)
			}
		}
		out = append(out, line)
	}
	return out
}

// progressOf returns the bot's tool progress messages in a topic.
func progressOf(st *tgStack, topic int) []telegramtest.Message {
	var out []telegramtest.Message
	for _, m := range botMessages(st.srv.Messages(st.forum, topic)) {
		if strings.Contains(m.Text, "Tools:") {
			out = append(out, m)
		}
	}
	return out
}

// TestToolActivityAcrossPlatforms is issue 11's story for tool activity: a
// session reached from the web page and Telegram; the agent reports three
// tool calls, one of which needs approval. The Telegram topic shows one
// progress message while the turn runs, with buttons for the approval; a
// stranger's click changes nothing, Ann's decides; when the turn
// completes the progress is gone and the output and the question stay.
// The page shows three tool groups with the decision.
func TestToolActivityAcrossPlatforms(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newTGBubbleStack(t, false)
		topic, session, _ := st.session("Clean up the build, please")
		listen := st.m.Addr()
		// The page writes to the same session, then Ann again on Telegram, so
		// the turn's replies go to the topic.
		body, _ := json.Marshal(map[string]string{"text": "and run the tests"})
		resp, err := st.client().Post("http://"+listen+"/api/sessions/"+session+"/messages", "application/json", bytes.NewReader(body))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("page post: %v %v", err, resp)
		}
		resp.Body.Close()
		st.srv.SendText(st.forum, topic, ann, "go ahead")
		st.heard("")

		call := func(tool string, args map[string]any) {
			t.Helper()
			args["session_id"] = session
			st.agent.call(t, tool, args, nil)
		}
		call("ui.tool_call", map[string]any{"call_id": "c1", "tool": "shell", "cmd": "make"})
		call("ui.tool_output", map[string]any{"call_id": "c1", "stdout": "built\n", "exit_code": 0})
		call("ui.tool_call", map[string]any{"call_id": "c2", "tool": "shell", "cmd": "go test ./..."})
		call("ui.tool_call", map[string]any{"call_id": "c2", "tool": "shell", "cmd": "go test ./..."}) // a retry: one call
		call("ui.tool_output", map[string]any{"call_id": "c2", "stderr": "FAIL TestRetry", "exit_code": 1})
		st.await("the progress message showing both calls", func() bool {
			p := progressOf(st, topic)
			return len(p) == 1 && strings.Contains(p[0].Text, "2 of 2 done") && strings.Contains(p[0].Text, "exit 1")
		})

		decided := make(chan approvalDecision, 1)
		go func() {
			var d approvalDecision
			err := st.agent.callErr(blockingCall, "ui.request_approval", map[string]any{"session_id": session, "call_id": "c3", "tool": "shell",
				"cmd": "rm -rf build", "reason": "the build directory is stale"}, &d)
			d.err = err
			decided <- d
		}()
		question := st.showing(topic, "Approve this tool call?")
		if len(question.Buttons) != 3 || question.Buttons[0][0].Text != "Approve" || question.Buttons[2][0].Text != "Deny and abort" {
			t.Fatalf("approval buttons %+v", question.Buttons)
		}
		st.await("the progress waiting for approval", func() bool {
			p := progressOf(st, topic)
			return len(p) == 1 && strings.Contains(p[0].Text, "waiting for approval")
		})
		approve := question.Buttons[0][0].CallbackData
		q := st.srv.Click(st.forum, question.ID, stranger, approve)
		st.await("the stranger's click answered silently", func() bool { return len(st.srv.CallbackAnswers(q)) == 1 })
		if a := st.srv.CallbackAnswers(q)[0]; a.Text != "" {
			t.Fatalf("the stranger was answered %q", a.Text)
		}
		select {
		case d := <-decided:
			t.Fatalf("the stranger's click decided: %+v", d)
		default:
		}
		if g := getStateVia(t, st.client(), listen, session).toolGroups(); len(g) != 3 || strings.Contains(g[2], "approve") {
			t.Fatalf("after the stranger's click, the page shows %q", g)
		}
		q = st.srv.Click(st.forum, question.ID, ann, approve)
		var d approvalDecision
		select {
		case d = <-decided:
		case <-time.After(30 * time.Second):
			t.Fatal("ui.request_approval did not return after Ann's click")
		}
		if d.err != nil || d.Decision != "approve" {
			t.Fatalf("ui.request_approval = %+v", d)
		}
		st.await("Ann's click answered", func() bool { return len(st.srv.CallbackAnswers(q)) > 0 })
		if a := st.srv.CallbackAnswers(q); len(a) != 1 || a[0].Text != "✓" {
			t.Fatalf("Ann's click answered %+v", a)
		}
		call("ui.tool_output", map[string]any{"call_id": "c3", "exit_code": 0})
		st.await("the progress showing the approved call done", func() bool {
			p := progressOf(st, topic)
			return len(p) == 1 && strings.Contains(p[0].Text, "3 of 3 done")
		})
		progress := progressOf(st, topic)[0]

		call("session.output", map[string]any{"content": "Cleaned and rebuilt; TestRetry still fails."})
		call("loop.yield_turn", map[string]any{})
		st.await("the progress message deleted", func() bool {
			m, _ := st.srv.Message(st.forum, progress.ID)
			return m.Deleted
		})
		st.showing(topic, "TestRetry still fails")
		if m, _ := st.srv.Message(st.forum, question.ID); m.Deleted {
			t.Fatal("the question was deleted with the progress")
		}
		for _, m := range botMessages(st.srv.Messages(st.forum, topic)) {
			if !m.Deleted && strings.Contains(m.Text, "Tools:") {
				t.Fatalf("progress left after the turn: %q", m.Text)
			}
		}

		want := []string{
			`c1 shell "make" exit 0 "built\n" ""`,
			`c2 shell "go test ./..." exit 1 "" "FAIL TestRetry"`,
			`c3 shell "rm -rf build" exit 0 "" "" approve (approve by telegram 42)`,
		}
		if got := getStateVia(t, st.client(), listen, session).toolGroups(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("the page shows tool groups\n%q, want\n%q", got, want)
		}
		if st.srv.RateLimited() > 0 {
			t.Errorf("%d calls were refused with 429", st.srv.RateLimited())
		}
	})
}

type approvalDecision struct {
	Decision string `json:"decision"`
	err      error
}
