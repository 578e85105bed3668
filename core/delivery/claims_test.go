package delivery_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/store/bolt"
)

// claimTTL is the claims' TTL in these tests, whose instants (a renewal
// every 5 s, a scan every 5 s) are written for it.
const claimTTL = 15 * time.Second

// The claims' tests run two instances, each a dispatcher, outbox and bus
// of its own, on one store and one fake platform, in a synctest bubble:
// sharedClaims models what a store shared by instances does with claims
// (store/postgres does it by the database's clock; here the clock is the
// bubble's), so that expiry, renewal, the scan and the stop on an
// instance's own clock happen at exact instants. store/postgres tests the
// same against a real PostgreSQL.

// sharedClaims is the journal of st with claims that expire by the clock.
type sharedClaims struct {
	*bolt.Store
	mu   sync.Mutex
	held map[uint64]heldClaim
	// cut are the instances whose requests fail: cut off from the store.
	cut map[core.InstanceID]bool
}

type heldClaim struct {
	by    core.InstanceID
	until time.Time
}

var errCut = errors.New("store unreachable")

func newSharedClaims(st *bolt.Store) *sharedClaims {
	return &sharedClaims{Store: st, held: map[uint64]heldClaim{}, cut: map[core.InstanceID]bool{}}
}

func (c *sharedClaims) setCut(instance core.InstanceID, cut bool) {
	c.mu.Lock()
	c.cut[instance] = cut
	c.mu.Unlock()
}

// freeLocked reports whether instance may take seq; with instance "",
// whether nobody holds it.
func (c *sharedClaims) freeLocked(seq uint64, instance core.InstanceID) bool {
	h, ok := c.held[seq]
	return !ok || h.by == instance || !time.Now().Before(h.until)
}

func (c *sharedClaims) ClaimDelivery(ctx context.Context, seq uint64, instance core.InstanceID, ttl time.Duration) (bool, error) {
	page, err := c.Deliveries(ctx, seq-1, 1)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut[instance] {
		return false, errCut
	}
	if len(page) == 0 || page[0].Event.Seq != seq || !c.freeLocked(seq, instance) {
		return false, nil
	}
	c.held[seq] = heldClaim{instance, time.Now().Add(ttl)}
	return true, nil
}

func (c *sharedClaims) ClaimDeliveries(ctx context.Context, after, upTo uint64, limit int, instance core.InstanceID, ttl time.Duration) ([]core.Delivery, error) {
	page, err := c.Deliveries(ctx, after, 0)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut[instance] {
		return nil, errCut
	}
	var out []core.Delivery
	for _, d := range page {
		if d.Event.Seq > upTo || limit > 0 && len(out) == limit {
			break
		}
		if c.freeLocked(d.Event.Seq, "") {
			c.held[d.Event.Seq] = heldClaim{instance, time.Now().Add(ttl)}
			out = append(out, d)
		}
	}
	return out, nil
}

func (c *sharedClaims) RenewClaims(ctx context.Context, instance core.InstanceID, seqs []uint64, ttl time.Duration) ([]uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut[instance] {
		return nil, errCut
	}
	var held []uint64
	for _, s := range seqs {
		if h, ok := c.held[s]; ok && h.by == instance {
			c.held[s] = heldClaim{instance, time.Now().Add(ttl)}
			held = append(held, s)
		}
	}
	return held, nil
}

func (c *sharedClaims) ReleaseClaims(ctx context.Context, instance core.InstanceID, seqs []uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut[instance] {
		return errCut
	}
	for _, s := range seqs {
		if h, ok := c.held[s]; ok && h.by == instance {
			delete(c.held, s)
		}
	}
	return nil
}

// instance is one parley instance's delivery: its bus, dispatcher and
// outbox, and the claims loop.
type instance struct {
	t    *testing.T
	bus  *core.MemBus
	out  *delivery.Outbox
	d    *delivery.Dispatcher
	stop context.CancelFunc
	done sync.WaitGroup
}

// startInstance runs an instance named name on st and fk, claiming with
// claims (nil: none) and the default claim timings.
func startInstance(t *testing.T, name string, st core.Store, claims core.DeliveryClaimer, fk *fake.Adapter) *instance {
	t.Helper()
	return startInstanceLog(t, name, st, claims, fk, nil)
}

// startInstanceLog is startInstance logging to log.
func startInstanceLog(t *testing.T, name string, st core.Store, claims core.DeliveryClaimer, fk *fake.Adapter, log *slog.Logger) *instance {
	t.Helper()
	return startInstanceTTL(t, name, st, claims, fk, log, claimTTL)
}

