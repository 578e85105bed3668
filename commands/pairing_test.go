package commands_test

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
)

// clock is a settable time for the pairing tests.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }
func pairOpts(c *clock) commands.Options {
	return commands.Options{Allow: map[core.Origin][]string{"telegram": {"1"}},
		Pairing: commands.PairingOptions{Enabled: true}, Now: c.Now}
}

var codeRE = regexp.MustCompile("`([A-Z2-9]{4}-[A-Z2-9]{4})`")

// pairCmd is what an adapter sends for a stranger in a private chat.
func pairCmd(id string) core.Command {
	return core.Command{Kind: core.Pair, Origin: "telegram", Actor: core.Actor{ID: id, Name: "Stranger " + id},
		Place: core.Place{Chat: id}}
}

// told returns the code in the one place-addressed notice of evs.
func told(tb testing.TB, evs []core.Event, place core.Place) string {
	tb.Helper()
	if len(evs) != 1 || evs[0].Kind != core.EventNotice || evs[0].Place == nil || *evs[0].Place != place {
		tb.Fatalf("events %+v, want one notice at %v", evs, place)
	}
	m := codeRE.FindStringSubmatch(evs[0].Message.Content)
	if m == nil {
		tb.Fatalf("notice %q carries no code", evs[0].Message.Content)
	}
	return m[1]
}

func TestPairing(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	e := newEnv(t, pairOpts(c))
	stranger := core.Actor{ID: "2"}

	// A stranger's message reaches nothing, pairing or not.
	if _, err := e.svc.Handle(ctx, msg("", "telegram", "hello")); !errors.Is(err, core.ErrUnauthorized) {
		t.Fatalf("stranger's message: %v, want ErrUnauthorized", err)
	}

	e.handle(pairCmd("2"))
	code := told(t, e.events(), core.Place{Chat: "2"})
	if e.svc.Authorized("telegram", stranger) {
		t.Fatal("authorized before the operator approved")
	}
	// Writing again soon after: silence, the same code waits.
	if _, err := e.svc.Handle(ctx, pairCmd("2")); !errors.Is(err, core.ErrUnauthorized) {
		t.Fatalf("second request: %v, want silence (ErrUnauthorized)", err)
	}
	if evs := e.events(); len(evs) != 0 {
		t.Fatalf("second request said %+v", evs)
	}
	// Ten minutes on, they are told the same code again.
	c.advance(10 * time.Minute)
	e.handle(pairCmd("2"))
	if again := told(t, e.events(), core.Place{Chat: "2"}); again != code {
		t.Fatalf("told %s, then %s", code, again)
	}

	reqs, adm, err := e.svc.Pairings(ctx)
	if err != nil || len(reqs) != 1 || reqs[0].Code != code || reqs[0].Actor.ID != "2" || len(adm) != 0 {
		t.Fatalf("Pairings = %+v, %+v, %v", reqs, adm, err)
	}
	// The operator types it in lower case without the dash.
	a, err := e.svc.ApprovePairing(ctx, strings.ToLower(strings.ReplaceAll(code, "-", "")))
	if err != nil || a.Actor.ID != "2" || a.Origin != "telegram" {
		t.Fatalf("approve: %+v, %v", a, err)
	}
	if !e.svc.Authorized("telegram", stranger) {
		t.Fatal("not authorized after approval")
	}
	evs := e.events()
	if len(evs) != 1 || !strings.Contains(evs[0].Message.Content, "You're in") {
		t.Fatalf("after approval: %+v", evs)
	}
	if _, err := e.svc.ApprovePairing(ctx, code); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("approving twice: %v, want ErrNotFound", err)
	}
	// Admissions survive a restart.
	again, err := commands.New(ctx, e.st, e.bus, pairOpts(c))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Authorized("telegram", stranger) {
		t.Error("admission lost on restart")
	}
	if again.Authorized("telegram", core.Actor{ID: "3"}) {
		t.Error("someone else admitted")
	}
}

