package slacktest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

// socket is slack-go's Socket Mode client running against a Server; it
// passes on every request it receives and acks those ack says to.
type socket struct {
	client   *socketmode.Client
	requests chan socketmode.Event
}

func startSocket(tb testing.TB, srv *slacktest.Server, ack func(socketmode.Event) bool) *socket {
	tb.Helper()
	client := socketmode.New(newClient(srv))
	s := &socket{client: client, requests: make(chan socketmode.Event, 100)}
	c, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = client.RunContext(c)
	}()
	go func() {
		for {
			select {
			case <-c.Done():
				return
			case ev := <-client.Events:
				if ev.Request == nil {
					continue // connecting, connected, errors
				}
				if ev.Request.EnvelopeID != "" && ack(ev) {
					_ = client.Ack(*ev.Request)
				}
				s.requests <- ev
			}
		}
	}()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			tb.Error("socketmode client did not stop")
		}
	})
	return s
}

func ackAll(socketmode.Event) bool { return true }

// next returns the next request of type typ, skipping others.
func (s *socket) next(tb testing.TB, typ string) socketmode.Event {
	tb.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-s.requests:
			if ev.Request.Type == typ {
				return ev
			}
		case <-deadline:
			tb.Fatalf("no %s request within 10s", typ)
		}
	}
}

// messageEvent returns the message event of an events_api request.
func messageEvent(tb testing.TB, ev socketmode.Event) *slackevents.MessageEvent {
	tb.Helper()
	api, ok := ev.Data.(slackevents.EventsAPIEvent)
	if !ok {
		tb.Fatalf("events_api data = %T", ev.Data)
	}
	m, ok := api.InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok {
		tb.Fatalf("inner event = %T", api.InnerEvent.Data)
	}
	return m
}

func eventID(tb testing.TB, payload json.RawMessage) string {
	tb.Helper()
	var cb slackevents.EventsAPICallbackEvent
	if err := json.Unmarshal(payload, &cb); err != nil {
		tb.Fatal(err)
	}
	return cb.EventID
}

func TestSocketHelloAndAck(t *testing.T) {
	srv, _, ch, ann := setup(t, slacktest.Options{})
	ts := srv.Post(ann, ch, "", "queued before the connection")
	sock := startSocket(t, srv, ackAll)
	hello := sock.next(t, "hello")
	if hello.Request.NumConnections != 1 || hello.Request.ConnectionInfo.AppID == "" {
		t.Errorf("hello = %+v", hello.Request)
	}
	ev := sock.next(t, "events_api")
	if m := messageEvent(t, ev); m.TimeStamp != ts || m.User != ann.ID || m.Text != "queued before the connection" || m.Channel != ch || m.ChannelType != "channel" {
		t.Fatalf("message event = %+v", m)
	}
	reply := srv.Post(ann, ch, ts, "a reply")
	if m := messageEvent(t, sock.next(t, "events_api")); m.TimeStamp != reply || m.ThreadTimeStamp != ts {
		t.Fatalf("reply event = %+v", m)
	}
	srv.Await(t, 5*time.Second, "both acks", func() bool {
		envs := srv.Envelopes()
		return len(envs) == 2 && !envs[0].Acked.IsZero() && !envs[1].Acked.IsZero()
	})
	if envs := srv.Envelopes(); envs[0].Type != "events_api" || envs[0].RetryAttempt != 0 || envs[0].Acked.Before(envs[0].Sent) {
		t.Fatalf("envelope = %+v", envs[0])
	}
	if srv.Connections() != 1 {
		t.Fatalf("connections = %d", srv.Connections())
	}
}

