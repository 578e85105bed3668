package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// approval has the agent call ui.request_approval for a shell command in
// the background; the decision, or the failure, arrives on the channel.
func (st *stack) approval(session, callID, cmd string) <-chan approvalDecision {
	decided := make(chan approvalDecision, 1)
	go func() {
		var d approvalDecision
		d.err = st.agent.callErr(blockingCall, "ui.request_approval", map[string]any{"session_id": session, "call_id": callID,
			"tool": "shell", "cmd": cmd}, &d)
		decided <- d
	}()
	return decided
}

// awaitDecision waits for ui.request_approval's result.
func awaitDecision(t *testing.T, decided <-chan approvalDecision) approvalDecision {
	t.Helper()
	select {
	case d := <-decided:
		if d.err != nil {
			t.Fatalf("ui.request_approval: %v", d.err)
		}
		return d
	case <-time.After(time.Minute):
		t.Fatal("ui.request_approval did not return")
		return approvalDecision{}
	}
}

// storedSession is the session as the daemon's store holds it.
func (st *stack) storedSession(id string) core.Session {
	st.t.Helper()
	s, err := st.m.Daemon().Store.Session(st.t.Context(), core.SessionID(id))
	if err != nil {
		st.t.Fatal(err)
	}
	return s
}

// post sends body as JSON to the daemon's path and fails on anything but 200.
func (st *stack) post(path string, body any) {
	st.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := st.client().Post("http://"+st.m.Addr()+path, "application/json", bytes.NewReader(b))
	if err != nil {
		st.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		st.t.Fatalf("POST %s: %s", path, resp.Status)
	}
}

// TestTypedOneApprovesNothing is issue 25's probe: with an approval open,
// a "1" from each way text reaches a session — Ann typing it in the
// Telegram topic, the page's composer, a tool's POST /api/chat, an
// agent's chat.human.post — lands in the inbox as a message and decides
// nothing; Ann's click on Approve then decides. Ann, who typed hers in the
// topic, is told there how approvals are answered.
func TestTypedOneApprovesNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newTGBubbleStack(t, false)
		topic, session, _ := st.session("tidy up my home directory")
		paths := []struct {
			name string
			post func()
		}{
			{"Ann in the Telegram topic", func() { st.srv.SendText(st.forum, topic, ann, "1") }},
			{"the page's composer", func() { st.post("/api/sessions/"+session+"/messages", map[string]string{"text": "1"}) }},
			{"POST /api/chat", func() { postChatVia(t, st.client(), st.m.Addr(), session, "1") }},
			{"chat.human.post", func() {
				st.agent.call(t, "chat.human.post", map[string]any{"session_id": session, "content": "1"}, nil)
			}},
		}
		for i, p := range paths {
			cmd := fmt.Sprintf("rm -rf ~/%d", i)
			decided := st.approval(session, fmt.Sprintf("c%d", i), cmd)
			question := st.showing(topic, cmd)
			before := people(t, st.m)
			p.post()
			st.await("the 1 in the inbox", func() bool { return len(people(t, st.m)) > len(before) })
			if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := people(t, st.m)[len(before):]; !slices.Equal(got, []string{"1"}) {
				t.Fatalf("%s: the inbox got %q, want the 1 as a message", p.name, got)
			}
			select {
			case d := <-decided:
				t.Fatalf("%s: a typed 1 decided %+v", p.name, d)
			default:
			}
			if s := st.storedSession(session); len(s.Questions) != 1 || s.Tools[len(s.Tools)-1].Decision != "" {
				t.Fatalf("%s: questions %+v tools %+v, want the approval open and undecided", p.name, s.Questions, s.Tools)
			}
			if i == 0 {
				st.showing(topic, "approved only on its question")
			}
			st.srv.Click(st.forum, question.ID, ann, question.Buttons[0][0].CallbackData)
			if d := awaitDecision(t, decided); d.Decision != core.DecisionApprove {
				t.Fatalf("%s: Ann's click decided %+v", p.name, d)
			}
		}
		hints := 0
		for _, m := range botMessages(st.srv.Messages(st.forum, topic)) {
			if strings.Contains(m.Text, "approved only on its question") && !m.Deleted {
				hints++
			}
		}
		if hints > 1 {
			t.Errorf("the topic shows %d hints; only Ann typed there", hints)
		}
	})
}

