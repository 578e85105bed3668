package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// TestClusterThreeInstances runs three `parley serve` processes on one
// durable PostgreSQL, long-polling one fake Telegram bot (which enforces
// Telegram's limits and ends a second concurrent getUpdates with 409),
// while people write a steady stream into four topics and an agent is
// connected to every instance:
//
//  1. The agent posts answers through the poller; once the first are out,
//     Telegram's flood control refuses every instance's sends, and while
//     the rest wait, right after a burst of people's messages, the poller
//     is killed with SIGKILL. Another instance polls within seconds (the
//     lease expires), and the answers still queued are delivered by the
//     survivors (the dead instance's claims expire), each exactly once.
//  2. While Telegram refuses the survivors' sends, PostgreSQL stops
//     (immediate: as if its machine lost power) and starts again; people
//     keep writing and the agent keeps answering. The instances recover on
//     their own.
//  3. The killed instance starts again on its data and joins; nothing it
//     replays shows twice.
//  4. The poller is stopped cleanly (SIGTERM): another instance polls
//     within a fraction of a second (the lease is released).
//
// Throughout, Telegram never saw two getUpdates in flight at once; at the
// end every update Telegram saw acknowledged, and every message people
// wrote, is in the inbox exactly once. The figures (failover times, sends
// per instance, 429s) are logged; only generous functional deadlines are
// asserted, so it runs beside the other tests (it mostly waits: for the
// group's budget, the lease, the database); its figures are measured alone,
// with -run.
func TestClusterThreeInstances(t *testing.T) {
	t.Parallel()
	db := pgtest.StartDurable(t)
	srv := telegramtest.NewServer(t, telegramtest.Options{RichMessages: true, Limits: true})
	forum := srv.NewForum("Team")
	tp := newTap(srv)
	env := func(n int) []string {
		return []string{
			"PARLEY_STORE_URL=" + db.URL,
			"PARLEY_TELEGRAM_TOKEN=" + srv.Token, "PARLEY_TELEGRAM_API_URL=" + tp.url(t, n),
			"PARLEY_TELEGRAM_CHAT_ID=" + strconv.FormatInt(forum, 10),
			"PARLEY_TELEGRAM_ALLOWED_USERS=" + strconv.FormatInt(ann.ID, 10),
			"PARLEY_LOG_FORMAT=json",
		}
	}
	nodes := make([]*node, 3)
	for n := range nodes {
		nodes[n] = startNode(t, n, env(n))
	}
	agents := make([]*agent, len(nodes))
	for n, nd := range nodes {
		nd.awaitHealthy(t)
		agents[n] = listeningAgent(t, nd.listen)
	}
	srv.Await(t, 30*time.Second, "a first getUpdates", func() bool { return tp.poller() >= 0 })

	// The topic of the queued answers, and its session.
	queue := srv.NewTopic(forum, "queue")
	srv.SendText(forum, queue, ann, "tell me everything")
	session := sessionOf(t, agents[0], "tell me everything")

	w := startWriters(t, srv, forum, 4)
	defer w.stop()

	// Telegram's flood control (the tap) can refuse every instance's
	// sends at once; quiet is when none has a call under way and every
	// answer shown in the queue's topic is confirmed in the store (its
	// event left the journal, where the undelivered ones wait). From
	// quiet on, until the instances are let through again, no kill and no
	// outage can fall between Telegram's answer to a send and the
	// confirmation of it — the repeat window of a platform without
	// idempotency keys (milliseconds), in which another instance taking
	// the event over sends it again, and which this test is not about.
	journal := openStore(t, db.URL)
	refuseAll := func() {
		for k := range nodes {
			tp.refuse(k)
		}
	}
	var n int
	answer := func(k int) string { return fmt.Sprintf("Queued answer %d.", k) }
	delivered := func() int { return len(shown(srv, forum, queue, "Queued answer ")) }
	quiet := func(what string) {
		t.Helper()
		servetest.PollUntil(t, time.Minute, what, func() bool {
			for k := range nodes {
				if !tp.idle(k) {
					return false
				}
			}
			ds, err := journal.Deliveries(context.Background(), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			waiting := 0
			for _, d := range ds {
				if string(d.Event.Session) == session && d.Event.Kind == core.EventAssistant {
					waiting++
				}
			}
			return waiting == n-delivered()
		}, nil)
	}

	// 1. Answers queued at the kill -9 of the poller, through which they
	// were posted. The first ones go out; then Telegram refuses every
	// instance's sends until the kill — not only the doomed one's: claims
	// decide which instance delivers an event, and another may take one
	// over from the instance that committed it — so that the answers
	// posted after them wait whatever the machine's speed, and the kill
	// comes at quiet.
	p := tp.poller()
	const sent = 5
	post := func(to int) {
		for k := n + 1; k <= to; k++ {
			agents[p].call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": answer(k)}, nil)
			n = k
		}
	}
	post(sent)
	servetest.PollUntil(t, 2*time.Minute, "the first answers delivered", func() bool { return delivered() >= sent }, nil)
	refuseAll()
	post(30)
	quiet("quiet before the kill")
	// The instance to kill is both the poller and the one that committed
	// the answers: a lease that moved meanwhile, with nothing failing, is
	// a finding of its own.
	if q := tp.poller(); q != p {
		t.Fatalf("the poller moved from instance %d to %d before the kill", p, q)
	}
	before := delivered()
	if before != sent {
		t.Fatalf("%d of %d answers delivered before the kill, want the %d sent before Telegram refused the instances", before, n, sent)
	}
	// A burst just before the kill: the poller is handed a batch, and
	// dies while storing it, so that its successor is handed again what
	// it did not acknowledge.
	w.burst(20)
	killed := time.Now()
	nodes[p].kill()
	_ = agents[p].Close() // or its client tries to reconnect, and logs it, every second
	for k := range nodes {
		if k != p {
			tp.allow(k) // Telegram's flood control lets the survivors through again
		}
	}
	servetest.PollUntil(t, 30*time.Second, "another instance to poll after the kill", func() bool {
		_, ok := tp.firstPollAfter(killed, p)
		return ok
	}, nil)
	next, _ := tp.firstPollAfter(killed, p)
	t.Logf("kill -9 of the poller (instance %d) with %d of %d answers delivered: instance %d polled %v later",
		p, before, n, next.node, next.start.Sub(killed).Round(time.Millisecond))
	survivors := []int{}
	for k := range nodes {
		if k != p {
			survivors = append(survivors, k)
		}
	}
	reader := agents[survivors[0]]

	// 2. PostgreSQL restarts while people write and the agent answers,
	// through a survivor, in the first of the writers' topics. Telegram
	// refuses every instance's sends from before the outage until the
	// instances have recovered, and the outage starts at quiet.
	refuseAll()
	quiet("quiet before the outage")
	extra := answerDuring(t, agents[next.node], sessionOf(t, reader, w.first()), 8)
	if err := db.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	select {
	case <-time.After(3 * time.Second): // the outage
	case <-nodes[survivors[0]].exited:
		t.Fatal("an instance exited while PostgreSQL was down")
	}
	if err := db.Start(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	t.Logf("PostgreSQL was down for %v", started.Sub(stopped).Round(time.Millisecond))
	// The instances recover on their own: each answers a read from the
	// store again, and the poller polls again.
	for _, k := range survivors {
		servetest.PollUntil(t, 30*time.Second, fmt.Sprintf("instance %d to read the inbox again", k), func() bool {
			return agents[k].callErr(10*time.Second, "chat_read_since", map[string]any{"limit": 1}, nil) == nil
		}, nil)
	}
	servetest.PollUntil(t, 30*time.Second, "a getUpdates after PostgreSQL came back", func() bool {
		_, ok := tp.firstPollAfter(started, -1)
		return ok
	}, nil)
	resumed, _ := tp.firstPollAfter(started, -1)
	t.Logf("after PostgreSQL came back, instance %d polled %v later", resumed.node, resumed.start.Sub(started).Round(time.Millisecond))
	for k := range nodes {
		tp.allow(k) // the killed instance too, for its restart
	}
	acked, refused := extra.wait(t)

	// Every queued answer, and every answer acknowledged around the
	// restart, shows exactly once.
	all := func() bool {
		for k := 1; k <= n; k++ {
			if len(shown(srv, forum, queue, answer(k))) == 0 {
				return false
			}
		}
		for _, text := range acked {
			if len(shown(srv, forum, w.topics[0], text)) == 0 {
				return false
			}
		}
		return true
	}
	servetest.PollUntil(t, 4*time.Minute, "every queued answer and every answer around the restart", all, nil)
	exactlyOnce := func(when string) {
		for k := 1; k <= n; k++ {
			if got := len(shown(srv, forum, queue, answer(k))); got != 1 {
				t.Errorf("%s: %q shown %d times, want exactly once", when, answer(k), got)
			}
		}
		for _, text := range acked {
			if got := len(shown(srv, forum, w.topics[0], text)); got != 1 {
				t.Errorf("%s: %q (acknowledged during the restart) shown %d times, want exactly once", when, text, got)
			}
		}
		// An answer refused during the outage may have committed all
		// the same (the commit's outcome was unknown to the agent):
		// once at most.
		for _, text := range refused {
			if got := len(shown(srv, forum, w.topics[0], text)); got > 1 {
				t.Errorf("%s: %q (refused during the restart) shown %d times", when, text, got)
			}
		}
	}
	exactlyOnce("once delivered")
	t.Logf("Bot API calls after the kill, per instance: %v; 429s in all %d", tp.methods(killed), srv.RateLimited())
	if k := tp.sent(killed, p); k != 0 {
		t.Errorf("the killed instance %d sent %d messages after its death", p, k)
	}
	t.Logf("messages sent after the kill (the %d answers queued at it, and %d acknowledged around the restart): instance %d %d, instance %d %d",
		n-before, len(acked), survivors[0], tp.sent(killed, survivors[0]), survivors[1], tp.sent(killed, survivors[1]))

	// 3. The killed instance starts again on its data (a service manager's
	// restart) and joins: it replays its journal, whose every operation a
	// survivor has delivered, and the deletions left due at its death.
	nodes[p] = nodes[p].restart(t)
	nodes[p].awaitHealthy(t)
	agents[p] = listeningAgent(t, nodes[p].listen)
	t.Logf("instance %d restarted after its kill: %s", p, replayed(nodes[p].log.String()))

	// 4. A clean stop of the poller.
	p = tp.poller()
	if nodes[p].gone() {
		t.Fatalf("the last poller, instance %d, is gone", p)
	}
	termed := time.Now()
	nodes[p].term(t)
	servetest.PollUntil(t, 30*time.Second, "another instance to poll after the clean stop", func() bool {
		_, ok := tp.firstPollAfter(termed, p)
		return ok
	}, nil)
	next, _ = tp.firstPollAfter(termed, p)
	t.Logf("SIGTERM to the poller (instance %d): instance %d polled %v later", p, next.node, next.start.Sub(termed).Round(time.Millisecond))
	reader = agents[next.node]
	// The deletions its stop left are released to the others with one
	// line, not a warning each.
	closed, lines := cleanupLog(nodes[p].log.String())
	if closed > 0 {
		t.Errorf("the cleanly stopped instance %d warned %d times of a deletion failing because its outbox closed", p, closed)
	}
	t.Logf("the cleanly stopped instance %d: %s", p, strings.Join(lines, "; "))

	// People write for a little longer, then the inbox must hold all of
	// it, exactly once, and every update Telegram saw acknowledged.
	w.awaitMore(t, 10)
	written := w.stop()
	servetest.PollUntil(t, time.Minute, "the last message people wrote to be acknowledged", func() bool {
		return srv.Pending() == 0
	}, nil)
	var got map[string]int
	servetest.PollUntil(t, 30*time.Second, "every message people wrote in the inbox", func() bool {
		var err error
		if got, err = inbox(reader); err != nil {
			t.Fatal(err)
		}
		for _, text := range written {
			if got[text] == 0 {
				return false
			}
		}
		return true
	}, nil)
	for _, text := range written {
		if got[text] != 1 {
			t.Errorf("%q is in the inbox %d times, want exactly once", text, got[text])
		}
	}
	ackd := tp.acknowledged()
	for id, text := range ackd {
		if got[text] != 1 {
			t.Errorf("update %d (%q), acknowledged to Telegram, is in the inbox %d times", id, text, got[text])
		}
	}
	exactlyOnce("at the end")
	for _, o := range tp.overlaps() {
		t.Errorf("two getUpdates in flight at once: %s", o)
	}
	for n, nd := range nodes {
		_, lines := cleanupLog(nd.log.String())
		t.Logf("instance %d, cleanup: %s", n, strings.Join(lines, "; "))
	}
	polls, _ := tp.snapshot()
	t.Logf("people wrote %d messages (%d updates acknowledged to Telegram, %d handed out again after a poller stopped); %d getUpdates, 409s per instance %v",
		len(written), len(ackd), tp.repeated(), len(polls), tp.conflicts())
}

// sessionOf waits until a reads a person's message with text and returns
// its session.
func sessionOf(t *testing.T, a *agent, text string) string {
	t.Helper()
	var session string
	servetest.PollUntil(t, 30*time.Second, "the agent to read "+strconv.Quote(text), func() bool {
		var r readResult
		if err := a.callErr(10*time.Second, "chat_read_since", map[string]any{"limit": 1000}, &r); err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			if m.Content == text {
				session = m.SessionID
				return true
			}
		}
		return false
	}, nil)
	return session
}

// writers is Ann writing into several topics, one message every 150 ms in
// turn, until stopped.
type writers struct {
	topics []int
	mu     sync.Mutex
	texts  []string
	write  func(i int) // writes the next message into topic i mod len(topics); holds mu
	done   chan struct{}
	ended  chan struct{}
	once   sync.Once
}

// startWriters opens k topics and starts writing into them; each topic's
// first message is written before it returns.
func startWriters(t *testing.T, srv *telegramtest.Server, forum int64, k int) *writers {
	w := &writers{done: make(chan struct{}), ended: make(chan struct{})}
	for i := range k {
		w.topics = append(w.topics, srv.NewTopic(forum, fmt.Sprintf("talk %d", i)))
	}
	w.write = func(i int) {
		text := fmt.Sprintf("message %d in talk %d", len(w.texts), i%k)
		srv.SendText(forum, w.topics[i%k], ann, text)
		w.texts = append(w.texts, text)
	}
	w.mu.Lock()
	for i := range k {
		w.write(i)
	}
	w.mu.Unlock()
	go func() {
		defer close(w.ended)
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for i := k; ; i++ {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			w.mu.Lock()
			w.write(i)
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// burst writes k messages at once, one topic after another.
func (w *writers) burst(k int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range k {
		w.write(i)
	}
}

// first is the first message written, in the first topic.
func (w *writers) first() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.texts[0]
}

// awaitMore waits until k more messages are written.
func (w *writers) awaitMore(t *testing.T, k int) {
	t.Helper()
	w.mu.Lock()
	from := len(w.texts)
	w.mu.Unlock()
	servetest.PollUntil(t, 30*time.Second, "people to write more", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.texts) >= from+k
	}, nil)
}

// stop stops writing and returns everything written.
func (w *writers) stop() []string {
	w.once.Do(func() { close(w.done) })
	<-w.ended
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.texts...)
}