func TestSocketRedelivery(t *testing.T) {
	srv, _, ch, ann := setup(t, slacktest.Options{AckTimeout: 200 * time.Millisecond})
	acks := 0
	sock := startSocket(t, srv, func(ev socketmode.Event) bool {
		acks++
		return acks > 1 // the first delivery goes unacked
	})
	ts := srv.Post(ann, ch, "", "hello")
	first := sock.next(t, "events_api")
	second := sock.next(t, "events_api")
	if first.Request.EnvelopeID == second.Request.EnvelopeID {
		t.Fatal("redelivery kept the envelope id")
	}
	if second.Request.RetryAttempt != 1 || second.Request.RetryReason != "timeout" {
		t.Fatalf("redelivery: retry_attempt %d, reason %q", second.Request.RetryAttempt, second.Request.RetryReason)
	}
	if messageEvent(t, second).TimeStamp != ts || eventID(t, first.Request.Payload) != eventID(t, second.Request.Payload) {
		t.Fatal("redelivery changed the payload")
	}
	srv.Await(t, 5*time.Second, "the redelivery's ack", func() bool {
		envs := srv.Envelopes()
		return len(envs) == 2 && !envs[1].Acked.IsZero()
	})
	envs := srv.Envelopes()
	if !envs[0].Acked.IsZero() || envs[1].Sent.Sub(envs[0].Sent) < 200*time.Millisecond {
		t.Fatalf("envelopes = %+v: redelivered before the ack timeout", envs)
	}
	// A late ack of the first attempt is ignored.
	if err := sock.client.Ack(*first.Request); err != nil {
		t.Fatal(err)
	}
	srv.Post(ann, ch, "", "next")
	sock.next(t, "events_api")
	srv.Await(t, 5*time.Second, "the next ack", func() bool { return len(srv.Envelopes()) == 3 && !srv.Envelopes()[2].Acked.IsZero() })
	if !srv.Envelopes()[0].Acked.IsZero() {
		t.Fatal("an ack of an earlier attempt counted")
	}
}

func TestSocketGivesUp(t *testing.T) {
	srv, _, ch, ann := setup(t, slacktest.Options{AckTimeout: 50 * time.Millisecond})
	sock := startSocket(t, srv, func(socketmode.Event) bool { return false })
	srv.Post(ann, ch, "", "never acked")
	for want := range 4 {
		if got := sock.next(t, "events_api").Request.RetryAttempt; got != want {
			t.Fatalf("retry_attempt = %d, want %d", got, want)
		}
	}
	srv.Post(ann, ch, "", "next")
	if got := sock.next(t, "events_api").Request.RetryAttempt; got != 0 {
		t.Fatalf("after giving up: retry_attempt %d, want the next envelope", got)
	}
}

func TestSocketDisconnect(t *testing.T) {
	srv, _, ch, ann := setup(t, slacktest.Options{AckTimeout: 300 * time.Millisecond})
	acking := make(chan bool, 1)
	acking <- false
	sock := startSocket(t, srv, func(socketmode.Event) bool {
		a := <-acking
		acking <- a
		return a
	})
	sock.next(t, "hello")
	ts := srv.Post(ann, ch, "", "pending")
	first := sock.next(t, "events_api")

	srv.Disconnect("refresh_requested")
	<-acking
	acking <- true
	hello := sock.next(t, "hello")
	if srv.Connections() != 2 || hello.Request.NumConnections < 1 {
		t.Fatalf("connections = %d, hello %+v", srv.Connections(), hello.Request)
	}
	again := sock.next(t, "events_api")
	if again.Request.EnvelopeID == first.Request.EnvelopeID || again.Request.RetryAttempt != 1 || messageEvent(t, again).TimeStamp != ts {
		t.Fatalf("redelivered on the new connection: %+v", again.Request)
	}
	queued := srv.Post(ann, ch, "", "after the reconnect")
	if m := messageEvent(t, sock.next(t, "events_api")); m.TimeStamp != queued {
		t.Fatalf("next event = %+v", m)
	}

	srv.DropConnection()
	sock.next(t, "hello")
	if srv.Connections() != 3 {
		t.Fatalf("connections after a drop = %d", srv.Connections())
	}
}