// TestReusedCallIDAsksAgain: a decision belongs to the call it was given
// for. Approved for "echo harmless", the same call_id asking for "rm -rf ~"
// is a new question, which the page's choice denies; the same call asked
// once more gets that denial without a question.
func TestReusedCallIDAsksAgain(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newTGBubbleStack(t, false)
		topic, session, _ := st.session("print something")
		decided := st.approval(session, "c1", "echo harmless")
		q := st.showing(topic, "echo harmless")
		st.srv.Click(st.forum, q.ID, ann, q.Buttons[0][0].CallbackData)
		if d := awaitDecision(t, decided); d.Decision != core.DecisionApprove {
			t.Fatalf("the first call: %+v", d)
		}

		decided = st.approval(session, "c1", "rm -rf ~")
		st.showing(topic, "rm -rf ~")
		select {
		case d := <-decided:
			t.Fatalf("the reused call_id was decided without asking: %+v", d)
		default:
		}
		open := st.storedSession(session).Questions
		if len(open) != 1 {
			t.Fatalf("open questions %+v, want the new approval", open)
		}
		st.post("/api/sessions/"+session+"/answer", map[string]any{"question_id": open[0].ID, "option": 2})
		if d := awaitDecision(t, decided); d.Decision != core.DecisionDenyContinue {
			t.Fatalf("the page's choice decided %+v", d)
		}

		var d approvalDecision
		st.agent.call(t, "ui.request_approval", map[string]any{"session_id": session, "call_id": "c1", "tool": "shell", "cmd": "rm -rf ~"}, &d)
		if d.Decision != core.DecisionDenyContinue || len(st.storedSession(session).Questions) != 0 {
			t.Fatalf("the same call asked again = %+v, want its decision without a question", d)
		}
		// One tool group for the call id, with both decisions; each
		// question in the timeline shows the command it was for.
		want := []string{`c1 shell "echo harmless" approve (approve by telegram 42) deny_continue (deny_continue by web web)`}
		if got := getStateVia(t, st.client(), st.m.Addr(), session).toolGroups(); !slices.Equal(got, want) {
			t.Fatalf("the page shows\n%q, want\n%q", got, want)
		}
	})
}

// TestMatrixApprovalOnItsQuestion: Matrix shows an approval as numbered
// options, answered on the question itself. Ann typing "1" in the room is
// a message to the agent and decides nothing (she is told how approvals
// are answered); her reply "1" to the question approves, and her 2️⃣
// reaction to the next one denies it.
func TestMatrixApprovalOnItsQuestion(t *testing.T) {
	t.Parallel()
	st := newMXStack(t, mxOptions{})
	lobby, _ := st.room("Lobby")
	room, session := st.mxNew(lobby, "Clean up")
	decided := st.approval(string(session), "c1", "rm -rf build")
	q := st.mxApproval(st.ann, room, "rm -rf build")

	before := len(people(t, st.m))
	st.ann.Send(t, room, "1")
	servetest.PollUntil(t, mxWait, "Ann's 1 in the inbox", func() bool { return len(people(t, st.m)) > before }, nil)
	st.idle()
	select {
	case d := <-decided:
		t.Fatalf("a typed 1 decided: %+v", d)
	default:
	}
	if p := people(t, st.m); p[len(p)-1] != "1" {
		t.Fatalf("the inbox ends with %q, want Ann's 1 as a message", p[len(p)-1])
	}
	st.mxShowing(st.ann, room, "approved only on its question")
	st.ann.Reply(t, room, q.ID, "1")
	if d := awaitDecision(t, decided); d.Decision != core.DecisionApprove {
		t.Fatalf("Ann's reply decided %+v", d)
	}

	decided = st.approval(string(session), "c2", "rm -rf dist")
	q = st.mxApproval(st.ann, room, "rm -rf dist")
	st.ann.React(t, room, q.ID, "2️⃣")
	if d := awaitDecision(t, decided); d.Decision != core.DecisionDenyContinue {
		t.Fatalf("Ann's reaction decided %+v", d)
	}
}