// startInstanceTTL is startInstanceLog with claims of ttl (0: the
// default).
func startInstanceTTL(t *testing.T, name string, st core.Store, claims core.DeliveryClaimer, fk *fake.Adapter, log *slog.Logger, ttl time.Duration) *instance {
	t.Helper()
	return runInstance(t, st, core.NewMemBus(0), fk, delivery.DispatcherOptions{
		Claims: delivery.ClaimOptions{Store: claims, Instance: core.InstanceID(name), TTL: ttl}, Logger: log})
}

// runInstance runs a dispatcher for fk on st with opts, fed by bus, with
// its claims loop, until the test ends.
func runInstance(t *testing.T, st core.Store, bus *core.MemBus, fk *fake.Adapter, opts delivery.DispatcherOptions) *instance {
	t.Helper()
	in := &instance{t: t, bus: bus, out: newOutbox(fk, delivery.OutboxOptions{})}
	in.d = delivery.NewDispatcher(st, delivery.NewRouter(fk), in.out, opts)
	sub, unsubscribe := in.bus.Subscribe(64, false)
	ctx, cancel := context.WithCancel(context.Background())
	in.stop = func() {
		cancel()
		in.done.Wait()
		unsubscribe()
	}
	in.done.Go(func() { in.d.Run(ctx, sub) })
	in.done.Go(func() { in.d.RunClaims(ctx) })
	t.Cleanup(func() {
		in.stop()
		in.out.Close()
		in.d.StopTyping()
	})
	return in
}

// die ends the instance without a word to the store: what it held stays
// claimed until the claims expire.
func (in *instance) die() {
	in.stop()
	in.out.Close()
}

// publish stores nothing: it tells every instance of events stored, as
// each instance's own bus and the follower of the others' events do.
func publish(events []core.Event, to ...*instance) {
	for _, in := range to {
		for _, e := range events {
			in.bus.Publish(e)
		}
		synctest.Wait()
	}
}

// postTo stores an assistant message in session id and publishes its events
// to the instances, in order.
func postTo(t *testing.T, st core.Store, id core.SessionID, text string, to ...*instance) {
	t.Helper()
	msg := core.Message{Session: id, Role: core.RoleAssistant, Mime: core.MimeMarkdown, Content: text}
	res, err := st.Append(context.Background(), core.Append{Message: msg,
		Events: []core.Event{{Kind: core.EventAssistant, Session: id, Message: &msg}}})
	if err != nil {
		t.Fatal(err)
	}
	publish(res.Events, to...)
}

// boundSession stores an idle session bound at dm and publishes its events.
func boundSession(t *testing.T, st core.Store, to ...*instance) core.SessionID {
	t.Helper()
	now := time.Now()
	s := core.Session{ID: core.NewSessionID(now), Title: "shared", Status: core.StatusIdle, Created: now, Updated: now,
		Bindings: map[core.AdapterName]core.Binding{"fake": {Adapter: "fake", Place: dm}}}
	s, events, err := st.CreateSession(context.Background(), s,
		core.Event{Kind: core.EventSessionCreated, Session: s.ID, Status: s.Status, Title: s.Title})
	if err != nil {
		t.Fatal(err)
	}
	publish(events, to...)
	return s.ID
}

// sends are the times, since start, of the sends of text on fk.
func sends(fk *fake.Adapter, start time.Time, text string) []time.Duration {
	var out []time.Duration
	for _, op := range fk.Ops() {
		if op.Method == "send" && op.Text == text && op.Err == nil {
			out = append(out, op.Time.Sub(start))
		}
	}
	return out
}

func journalLen(t *testing.T, st core.Store) int {
	t.Helper()
	ds, err := st.Deliveries(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(ds)
}

// TestClaimsOneInstanceDelivers: two instances see every event; each
// message is sent once, by the instance that claimed it first.
func TestClaimsOneInstanceDelivers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		shared := newSharedClaims(st)
		fk := newFake(core.Capabilities{})
		a := startInstance(t, "a", st, shared, fk)
		b := startInstance(t, "b", st, shared, fk)
		start := time.Now()
		id := boundSession(t, st, a, b)
		texts := []string{"one", "two", "three", "four"}
		for i, text := range texts {
			if i%2 == 0 {
				postTo(t, st, id, text, a, b)
			} else {
				postTo(t, st, id, text, b, a)
			}
		}
		time.Sleep(time.Minute) // many renewals and scans
		synctest.Wait()
		for _, text := range texts {
			if got := sends(fk, start, text); len(got) != 1 || got[0] != 0 {
				t.Errorf("%q sent at %v; want once, at once", text, got)
			}
		}
		if n := journalLen(t, st); n != 0 {
			t.Errorf("%d events left in the journal", n)
		}
	})
}