func TestSocketSlashAndClick(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{})
	sock := startSocket(t, srv, func(ev socketmode.Event) bool { return ev.Type != socketmode.EventTypeSlashCommand })
	sock.next(t, "hello")

	trigger := srv.Slash(ann, ch, "/parley", "new My title")
	ev := sock.next(t, "slash_commands")
	cmd, ok := ev.Data.(slack.SlashCommand)
	if !ok || cmd.Command != "/parley" || cmd.Text != "new My title" || cmd.ChannelID != ch || cmd.UserID != ann.ID || cmd.TriggerID != trigger || cmd.ResponseURL == "" {
		t.Fatalf("slash command = %#v", ev.Data)
	}
	if !ev.Request.AcceptsResponsePayload {
		t.Error("a slash command accepts a response payload")
	}
	if err := sock.client.Ack(*ev.Request, map[string]string{"text": "Started."}); err != nil {
		t.Fatal(err)
	}

	q := post(t, api, ch, slack.MsgOptionText("Go on?", false), slack.MsgOptionBlocks(
		slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", "Go on?", false, false), nil, nil),
		slack.NewActionBlock("q1",
			slack.NewButtonBlockElement("yes", "y", slack.NewTextBlockObject("plain_text", "Yes", false, false)),
			slack.NewButtonBlockElement("no", "n", slack.NewTextBlockObject("plain_text", "No", false, false))),
	))
	if m := messageEvent(t, sock.next(t, "events_api")); m.BotID != srv.BotID || m.User != srv.BotUserID || m.TimeStamp != q {
		t.Fatalf("echo of the bot's own message = %+v", m)
	}
	srv.Click(ann, ch, q, "no", "n")
	ev = sock.next(t, "interactive")
	cb, ok := ev.Data.(slack.InteractionCallback)
	if !ok || cb.Type != slack.InteractionTypeBlockActions || cb.User.ID != ann.ID || cb.Channel.ID != ch || cb.Container.MessageTs != q || cb.Message.Timestamp != q {
		t.Fatalf("interaction = %#v", ev.Data)
	}
	if acts := cb.ActionCallback.BlockActions; len(acts) != 1 || acts[0].ActionID != "no" || acts[0].Value != "n" || acts[0].BlockID != "q1" || acts[0].Text.Text != "No" {
		t.Fatalf("actions = %+v", cb.ActionCallback)
	}
	// The response URL replaces the question with the answer.
	if _, _, err := api.PostMessageContext(ctx(t), "", slack.MsgOptionReplaceOriginal(cb.ResponseURL), slack.MsgOptionText("Answered: No", false)); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(ch, q); m.Text != "Answered: No" || m.Blocks != nil || m.Edits != 1 {
		t.Fatalf("after replace_original: %+v", m)
	}
	srv.Await(t, 5*time.Second, "the acks", func() bool {
		for _, e := range srv.Envelopes() {
			if e.Acked.IsZero() {
				return false
			}
		}
		return true
	})
	if p := srv.Envelopes()[0].AckPayload; string(p) != `{"text":"Started."}` {
		t.Fatalf("slash ack payload = %s", p)
	}
}

func TestSocketEchoes(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{})
	sock := startSocket(t, srv, ackAll)
	sock.next(t, "hello")
	ts := post(t, api, ch, slack.MsgOptionText("v1", false))
	sock.next(t, "events_api")
	if _, _, _, err := api.UpdateMessageContext(ctx(t), ch, ts, slack.MsgOptionText("v2", false)); err != nil {
		t.Fatal(err)
	}
	if m := messageEvent(t, sock.next(t, "events_api")); m.SubType != "message_changed" || m.Message.Text != "v2" || m.Message.BotID != srv.BotID || m.PreviousMessage.Text != "v1" {
		t.Fatalf("message_changed = %+v / %+v", m, m.Message)
	}
	if _, _, err := api.DeleteMessageContext(ctx(t), ch, ts); err != nil {
		t.Fatal(err)
	}
	if m := messageEvent(t, sock.next(t, "events_api")); m.SubType != "message_deleted" || m.DeletedTimeStamp != ts {
		t.Fatalf("message_deleted = %+v", m)
	}
	mine := srv.Post(ann, ch, "", "typo")
	sock.next(t, "events_api")
	srv.Edit(ann, ch, mine, "fixed")
	if m := messageEvent(t, sock.next(t, "events_api")); m.SubType != "message_changed" || m.Message.Text != "fixed" || m.Message.Edited == nil {
		t.Fatalf("person's edit = %+v", m)
	}
	srv.Delete(ch, mine)
	if m := messageEvent(t, sock.next(t, "events_api")); m.SubType != "message_deleted" || m.PreviousMessage.User != ann.ID {
		t.Fatalf("person's delete = %+v", m)
	}
	bob := srv.NewUser("bob")
	srv.Join(bob, ch)
	if m := messageEvent(t, sock.next(t, "events_api")); m.SubType != "channel_join" || m.User != bob.ID {
		t.Fatalf("join = %+v", m)
	}
	silent := srv.NewChannelWithoutBot("silent")
	srv.Post(ann, silent, "", "unheard")
	srv.Join(slacktest.User{ID: srv.BotUserID}, silent)
	if m := messageEvent(t, sock.next(t, "events_api")); m.SubType != "channel_join" || m.Channel != silent {
		t.Fatalf("after the bot joins: %+v (the earlier message must not be heard)", m)
	}
}