func TestPairingLimits(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	e := newEnv(t, pairOpts(c))
	var codes []string
	for _, id := range []string{"2", "3", "4"} {
		e.handle(pairCmd(id))
		codes = append(codes, told(t, e.events(), core.Place{Chat: id}))
	}
	// A fourth stranger while three codes wait: silence.
	if _, err := e.svc.Handle(ctx, pairCmd("5")); !errors.Is(err, core.ErrUnauthorized) {
		t.Fatalf("fourth request: %v, want ErrUnauthorized", err)
	}
	if evs := e.events(); len(evs) != 0 {
		t.Fatalf("fourth request said %+v", evs)
	}
	// Denied: gone, not admitted, not told.
	if r, err := e.svc.DenyPairing(ctx, codes[0]); err != nil || r.Actor.ID != "2" {
		t.Fatalf("deny: %+v, %v", r, err)
	}
	if evs := e.events(); len(evs) != 0 || e.svc.Authorized("telegram", core.Actor{ID: "2"}) {
		t.Fatalf("after deny: events %+v", evs)
	}
	// An hour on, the codes have expired and room is made.
	c.advance(time.Hour)
	if _, err := e.svc.ApprovePairing(ctx, codes[1]); !errors.Is(err, core.ErrNotFound) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("approving an expired code: %v", err)
	}
	e.handle(pairCmd("5"))
	told(t, e.events(), core.Place{Chat: "5"})
	if reqs, _, _ := e.svc.Pairings(ctx); len(reqs) != 1 || reqs[0].Actor.ID != "5" {
		t.Errorf("waiting after expiry: %+v, want only 5's", reqs)
	}
	if _, err := e.svc.ApprovePairing(ctx, "ZZZZ-ZZZZ"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("unknown code: %v", err)
	}
}

func TestPairingOff(t *testing.T) {
	c := &clock{now: time.Now()}
	opts := pairOpts(c)
	opts.Pairing.Enabled = false
	e := newEnv(t, opts)
	if _, err := e.svc.Handle(context.Background(), pairCmd("2")); !errors.Is(err, core.ErrUnauthorized) {
		t.Fatalf("pairing off: %v, want ErrUnauthorized", err)
	}
	if evs := e.events(); len(evs) != 0 {
		t.Fatalf("pairing off said %+v", evs)
	}
	if _, err := e.svc.ApprovePairing(context.Background(), "ABCD-EFGH"); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("approve with pairing off: %v", err)
	}
	// Someone allowed by the configuration needs no code.
	opts.Pairing.Enabled = true
	e = newEnv(t, opts)
	if _, err := e.svc.Handle(context.Background(), core.Command{Kind: core.Pair, Origin: "telegram", Actor: core.Actor{ID: "1"}, Place: core.Place{Chat: "1"}}); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("pairing an allowed person: %v, want ErrInvalid", err)
	}
}

// unreadable is a store whose admissions cannot be read.
type unreadable struct{ *bolt.Store }

var errUnreadable = errors.New("disk on fire")

func (unreadable) Admissions(context.Context) ([]core.Admission, error) { return nil, errUnreadable }

// A Service started without the people pairing admitted would refuse them
// until a restart: New says so instead, and the daemon does not start.
// Its context is the one the reading runs under.
func TestNewFailsWithoutAdmissions(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := commands.New(context.Background(), unreadable{st}, core.NewMemBus(1), pairOpts(&clock{}))
	if !errors.Is(err, errUnreadable) || svc != nil || !strings.HasPrefix(err.Error(), "commands: ") {
		t.Errorf("New gave %v, %v; want no Service and the store's error", svc, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := commands.New(ctx, st, core.NewMemBus(1), pairOpts(&clock{})); !errors.Is(err, context.Canceled) {
		t.Errorf("New with a cancelled context: %v, want context.Canceled", err)
	}
}