// TestClaimsTakenOverAtExpiry: an instance that dies holding a claim (it
// could not send: its platform connection was held) keeps it until the
// claim expires, TTL after its last renewal; the other instance's next
// scan takes the event over and sends it, once, at that instant.
func TestClaimsTakenOverAtExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		shared := newSharedClaims(st)
		fk := newFake(core.Capabilities{})
		a := startInstance(t, "a", st, shared, fk)
		b := startInstance(t, "b", st, shared, fk)
		start := time.Now()
		id := boundSession(t, st, a, b)
		a.out.Hold("fake", true)
		postTo(t, st, id, "the answer", a, b) // a claims it at +0s
		time.Sleep(7 * time.Second)           // a renewed at +5s: held until +20s
		a.die()
		time.Sleep(time.Minute)
		synctest.Wait()
		// b scans every 5 s: +10s and +15s find the claim held, +20s
		// finds it expired.
		want := claimTTL + 5*time.Second
		if got := sends(fk, start, "the answer"); len(got) != 1 || got[0] != want {
			t.Errorf("sent at %v; want once, by b, at +%v", got, want)
		}
		if n := journalLen(t, st); n != 0 {
			t.Errorf("%d events left in the journal", n)
		}
	})
}

// TestClaimsDefaultTakeoverWithinTenSeconds: with the default timings
// (TTL 6 s, renewals and scans every 2 s), an instance that dies just after
// renewing holds its claim until +8s, and the other sends at that instant:
// within the 10 s a platform's single consumer fails over in.
func TestClaimsDefaultTakeoverWithinTenSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		shared := newSharedClaims(st)
		fk := newFake(core.Capabilities{})
		a := startInstanceTTL(t, "a", st, shared, fk, nil, 0)
		b := startInstanceTTL(t, "b", st, shared, fk, nil, 0)
		start := time.Now()
		id := boundSession(t, st, a, b)
		a.out.Hold("fake", true)
		postTo(t, st, id, "the answer", a, b) // a claims it at +0s
		time.Sleep(3 * time.Second)           // a renewed at +2s: held until +8s
		a.die()
		time.Sleep(time.Minute)
		synctest.Wait()
		want := delivery.DefaultClaimTTL + 2*time.Second
		if got := sends(fk, start, "the answer"); len(got) != 1 || got[0] != want {
			t.Errorf("sent at %v; want once, by b, at +%v", got, want)
		}
		if want > 10*time.Second {
			t.Errorf("the default takeover takes %v, more than 10s", want)
		}
	})
}

// TestClaimsStopOnOwnClock: an instance cut off from the store cannot
// renew; it stops sending on its own clock (TTL − TTL/5 after the last
// grant, +12s) before the store could give the claim to another (+15s).
// Its operation that becomes ready at +13s is not sent and not confirmed;
// the other instance sends the message once at +15s.
func TestClaimsStopOnOwnClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		shared := newSharedClaims(st)
		fk := newFake(core.Capabilities{})
		a := startInstance(t, "a", st, shared, fk)
		b := startInstance(t, "b", st, shared, fk)
		start := time.Now()
		id := boundSession(t, st, a, b)
		a.out.Hold("fake", true)
		postTo(t, st, id, "the answer", a, b) // a claims it at +0s
		time.Sleep(time.Second)
		shared.setCut("a", true) // its renewals at +5s and +10s fail
		time.Sleep(12 * time.Second)
		a.out.Hold("fake", false) // +13s: too late by a's own clock
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := sends(fk, start, "the answer"); len(got) != 1 || got[0] != claimTTL {
			t.Errorf("sent at %v; want once, by b, at +%v", got, claimTTL)
		}
		if n := journalLen(t, st); n != 0 {
			t.Errorf("%d events left in the journal", n)
		}
		if s := a.out.Stats(); s.Pending != 0 {
			t.Errorf("a still has %d operations pending", s.Pending)
		}
		if n := a.d.Delivering(); n != 0 {
			t.Errorf("a counts %d events it is delivering, want none", n)
		}
		if got := messages(fk, dm, core.KindNotice); len(got) != 0 {
			t.Errorf("notices shown: %q; a's unsent operation is no refusal to tell the person about", got)
		}
	})
}

// TestClaimsReleasedAtCleanStop: an instance that stops cleanly releases
// the claims of what it did not deliver; the other takes them at its next
// scan instead of at expiry.
func TestClaimsReleasedAtCleanStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		shared := newSharedClaims(st)
		fk := newFake(core.Capabilities{})
		a := startInstance(t, "a", st, shared, fk)
		b := startInstance(t, "b", st, shared, fk)
		start := time.Now()
		id := boundSession(t, st, a, b)
		a.out.Hold("fake", true)
		postTo(t, st, id, "the answer", a, b)
		time.Sleep(2 * time.Second)
		a.die()
		if n := a.d.Delivering(); n != 1 {
			t.Errorf("a counts %d events it is delivering before it releases, want 1", n)
		}
		if err := a.d.ReleaseClaims(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := a.d.Delivering(); n != 0 {
			t.Errorf("a counts %d events it is delivering after releasing them, want none", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := sends(fk, start, "the answer"); len(got) != 1 || got[0] != 5*time.Second {
			t.Errorf("sent at %v; want once, by b at its first scan, +5s", got)
		}
	})
}

