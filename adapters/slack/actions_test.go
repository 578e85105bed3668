package slack

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/core"
)

// click is a block_actions payload as Slack sends it when user clicks the
// button with actionID and value on the question 700.1 in thread 100.1.
func click(t *testing.T, user, actionID, value string) *slack.InteractionCallback {
	t.Helper()
	raw := `{"type":"block_actions","user":{"id":"` + user + `","username":"ann","name":"ann"},"api_app_id":"A1",
	 "container":{"type":"message","message_ts":"700.1","channel_id":"C1","is_ephemeral":false,"thread_ts":"100.1"},
	 "trigger_id":"tr","team":{"id":"T1"},"channel":{"id":"C1","name":"parley"},
	 "message":{"type":"message","user":"UBOT","bot_id":"BBOT","ts":"700.1","thread_ts":"100.1","text":"Deploy now?",
	   "blocks":[{"type":"markdown","text":"Deploy **now**?"},
	     {"type":"actions","block_id":"b1","elements":[{"type":"button","action_id":"parley_answer_0","text":{"type":"plain_text","text":"Yes"},"value":"Q1:1"},
	       {"type":"button","action_id":"parley_answer_1","text":{"type":"plain_text","text":"No"},"value":"Q1:2"}]}]},
	 "actions":[{"action_id":"` + actionID + `","block_id":"b1","text":{"type":"plain_text","text":"Yes"},"value":"` + value + `","type":"button","action_ts":"700.9"}]}`
	var ic slack.InteractionCallback
	if err := json.Unmarshal([]byte(raw), &ic); err != nil {
		t.Fatal(err)
	}
	return &ic
}

func TestClick(t *testing.T) {
	api := newFakeAPI(t)
	pc := &pacer{}
	h := newRecorder("U1")
	a := newTestAdapter(t, api, func(o *Options) { o.Pacer = pc }, withAuthorizer(h))
	if err := a.onAction(context.Background(), h, click(t, "U1", "parley_answer_0", "Q1:1")); err != nil {
		t.Fatal(err)
	}
	a.bg.Wait()
	cmds := h.commands()
	if len(cmds) != 1 || cmds[0].Kind != core.Answer || cmds[0].QuestionID != "Q1" || cmds[0].Option != 1 ||
		cmds[0].Place != (core.Place{Chat: "C1", Thread: "100.1"}) || cmds[0].PlatformID != "click:C1:700.1:U1:700.9" {
		t.Fatalf("commands %+v", cmds)
	}
	up := api.called("chat.update")
	if len(up) != 1 || up[0].Form.Get("ts") != "700.1" {
		t.Fatalf("chat.update calls %v", up)
	}
	blocks := up[0].Form.Get("blocks")
	if strings.Contains(blocks, `"actions"`) || !strings.Contains(blocks, `Deploy **now**?`) || !strings.Contains(blocks, `\u003c@U1\u003e chose *Yes*`) {
		t.Errorf("the answered question shows %s", blocks)
	}
	if len(pc.ops) != 1 || pc.ops[0].Kind != core.OpEdit {
		t.Errorf("paced %+v, want one edit", pc.ops)
	}
}

func TestClickRefused(t *testing.T) {
	tests := []struct {
		name, user, actionID, value string
		err                         error
		commands                    int
		update                      string // words of the edit; "" for none
	}{
		{name: "a stranger", user: "U666", actionID: "parley_answer_0", value: "Q1:1"},
		{name: "another app's button", user: "U1", actionID: "approve", value: "Q1:1"},
		{name: "not parley's data", user: "U1", actionID: "parley_answer_0", value: "nonsense"},
		{name: "no longer open", user: "U1", actionID: "parley_answer_0", value: "Q1:1",
			err: &core.UserError{Msg: "the question is no longer open", Err: core.ErrInvalid}, commands: 1, update: "no longer open"},
		{name: "session closed", user: "U1", actionID: "parley_answer_0", value: "Q1:1", err: core.ErrSessionClosed, commands: 1, update: "no longer open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI(t)
			h := newRecorder("U1")
			a := newTestAdapter(t, api, withAuthorizer(h))
			h.answer = func(core.Command) (core.Result, error) { return core.Result{}, tt.err }
			if err := a.onAction(context.Background(), h, click(t, tt.user, tt.actionID, tt.value)); err != nil {
				t.Fatal(err)
			}
			a.bg.Wait()
			if n := len(h.commands()); n != tt.commands {
				t.Errorf("%d commands, want %d", n, tt.commands)
			}
			up := api.called("chat.update")
			switch {
			case tt.update == "" && len(api.called("")) > 0:
				t.Errorf("calls %v, want none", methods(api.called("")))
			case tt.update != "" && (len(up) != 1 || !strings.Contains(up[0].Form.Get("blocks"), tt.update)):
				t.Errorf("chat.update %v, want one saying %q", up, tt.update)
			}
		})
	}
}

// TestDoubleClick: the second click of a double click (Slack sends both,
// the second before the buttons go) is refused as no longer open; the
// question keeps showing the answer the first gave.
func TestDoubleClick(t *testing.T) {
	api := newFakeAPI(t)
	h := newRecorder("U1")
	a := newTestAdapter(t, api, withAuthorizer(h))
	answered := false
	h.answer = func(core.Command) (core.Result, error) {
		if answered {
			return core.Result{}, &core.UserError{Msg: "this question is no longer open", Err: core.ErrInvalid}
		}
		answered = true
		return core.Result{Session: "S1"}, nil
	}
	for range 2 {
		if err := a.onAction(context.Background(), h, click(t, "U1", "parley_answer_0", "Q1:1")); err != nil {
			t.Fatal(err)
		}
	}
	a.bg.Wait()
	up := api.called("chat.update")
	if len(up) != 1 || !strings.Contains(up[0].Form.Get("blocks"), "chose *Yes*") {
		t.Errorf("chat.update %v, want one showing the answer", up)
	}
}