// answering is an agent answering in a session, once a second, while
// PostgreSQL may be down.
type answering struct {
	acked   []string
	refused []string
	errs    []string
	ended   chan struct{}
}

// answerDuring has a post k answers into session, one a second, in the
// background; the calls that fail (PostgreSQL down) are not acknowledged.
func answerDuring(t *testing.T, a *agent, session string, k int) *answering {
	an := &answering{ended: make(chan struct{})}
	go func() {
		defer close(an.ended)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 1; i <= k; i++ {
			text := fmt.Sprintf("Answer around the restart %d", i)
			if err := a.callErr(15*time.Second, "chat.assistant.post", map[string]any{"session_id": session, "content": text}, nil); err != nil {
				an.refused = append(an.refused, text)
				an.errs = append(an.errs, err.Error())
			} else {
				an.acked = append(an.acked, text)
			}
			<-tick.C
		}
	}()
	return an
}

// wait waits for the answers to be posted and returns the acknowledged
// and the refused ones.
func (an *answering) wait(t *testing.T) (acked, refused []string) {
	t.Helper()
	select {
	case <-an.ended:
	case <-time.After(2 * time.Minute):
		t.Fatal("the agent's answers around the restart did not end")
	}
	t.Logf("answers around the restart: %d acknowledged, %d refused (%s)", len(an.acked), len(an.refused), strings.Join(an.errs, "; "))
	return an.acked, an.refused
}

