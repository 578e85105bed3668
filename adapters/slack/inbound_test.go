package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/slack-go/slack/slackevents"

	"github.com/parley-chat/parley/core"
)

// event parses the Events API callback around inner (an event's JSON) as
// Slack sends it, with slack-go's parser.
func event(t *testing.T, inner string) slackevents.EventsAPIEvent {
	t.Helper()
	raw := `{"type":"event_callback","team_id":"T1","api_app_id":"A1","event_id":"Ev1","event_time":1712345678,"event":` + inner + `}`
	ev, err := slackevents.ParseEvent(json.RawMessage(raw), slackevents.OptionNoVerifyToken())
	if err != nil {
		t.Fatalf("parse %s: %v", inner, err)
	}
	return ev
}

// show writes a command compactly, for comparison.
func show(c core.Command) string {
	s := fmt.Sprintf("%s %s/%s", c.Kind, c.Place.Chat, c.Place.Thread)
	if c.PlatformID != "" {
		s += " id=" + c.PlatformID
	}
	if c.Session != "" {
		s += " session=" + string(c.Session)
	}
	if c.Actor.ID != "" {
		s += " by=" + c.Actor.ID + "(" + c.Actor.Name + ")"
	}
	if c.Title != "" {
		s += fmt.Sprintf(" title=%q", c.Title)
	}
	if c.Text != "" {
		s += fmt.Sprintf(" text=%q", c.Text)
	}
	if !c.Ref.IsZero() {
		s += " ref=" + c.Ref.ID
	}
	return s
}

func shows(cmds []core.Command) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, show(c))
	}
	return out
}

