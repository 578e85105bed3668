package slacktest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

const signingSecret = "3f1c0ffee0ddba11deadbeefcafe0042"

// app is a Slack app's Request URL for the tests: it checks each
// request's signature with slack-go's verifier, keeps what it received,
// and answers with its answer function (200 without one).
type app struct {
	t      *testing.T
	url    string
	mu     sync.Mutex
	got    []received
	answer func(r received, w http.ResponseWriter) // nil: 200
}

type received struct {
	header http.Header
	body   string
	err    error // from the verifier
}

func newApp(t *testing.T) *app {
	a := &app{t: t}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := received{header: r.Header.Clone(), body: string(body)}
		v, err := slack.NewSecretsVerifier(r.Header, signingSecret)
		if err == nil {
			_, _ = v.Write(body)
			err = v.Ensure()
		}
		rec.err = err
		a.mu.Lock()
		a.got = append(a.got, rec)
		answer := a.answer
		a.mu.Unlock()
		if strings.Contains(rec.body, `"url_verification"`) {
			var c struct{ Challenge string }
			_ = json.Unmarshal(body, &c)
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, c.Challenge)
			return
		}
		if answer != nil {
			answer(rec, w)
		}
	}))
	t.Cleanup(hs.Close)
	a.url = hs.URL + "/slack/events"
	return a
}

// setAnswer sets how the app answers from now on.
func (a *app) setAnswer(f func(r received, w http.ResponseWriter)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answer = f
}

func (a *app) received() []received {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]received(nil), a.got...)
}

// answered waits until the fake has n requests, each answered or given up
// on, and returns them.
func answered(t *testing.T, srv *slacktest.Server, n int) []slacktest.Request {
	t.Helper()
	var rs []slacktest.Request
	srv.Await(t, 10*time.Second, "requests answered", func() bool {
		rs = srv.Requests()
		if len(rs) < n {
			return false
		}
		for _, r := range rs {
			if r.Answered.IsZero() && r.Err == "" {
				return false
			}
		}
		return true
	})
	if len(rs) != n {
		t.Fatalf("%d requests, want %d: %+v", len(rs), n, rs)
	}
	return rs
}