// cleanupLog reads an instance's log for the cleanup ledger: how many
// deletions it reported failed because its outbox was closed (a stop), and
// its lines that say how many deletions it replayed, took over from others
// or left at its stop, in order.
func cleanupLog(log string) (closed int, lines []string) {
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Msg   string `json:"msg"`
			Err   string `json:"err"`
			Rows  *int   `json:"rows"`
			Count *int   `json:"count"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.HasPrefix(rec.Msg, "cleanup:") {
			continue
		}
		switch {
		case rec.Msg == "cleanup: delete failed" && strings.Contains(rec.Err, "outbox is closed"):
			closed++
		case rec.Rows != nil:
			lines = append(lines, fmt.Sprintf("%s: %d", rec.Msg, *rec.Rows))
		case rec.Count != nil:
			lines = append(lines, fmt.Sprintf("%s: %d", rec.Msg, *rec.Count))
		}
	}
	return closed, lines
}

// replayed says what an instance's start-up replayed, from its log.
func replayed(log string) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Msg    string `json:"msg"`
			Rows   *int   `json:"rows"`
			Events *int   `json:"events"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch {
		case rec.Rows != nil:
			out = append(out, fmt.Sprintf("%s: %d rows", rec.Msg, *rec.Rows))
		case rec.Events != nil:
			out = append(out, fmt.Sprintf("%s: %d events", rec.Msg, *rec.Events))
		}
	}
	return strings.Join(out, "; ")
}