func sameList(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestMessageEvents maps each kind of message event to the commands it
// makes, from events as Slack sends them.
func TestMessageEvents(t *testing.T) {
	tests := []struct {
		name  string
		event string
		want  []string
	}{
		{"top-level message starts a session in its thread",
			`{"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"Fix the flaky test\nin core","ts":"100.1"}`,
			[]string{
				`create_session C1/100.1 id=new:C1:100.1 by=U1(Ann) title="Fix the flaky test"`,
				`send_message C1/100.1 id=C1:100.1 session=S1 by=U1(Ann) text="Fix the flaky test\nin core" ref=100.1`,
			}},
		{"thread reply goes to the thread's session",
			`{"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"and the other one","ts":"101.5","thread_ts":"100.1"}`,
			[]string{`send_message C1/100.1 id=C1:101.5 by=U1(Ann) text="and the other one" ref=101.5`}},
		{"reply also sent to the channel is a reply",
			`{"type":"message","subtype":"thread_broadcast","channel":"C1","channel_type":"channel","user":"U2","text":"look","ts":"102.0","thread_ts":"100.1","root":{"ts":"100.1"}}`,
			[]string{`send_message C1/100.1 id=C1:102.0 by=U2(Bob) text="look" ref=102.0`}},
		{"direct message starts a session in its thread",
			`{"type":"message","channel":"D9","channel_type":"im","user":"U1","text":"hello","ts":"200.0"}`,
			[]string{
				`create_session D9/200.0 id=new:D9:200.0 by=U1(Ann) title="hello"`,
				`send_message D9/200.0 id=D9:200.0 session=S1 by=U1(Ann) text="hello" ref=200.0`,
			}},
		{"Slack's markup becomes markdown, the bot's mention is dropped",
			`{"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"<@UBOT> see <https://go.dev|Go> &amp; ask <@U2>, a &lt; b","ts":"103.0","thread_ts":"100.1"}`,
			[]string{`send_message C1/100.1 id=C1:103.0 by=U1(Ann) text="see [Go](https://go.dev) & ask @Bob, a < b" ref=103.0`}},
		{"command in a thread", `{"type":"message","channel":"C1","user":"U1","text":"!cancel","ts":"104.0","thread_ts":"100.1"}`,
			[]string{`cancel C1/100.1 id=C1:104.0 by=U1(Ann) ref=104.0`}},
		{"rename in a thread", `{"type":"message","channel":"C1","user":"U1","text":"!title Flaky test, round 2","ts":"105.0","thread_ts":"100.1"}`,
			[]string{`rename C1/100.1 id=C1:105.0 by=U1(Ann) title="Flaky test, round 2" ref=105.0`}},
		{"status in a thread", `{"type":"message","channel":"C1","user":"U1","text":"!status","ts":"106.0","thread_ts":"100.1"}`,
			[]string{`status C1/100.1 id=C1:106.0 by=U1(Ann) ref=106.0`}},
		{"help in a thread is a notice", `{"type":"message","channel":"C1","user":"U1","text":"!help","ts":"107.0","thread_ts":"100.1"}`,
			[]string{`notice C1/100.1 by=U1(Ann) text=` + fmt.Sprintf("%q", helpText())}},
		{"unknown command", `{"type":"message","channel":"C1","user":"U1","text":"!frobnicate","ts":"108.0","thread_ts":"100.1"}`,
			[]string{`notice C1/100.1 by=U1(Ann) text="⚠️ Unknown command !frobnicate; send !help for the list"`}},
		{"top-level !new starts a session there, with its title",
			`{"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"!new Release 1.2","ts":"109.0"}`,
			[]string{`create_session C1/109.0 id=new:C1:109.0 by=U1(Ann) title="Release 1.2"`}},
		{"an edit is not sent again",
			`{"type":"message","subtype":"message_changed","channel":"C1","hidden":true,"ts":"110.0","message":{"type":"message","user":"U1","text":"changed","ts":"100.1","edited":{"user":"U1","ts":"110.0"}},"previous_message":{"type":"message","user":"U1","text":"Fix","ts":"100.1"}}`,
			nil},
		{"a deletion takes nothing back",
			`{"type":"message","subtype":"message_deleted","channel":"C1","hidden":true,"ts":"111.0","deleted_ts":"100.1","previous_message":{"type":"message","user":"U1","text":"Fix","ts":"100.1"}}`,
			nil},
		{"a join is not input", `{"type":"message","subtype":"channel_join","channel":"C1","user":"U1","text":"<@U1> has joined the channel","ts":"112.0"}`, nil},
		{"a bot's message is not input", `{"type":"message","subtype":"bot_message","channel":"C1","bot_id":"B7","text":"beep","ts":"113.0"}`, nil},
		{"parley's own message is not input", `{"type":"message","channel":"C1","user":"UBOT","bot_id":"BBOT","text":"⏳ *Fix*","ts":"114.0"}`, nil},
		{"another channel", `{"type":"message","channel":"C2","channel_type":"channel","user":"U1","text":"hi","ts":"115.0"}`, nil},
		{"a stranger is ignored silently", `{"type":"message","channel":"C1","channel_type":"channel","user":"U666","text":"!help","ts":"116.0"}`, nil},
		{"a stranger's reply too", `{"type":"message","channel":"C1","user":"U666","text":"hello","ts":"117.0","thread_ts":"100.1"}`, nil},
		{"an empty message", `{"type":"message","channel":"C1","user":"U1","text":"  ","ts":"118.0","thread_ts":"100.1"}`, nil},
		{"app_mention repeats a message event", `{"type":"app_mention","channel":"C1","user":"U1","text":"<@UBOT> hi","ts":"119.0"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newRecorder("U1", "U2")
			a := newTestAdapter(t, nil, withAuthorizer(h))
			if err := a.onEvent(context.Background(), h, event(t, tt.event)); err != nil {
				t.Fatalf("onEvent: %v", err)
			}
			sameList(t, shows(h.commands()), tt.want)
		})
	}
}

// TestMessageRefusals: what the handler refuses is explained to the
// person in the thread; an error without words is retried.
func TestMessageRefusals(t *testing.T) {
	reply := `{"type":"message","channel":"C1","user":"U1","text":"more","ts":"120.0","thread_ts":"100.1"}`
	tests := []struct {
		name    string
		err     error
		notice  string // "" for none
		retried bool
	}{
		{"closed", &core.UserError{Msg: "this session is closed", Err: core.ErrSessionClosed}, "✅ This session is closed. " + startHint, false},
		{"invalid", &core.UserError{Msg: "the message is empty", Err: core.ErrInvalid}, "⚠️ The message is empty", false},
		{"not found", &core.UserError{Msg: "there is no session here", Err: core.ErrNotFound}, "There is no session here. " + startHint, false},
		{"unauthorized", core.ErrUnauthorized, "", false},
		{"store failed", fmt.Errorf("disk full"), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newRecorder("U1")
			a := newTestAdapter(t, nil, withAuthorizer(h))
			h.answer = func(c core.Command) (core.Result, error) {
				if c.Kind == core.Notice {
					return core.Result{}, nil
				}
				return core.Result{}, tt.err
			}
			err := a.onEvent(context.Background(), h, event(t, reply))
			if (err != nil) != tt.retried {
				t.Errorf("onEvent: %v, want retried %v", err, tt.retried)
			}
			var notices []string
			for _, c := range h.commands() {
				if c.Kind == core.Notice {
					notices = append(notices, c.Text)
				}
			}
			if want := []string{tt.notice}; tt.notice == "" && len(notices) > 0 || tt.notice != "" && strings.Join(notices, "|") != strings.Join(want, "|") {
				t.Errorf("notices %q, want %q", notices, tt.notice)
			}
		})
	}
}

func TestFromSlack(t *testing.T) {
	names := func(id string) string { return map[string]string{"U2": "Bob"}[id] }
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"<@UBOT>: do it", "do it"},
		{"ask <@UBOT> later", "ask @UBOT later"},
		{"<@U2> and <@U3> and <@U4|carol>", "@Bob and @U3 and @carol"},
		{"<#C5|general> and <#C6>", "#general and #C6"},
		{"<!here> <!subteam^S1|@team> <!channel>", "@here @team @channel"},
		{"<https://go.dev> <https://go.dev|Go> <mailto:a@b.c|a@b.c>", "https://go.dev [Go](https://go.dev) [a@b.c](mailto:a@b.c)"},
		{"a &lt;b&gt; &amp;lt;", "a <b> &lt;"},
	}
	for _, tt := range tests {
		if got := fromSlack(tt.in, "UBOT", names); got != tt.want {
			t.Errorf("fromSlack(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := titleOf("  first   line \nsecond"); got != "first line" {
		t.Errorf("titleOf = %q", got)
	}
	if got := titleOf(strings.Repeat("x", 100)); len([]rune(got)) != 60 {
		t.Errorf("titleOf of 100 characters has %d", len([]rune(got)))
	}
}