// TestDeliverEvents: saving the Request URL sends the challenge; then a
// message, a click and a slash command each arrive signed, as JSON, a
// payload form and a command form, and a slash command's answer is kept.
func TestDeliverEvents(t *testing.T) {
	srv, api, ch, ann := setup(t, slacktest.Options{})
	a := newApp(t)
	before := srv.Post(ann, ch, "", "before the app listens") // queued meanwhile
	if err := srv.DeliverEvents(slacktest.EventsAPI{URL: a.url, SigningSecret: signingSecret}); err != nil {
		t.Fatal(err)
	}
	a.setAnswer(func(r received, w http.ResponseWriter) {
		if strings.Contains(r.body, "command=") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"response_type":"ephemeral","text":"hi"}`)
		}
	})
	after := srv.Post(ann, ch, "", "after")
	ts := post(t, api, ch, slack.MsgOptionText("q", false), slack.MsgOptionBlocks(
		slack.NewActionBlock("q", slack.NewButtonBlockElement("answer:1", "v1", slack.NewTextBlockObject(slack.PlainTextType, "Yes", false, false)))))
	srv.Click(ann, ch, ts, "answer:1", "v1")
	srv.Slash(ann, ch, "/parley", "new Plans")

	// The challenge, the two messages, the bot's own message, the click
	// and the command.
	rs := answered(t, srv, 6)
	for _, r := range a.received() {
		if r.err != nil {
			t.Errorf("a request failed verification: %v\n%s", r.err, r.body)
		}
	}
	if rs[0].Type != "url_verification" {
		t.Errorf("first request %q, want url_verification", rs[0].Type)
	}
	var texts []string
	var click, slash *slacktest.Request
	for i, r := range rs[1:] {
		if r.Status != http.StatusOK || r.RetryNum != 0 || r.Forged {
			t.Errorf("request %+v, want a first attempt answered 200", r)
		}
		switch r.Type {
		case "events_api":
			if r.ContentType != "application/json" || r.EventID == "" {
				t.Errorf("event sent as %q, event id %q", r.ContentType, r.EventID)
			}
			ev, err := slackevents.ParseEvent(json.RawMessage(r.Body), slackevents.OptionNoVerifyToken())
			if err != nil {
				t.Fatal(err)
			}
			m := ev.InnerEvent.Data.(*slackevents.MessageEvent)
			if m.BotID == "" {
				texts = append(texts, m.Text+"@"+m.TimeStamp)
			}
		case "interactive":
			click = &rs[1+i]
		case "slash_commands":
			slash = &rs[1+i]
		}
	}
	if len(texts) != 2 || !strings.Contains(strings.Join(texts, " "), "before the app listens@"+before) || !strings.Contains(strings.Join(texts, " "), "after@"+after) {
		t.Errorf("people's events %q", texts)
	}
	if click == nil || slash == nil {
		t.Fatalf("no click or no slash command among %+v", rs)
	}
	form, _ := url.ParseQuery(string(click.Body))
	var ic slack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &ic); err != nil || ic.Type != slack.InteractionTypeBlockActions || ic.ActionCallback.BlockActions[0].Value != "v1" {
		t.Errorf("click payload %v: %+v", err, ic)
	}
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(slash.Body)))
	req.Header.Set("Content-Type", slash.ContentType)
	sc, err := slack.SlashCommandParse(req)
	if err != nil || sc.Command != "/parley" || sc.Text != "new Plans" || sc.UserID != ann.ID || sc.ChannelID != ch || sc.TriggerID == "" {
		t.Errorf("slash command %v: %+v", err, sc)
	}
	if string(slash.Answer) != `{"response_type":"ephemeral","text":"hi"}` {
		t.Errorf("slash answer %q", slash.Answer)
	}
	if len(srv.Envelopes()) != 0 {
		t.Errorf("%d Socket Mode envelopes in events mode", len(srv.Envelopes()))
	}
}

// TestDeliverEventsChallengeRefused: a URL that does not echo the
// challenge is not saved.
func TestDeliverEventsChallengeRefused(t *testing.T) {
	srv, _, _, _ := setup(t, slacktest.Options{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(hs.Close)
	if err := srv.DeliverEvents(slacktest.EventsAPI{URL: hs.URL, SigningSecret: signingSecret}); err == nil {
		t.Fatal("a URL answering something else than the challenge was accepted")
	}
}

// TestEventsRetries: an event is retried while the answer is not a 2xx
// in time — an error status, a lost answer, a slow answer (the retry comes
// while the first attempt still runs) — with X-Slack-Retry-Num and
// X-Slack-Retry-Reason, at most three times; X-Slack-No-Retry stops it.
func TestEventsRetries(t *testing.T) {
	quick := []time.Duration{0, 0, 0}
	cases := []struct {
		name    string
		answer  func(n int, w http.ResponseWriter, release <-chan struct{}) // n counts the event's requests from 1
		lose    bool
		reasons []string
	}{
		{"an error, then fine", func(n int, w http.ResponseWriter, _ <-chan struct{}) {
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}, false, []string{"", "http_error"}},
		{"always an error", func(n int, w http.ResponseWriter, _ <-chan struct{}) {
			w.WriteHeader(http.StatusInternalServerError)
		}, false, []string{"", "http_error", "http_error", "http_error"}},
		{"no retry asked", func(n int, w http.ResponseWriter, _ <-chan struct{}) {
			w.Header().Set("X-Slack-No-Retry", "1")
			w.WriteHeader(http.StatusInternalServerError)
		}, false, []string{""}},
		{"answer lost", nil, true, []string{"", "http_timeout"}},
		{"too slow", func(n int, w http.ResponseWriter, release <-chan struct{}) {
			if n == 1 {
				<-release // answers after the retry came
			}
		}, false, []string{"", "http_timeout"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, ch, ann := setup(t, slacktest.Options{})
			a := newApp(t)
			release := make(chan struct{})
			var once sync.Once
			if err := srv.DeliverEvents(slacktest.EventsAPI{URL: a.url, SigningSecret: signingSecret, Timeout: 300 * time.Millisecond, RetryDelays: quick}); err != nil {
				t.Fatal(err)
			}
			n := 0
			a.setAnswer(func(r received, w http.ResponseWriter) {
				a.mu.Lock()
				n++
				k := n
				a.mu.Unlock()
				if k == 2 {
					once.Do(func() { close(release) })
				}
				if tc.answer != nil {
					tc.answer(k, w, release)
				}
			})
			if tc.lose {
				srv.LoseNextAnswer()
			}
			srv.Post(ann, ch, "", "hello")
			rs := answered(t, srv, 1+len(tc.reasons))[1:]
			for i, r := range rs {
				if r.RetryNum != i || r.RetryReason != tc.reasons[i] || r.EventID != rs[0].EventID || string(r.Body) != string(rs[0].Body) {
					t.Errorf("attempt %d: retry %d %q, event %s, want retry %d %q of %s", i, r.RetryNum, r.RetryReason, r.EventID, i, tc.reasons[i], rs[0].EventID)
				}
				if i > 0 && (r.Header.Get("X-Slack-Retry-Num") != rs[i].Header.Get("X-Slack-Retry-Num") || r.Header.Get("X-Slack-Retry-Reason") != tc.reasons[i]) {
					t.Errorf("attempt %d headers %v", i, r.Header)
				}
			}
			if tc.name == "too slow" && !rs[0].Late {
				t.Errorf("the slow first answer is not marked late: %+v", rs[0])
			}
			if tc.lose && (!rs[0].Lost || rs[0].Status != http.StatusOK) {
				t.Errorf("the lost answer: %+v", rs[0])
			}
			for _, r := range a.received() {
				if r.err != nil {
					t.Errorf("a retry failed verification: %v", r.err)
				}
			}
		})
	}
}

// TestSend: a forged or replayed request goes once, signed as told, and
// is recorded as forged; slack-go's verifier refuses the bad ones.
func TestSend(t *testing.T) {
	srv, _, ch, ann := setup(t, slacktest.Options{})
	a := newApp(t)
	if err := srv.DeliverEvents(slacktest.EventsAPI{URL: a.url, SigningSecret: signingSecret}); err != nil {
		t.Fatal(err)
	}
	a.setAnswer(func(r received, w http.ResponseWriter) {
		if r.err != nil {
			w.WriteHeader(http.StatusUnauthorized)
		}
	})
	body := srv.ForgedMessage(ann, ch, "", "forged")
	for _, tc := range []struct {
		name   string
		sig    slacktest.Signature
		status int
	}{
		{"right secret", slacktest.Signature{Secret: signingSecret}, 200},
		{"wrong secret", slacktest.Signature{Secret: "guessed"}, 401},
		{"stale", slacktest.Signature{Secret: signingSecret, At: time.Now().Add(-6 * time.Minute)}, 401},
		{"unsigned", slacktest.Signature{None: true}, 401},
	} {
		r := srv.Send("events_api", body, "application/json", tc.sig)
		if r.Status != tc.status || !r.Forged {
			t.Errorf("%s: status %d forged %v, want %d", tc.name, r.Status, r.Forged, tc.status)
		}
	}
	if n := len(srv.Messages(ch)); n != 0 {
		t.Errorf("a forged message was stored: %d messages", n)
	}
}

// TestConversationsOpen: the bot opens a DM with a person; opening it
// again says so; a person's message there is an im event.
func TestConversationsOpen(t *testing.T) {
	srv, api, _, ann := setup(t, slacktest.Options{})
	ch, noOp, already, err := api.OpenConversationContext(ctx(t), &slack.OpenConversationParameters{Users: []string{ann.ID}, ReturnIM: true})
	if err != nil || !strings.HasPrefix(ch.ID, "D") || noOp || already || ch.User != ann.ID {
		t.Fatalf("conversations.open: %v %+v no_op %v already %v", err, ch, noOp, already)
	}
	if got := srv.OpenDM(ann); got != ch.ID {
		t.Errorf("OpenDM %s, conversations.open %s", got, ch.ID)
	}
	again, noOp, already, err := api.OpenConversationContext(ctx(t), &slack.OpenConversationParameters{Users: []string{ann.ID}})
	if err != nil || again.ID != ch.ID || !noOp || !already {
		t.Errorf("again: %v %s no_op %v already %v", err, again.ID, noOp, already)
	}
	_, _, _, err = api.OpenConversationContext(ctx(t), &slack.OpenConversationParameters{Users: []string{srv.BotUserID}})
	wantCode(t, err, "cannot_dm_bot")
	_, _, _, err = api.OpenConversationContext(ctx(t), &slack.OpenConversationParameters{Users: []string{"U0NOBODY01"}})
	wantCode(t, err, "user_not_found")

	a := newApp(t)
	if err := srv.DeliverEvents(slacktest.EventsAPI{URL: a.url, SigningSecret: signingSecret}); err != nil {
		t.Fatal(err)
	}
	srv.Post(ann, ch.ID, "", "hello bot")
	rs := answered(t, srv, 2)
	ev, err := slackevents.ParseEvent(json.RawMessage(rs[1].Body), slackevents.OptionNoVerifyToken())
	if err != nil {
		t.Fatal(err)
	}
	m := ev.InnerEvent.Data.(*slackevents.MessageEvent)
	if m.ChannelType != slackevents.ChannelTypeIM || m.Channel != ch.ID || m.User != ann.ID {
		t.Errorf("DM event %+v", m)
	}
}