// TestClaimsOnBoltChangeNothing: one instance on a bbolt file with claims
// wired (every claim granted) delivers as without them: a message held back
// by the platform for many scans is sent once when it may be, and the
// scans do not send again what is being delivered.
func TestClaimsOnBoltChangeNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		fk := newFake(core.Capabilities{})
		a := startInstance(t, "a", st, st, fk)
		start := time.Now()
		id := boundSession(t, st, a)
		a.out.Hold("fake", true)
		postTo(t, st, id, "held", a)
		time.Sleep(time.Minute)
		a.out.Hold("fake", false)
		postTo(t, st, id, "at once", a)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := sends(fk, start, "held"); len(got) != 1 || got[0] != time.Minute {
			t.Errorf("held message sent at %v; want once, at +1m0s", got)
		}
		if got := sends(fk, start, "at once"); len(got) != 1 || got[0] != time.Minute {
			t.Errorf("second message sent at %v; want once, at +1m0s", got)
		}
		if n := journalLen(t, st); n != 0 {
			t.Errorf("%d events left in the journal", n)
		}
	})
}

// TestClaimsPassOverWhatCannotBeDelivered: a journaled event the dispatcher
// finds nothing to deliver for (no session, no place) stays journaled, as
// without claims (the next start's replay tries it again); the scans try it
// and pass it over from then on, not reporting a takeover every few
// seconds.
func TestClaimsPassOverWhatCannotBeDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		fk := newFake(core.Capabilities{})
		var logged bytes.Buffer
		a := startInstanceLog(t, "a", st, st, fk, slog.New(slog.NewTextHandler(&logged, nil)))
		id := boundSession(t, st, a)
		msg := core.Message{Role: core.RoleSystem, Mime: core.MimeMarkdown, Content: "to nowhere"}
		events, err := st.AppendEvents(context.Background(), core.Event{Kind: core.EventNotice, Message: &msg})
		if err != nil {
			t.Fatal(err)
		}
		publish(events, a)
		postTo(t, st, id, "delivered", a)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := journalLen(t, st); n != 1 {
			t.Errorf("%d events journaled, want the undeliverable one", n)
		}
		if n := strings.Count(logged.String(), "taking over"); n != 0 {
			t.Errorf("%d scans reported taking the undeliverable event over, want none:\n%s", n, logged.String())
		}
	})
}

// TestClaimsCancelCallAtExpiry: an instance cut off from the store that
// starts a send just before it must stop (+11s, stopping at +12s) on a
// platform slow to answer (5 s) has the call cancelled when its claim could
// expire (+15s), so that it cannot land after the other instance took
// over: the other's send, started at +15s, lands at +20s, the only one.
func TestClaimsCancelCallAtExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		shared := newSharedClaims(st)
		fk := newFake(core.Capabilities{})
		fk.Latency = 5 * time.Second
		a := startInstance(t, "a", st, shared, fk)
		b := startInstance(t, "b", st, shared, fk)
		a.out.Hold("fake", true)
		id := boundSession(t, st, a, b)
		start := time.Now()
		postTo(t, st, id, "the answer", a, b) // a claims it at +0s
		time.Sleep(time.Second)
		shared.setCut("a", true)
		time.Sleep(10 * time.Second)
		a.out.Hold("fake", false) // +11s: a starts the send
		time.Sleep(time.Minute)
		synctest.Wait()
		want := claimTTL + fk.Latency
		if got := sends(fk, start, "the answer"); len(got) != 1 || got[0] != want {
			t.Errorf("sent at %v; want once, by b, at +%v", got, want)
		}
		if n := journalLen(t, st); n != 0 {
			t.Errorf("%d events left in the journal", n)
		}
	})
}

// TestClaimsLongCallKeepsClaim: a platform call longer than a claim's TTL
// (a large upload) is not cancelled while its instance keeps renewing.
func TestClaimsLongCallKeepsClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		shared := newSharedClaims(st)
		fk := newFake(core.Capabilities{})
		a := startInstance(t, "a", st, shared, fk)
		b := startInstance(t, "b", st, shared, fk)
		id := boundSession(t, st, a, b)
		fk.Latency = 25 * time.Second
		start := time.Now()
		postTo(t, st, id, "the answer", a, b)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := sends(fk, start, "the answer"); len(got) != 1 || got[0] != fk.Latency {
			t.Errorf("sent at %v; want once, at +%v", got, fk.Latency)
		}
		if n := journalLen(t, st); n != 0 {
			t.Errorf("%d events left in the journal", n)
		}
	})
}
