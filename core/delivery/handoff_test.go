package delivery_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Hand-off races on a fake clock: two instances on one store with the
// claims of sharedClaims, instance a running platform "tg", b "sl", and a
// session bound on both whose last input came from no platform, so that
// every answer goes to both (a broadcast). Each instance's scan reads as
// far as its cluster feed has published (ClaimOptions.Seen, set by hand
// here), which may be ahead of the committing instance's own dispatch of
// the event (its bus): under load the feed hears of a commit before the
// dispatcher has worked through its backlog. Every answer must be shown
// once on each platform, and leave the journal.

// handOffInstance runs a dispatcher with shared claims on st for the
// adapter fk, whose scan reads up to seen.
func handOffInstance(t *testing.T, name string, st core.Store, claims core.DeliveryClaimer, fk *fake.Adapter, seen *atomic.Uint64) *instance {
	t.Helper()
	return runInstance(t, st, core.NewUnorderedMemBus(), fk, delivery.DispatcherOptions{
		Claims: delivery.ClaimOptions{Store: claims, Instance: core.InstanceID(name), TTL: claimTTL, Shared: true, Seen: seen.Load}})
}

// broadcastSession stores an idle session bound at dm on tg and sl whose
// last input came through the API.
func broadcastSession(t *testing.T, st core.Store) core.SessionID {
	t.Helper()
	now := time.Now()
	s := core.Session{ID: core.NewSessionID(now), Title: "shared", Status: core.StatusIdle, Created: now, Updated: now,
		LastInputOrigin: core.OriginAPI, Bindings: map[core.AdapterName]core.Binding{
			"tg": {Adapter: "tg", Place: dm}, "sl": {Adapter: "sl", Place: dm}}}
	if _, _, err := st.CreateSession(context.Background(), s,
		core.Event{Kind: core.EventSessionCreated, Session: s.ID, Status: s.Status, Title: s.Title}); err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// commit stores an assistant message in session id, tells no instance,
// and returns its events (the last one's Seq is what a feed publishes).
func commit(t *testing.T, st core.Store, id core.SessionID, text string) []core.Event {
	t.Helper()
	msg := core.Message{Session: id, Role: core.RoleAssistant, Mime: core.MimeMarkdown, Content: text}
	res, err := st.Append(context.Background(), core.Append{Message: msg,
		Events: []core.Event{{Kind: core.EventAssistant, Session: id, Message: &msg}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Events
}

// checkOnce fails unless each of texts was sent once on each of the
// fakes and the journal is empty.
func checkOnce(t *testing.T, st core.Store, start time.Time, texts []string, fks ...*fake.Adapter) {
	t.Helper()
	for _, text := range texts {
		for _, fk := range fks {
			if got := sends(fk, start, text); len(got) != 1 {
				t.Errorf("%s: %q sent at %v; want once", fk.Name(), text, got)
			}
		}
	}
	if n := journalLen(t, st); n != 0 {
		t.Errorf("%d events left in the journal", n)
	}
}

// TestHandOffScanAheadOfLiveDispatch: b commits an answer; its own scan,
// reading as far as its feed, claims it before b's dispatcher reached it,
// shows it on sl and hands it over. When b's dispatcher reaches the event
// (its claim is free again: handed over, a has not taken it yet) it must
// not show it on sl a second time; a then shows it on tg and finishes it.
func TestHandOffScanAheadOfLiveDispatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		shared := newSharedClaims(st)
		tg, sl := fake.New("tg", core.Capabilities{}), fake.New("sl", core.Capabilities{})
		tg.Slack, sl.Slack = 0, 0
		var seenA, seenB atomic.Uint64
		handOffInstance(t, "a", st, shared, tg, &seenA)
		b := handOffInstance(t, "b", st, shared, sl, &seenB)
		start := time.Now()
		id := broadcastSession(t, st)
		events := commit(t, st, id, "news")
		seenB.Store(events[len(events)-1].Seq)
		time.Sleep(claimTTL/3 + time.Second) // b's first scan, at +5s
		synctest.Wait()
		if got := sends(sl, start, "news"); len(got) != 1 {
			t.Fatalf("sl: sent at %v by b's scan; want once", got)
		}
		publish(events, b) // b's dispatcher reaches its own commit
		seenA.Store(events[len(events)-1].Seq)
		time.Sleep(time.Minute)
		synctest.Wait()
		checkOnce(t, st, start, []string{"news"}, tg, sl)
	})
}

// TestHandOffOtherScanAheadOfLiveDispatch: b commits an answer and a's
// scan claims it first, shows it on tg and hands it over. b's dispatcher
// then claims it as its own commit: it must see that tg was served, show
// it on sl alone and finish it, not hand it back to a (which passes over
// what it handed over: the event would stay journaled for ever).
func TestHandOffOtherScanAheadOfLiveDispatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		shared := newSharedClaims(st)
		tg, sl := fake.New("tg", core.Capabilities{}), fake.New("sl", core.Capabilities{})
		tg.Slack, sl.Slack = 0, 0
		var seenA, seenB atomic.Uint64
		handOffInstance(t, "a", st, shared, tg, &seenA)
		b := handOffInstance(t, "b", st, shared, sl, &seenB)
		start := time.Now()
		id := broadcastSession(t, st)
		events := commit(t, st, id, "news")
		seenA.Store(events[len(events)-1].Seq)
		time.Sleep(claimTTL/3 + time.Second) // a's first scan, at +5s
		synctest.Wait()
		if got := sends(tg, start, "news"); len(got) != 1 {
			t.Fatalf("tg: sent at %v by a's scan; want once", got)
		}
		publish(events, b)
		seenB.Store(events[len(events)-1].Seq)
		time.Sleep(time.Minute)
		synctest.Wait()
		checkOnce(t, st, start, []string{"news"}, tg, sl)
	})
}

// TestHandOffManyRacing: b commits answers in a burst while both feeds
// publish each at once and b's dispatcher lags behind by a random part of
// the burst; whichever dispatch claims each event first, each is shown once
// on each platform.
func TestHandOffManyRacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		shared := newSharedClaims(st)
		tg, sl := fake.New("tg", core.Capabilities{}), fake.New("sl", core.Capabilities{})
		tg.Slack, sl.Slack = 0, 0
		var seenA, seenB atomic.Uint64
		handOffInstance(t, "a", st, shared, tg, &seenA)
		b := handOffInstance(t, "b", st, shared, sl, &seenB)
		start := time.Now()
		id := broadcastSession(t, st)
		var backlog [][]core.Event
		const n = 12
		texts := make([]string, n)
		for i := range n {
			texts[i] = "news " + string(rune('A'+i))
			events := commit(t, st, id, texts[i])
			seq := events[len(events)-1].Seq
			seenA.Store(seq)
			seenB.Store(seq)
			backlog = append(backlog, events)
			// The scans (every 5 s) run between some commits and the
			// dispatcher's late turn to them.
			time.Sleep(time.Duration(i%4) * 2 * time.Second)
			if i%3 == 2 {
				for _, evs := range backlog {
					publish(evs, b)
				}
				backlog = nil
			}
		}
		for _, evs := range backlog {
			publish(evs, b)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		checkOnce(t, st, start, texts, tg, sl)
	})
}
