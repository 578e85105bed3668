package matrix_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"

	"github.com/parley-chat/parley/adapters/matrix"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/postgres"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// calls counts, per instance, the syncs and logins its adapter makes.
type calls struct {
	mu     sync.Mutex
	syncs  map[string]int
	first  map[string]time.Time // first sync
	logins int
}

type callCounter struct {
	c        *calls
	instance string
}

func (cc callCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c := cc.c
	c.mu.Lock()
	switch {
	case strings.HasSuffix(r.URL.Path, "/sync"):
		c.syncs[cc.instance]++
		if _, ok := c.first[cc.instance]; !ok {
			c.first[cc.instance] = time.Now()
		}
	case strings.HasSuffix(r.URL.Path, "/login") && r.Method == http.MethodPost:
		c.logins++
	}
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *calls) synced(instance string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.syncs[instance]
}

func (c *calls) loginCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logins
}

// TestSyncLeaseHandover runs two instances' adapters on one PostgreSQL
// store for one account, logging in by password: they start together
// and log in once (one device, one token shared through the store); only
// the sync lease's holder syncs; when it stops, the other takes the sync
// over within 2 s from the stored position, and what the person wrote
// throughout reaches the handler exactly once.
func TestSyncLeaseHandover(t *testing.T) {
	w := newWorld(t)
	pg := pgtest.Start(t)
	c := &calls{syncs: map[string]int{}, first: map[string]time.Time{}}
	h := newHandler(w.ann.User.ID)
	adapter := func(instance string) *matrix.Adapter {
		st, err := postgres.Open(t.Context(), pg.URL, postgres.Options{Instance: core.InstanceID(instance)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		a, err := matrix.New(matrix.Options{Homeserver: w.hs.URL, UserID: w.bot.ID, Password: w.bot.Password,
			Allowed: []string{string(w.ann.User.ID)}, Authorizer: admit(w.ann.User.ID), Cursors: st, Leases: st, Files: w.files,
			SyncTimeout: time.Second, HTTPClient: &http.Client{Timeout: time.Minute, Transport: callCounter{c, instance}},
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a, b := adapter("a"), adapter("b")
	checked := make(chan error, 2)
	go func() { checked <- a.Check(t.Context()) }()
	go func() { checked <- b.Check(t.Context()) }()
	for range 2 {
		if err := <-checked; err != nil {
			t.Fatal(err)
		}
	}
	if n := c.loginCount(); n != 1 {
		t.Errorf("two instances starting together logged in %d times, want once", n)
	}

	stopA := run(t, a, h)
	waitUntil(t, "a to sync", func() bool { return c.synced("a") > 0 })
	run(t, b, h)
	room := w.ann.CreateRoom(t, "Shared", w.bot.ID)
	h.wait(t, "the session", func(cmd core.Command) bool { return cmd.Kind == core.CreateSession })
	joinedBy(t, w.ann, room, w.bot.ID, "join")
	const before, during = 5, 5
	for i := range before {
		w.ann.Send(t, room, fmt.Sprintf("before %d", i))
	}
	h.wait(t, "the last message before", func(cmd core.Command) bool { return cmd.Text == fmt.Sprintf("before %d", before-1) })
	if n := c.synced("b"); n != 0 {
		t.Fatalf("instance b synced %d times while a held the lease", n)
	}

	stopped := time.Now()
	stopA()
	for i := range during {
		w.ann.Send(t, room, fmt.Sprintf("during %d", i))
	}
	waitUntil(t, "b to sync", func() bool { return c.synced("b") > 0 })
	c.mu.Lock()
	took := c.first["b"].Sub(stopped)
	c.mu.Unlock()
	t.Logf("sync taken over %s after a clean stop", took)
	if took > 2*time.Second {
		t.Errorf("b took the sync over %s after a stopped, want ≤ 2 s", took)
	}
	h.wait(t, "the last message during", func(cmd core.Command) bool { return cmd.Text == fmt.Sprintf("during %d", during-1) })
	for _, prefix := range []string{"before", "during"} {
		for i := range before {
			text := fmt.Sprintf("%s %d", prefix, i)
			if n := h.count(func(cmd core.Command) bool { return cmd.Text == text }); n != 1 {
				t.Errorf("%q handed on %d times, want once", text, n)
			}
		}
	}
	if n := h.count(func(cmd core.Command) bool { return cmd.Kind == core.CreateSession }); n != 1 {
		t.Errorf("the session created %d times, want once", n)
	}
	if n := c.loginCount(); n != 1 {
		t.Errorf("logged in %d times in all, want once", n)
	}

	// A third instance starts with the stored token and does not sync;
	// the homeserver forgets the token: the syncing instance logs in
	// again, and the third takes the new token once its own is refused.
	third := adapter("c")
	if err := third.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	run(t, third, h)
	logout, err := mautrix.NewClient(w.hs.URL, w.bot.ID, storedToken(t, pg.URL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := logout.Logout(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.ann.Send(t, room, "after the logout")
	h.wait(t, "the message after the logout", func(cmd core.Command) bool { return cmd.Text == "after the logout" })
	if n := c.loginCount(); n != 2 {
		t.Errorf("logged in %d times in all after the logout, want twice", n)
	}
	if n := c.synced("c"); n != 0 {
		t.Errorf("instance c synced %d times while b held the lease", n)
	}
	p := core.Place{Chat: string(room)}
	if _, err := third.Send(t.Context(), p, core.OutMessage{Kind: core.KindAssistant, Text: "first try"}); err == nil {
		t.Fatal("a send with the forgotten token succeeded")
	}
	if _, err := third.Send(t.Context(), p, core.OutMessage{Kind: core.KindAssistant, Text: "from c"}); err != nil {
		t.Fatalf("the send after the refusal, with the stored token: %v", err)
	}
	if n := c.loginCount(); n != 2 {
		t.Errorf("logged in %d times in all, want twice", n)
	}
}

// storedToken is the access token kept in the store at url.
func storedToken(t *testing.T, url string) string {
	t.Helper()
	st, err := postgres.Open(t.Context(), url, postgres.Options{Instance: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := st.Cursor(t.Context(), "matrix.login")
	var l struct {
		AccessToken string `json:"access_token"`
	}
	if err != nil || json.Unmarshal([]byte(v), &l) != nil || l.AccessToken == "" {
		t.Fatalf("stored login %q: %v", v, err)
	}
	return l.AccessToken
}

// waitUntil polls cond until it holds, failing the test after 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// refusedOnce is the tests' always-granted leases, except that the first
// fenced write is refused as a store refuses a holder that lost its
// lease; it counts the acquisitions.
type refusedOnce struct {
	*cursors
	mu       sync.Mutex
	acquired int
	refused  []string
}

func (r *refusedOnce) AcquireLease(ctx context.Context, name string, ttl time.Duration) (core.Lease, bool, error) {
	r.mu.Lock()
	r.acquired++
	r.mu.Unlock()
	return r.cursors.AcquireLease(ctx, name, ttl)
}

func (r *refusedOnce) SetCursorFenced(ctx context.Context, name, value string, l core.Lease) error {
	r.mu.Lock()
	first := len(r.refused) == 0
	if first {
		r.refused = append(r.refused, name)
	}
	r.mu.Unlock()
	if first {
		return fmt.Errorf("set cursor under lease %s: %w", l.Name, core.ErrLeaseLost)
	}
	return r.cursors.SetCursorFenced(ctx, name, value, l)
}

// TestFencedWriteRefused: when the store refuses a fenced write of the
// sync (the lease passed to another instance meanwhile), the sync stops,
// the adapter waits for the lease again and, holding it, reads its
// cursors anew and goes on: nothing is lost.
func TestFencedWriteRefused(t *testing.T) {
	w := newWorld(t)
	h := newHandler(w.ann.User.ID)
	leases := &refusedOnce{cursors: w.store}
	a, err := matrix.New(matrix.Options{Homeserver: w.hs.URL, UserID: w.bot.ID, AccessToken: w.bot.AccessToken,
		Allowed: []string{string(w.ann.User.ID)}, Authorizer: admit(w.ann.User.ID), Cursors: w.store, Leases: leases, Files: w.files,
		SyncTimeout: time.Second, HTTPClient: &http.Client{Timeout: time.Minute}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, h)
	room := w.ann.CreateRoom(t, "Fenced", w.bot.ID)
	h.wait(t, "the session", func(cmd core.Command) bool { return cmd.Kind == core.CreateSession })
	joinedBy(t, w.ann, room, w.bot.ID, "join")
	w.ann.Send(t, room, "hello")
	h.wait(t, "the message", func(cmd core.Command) bool { return cmd.Text == "hello" })
	leases.mu.Lock()
	acquired, refused := leases.acquired, leases.refused
	leases.mu.Unlock()
	if acquired != 2 || len(refused) != 1 || refused[0] != "matrix.filter" {
		t.Errorf("lease acquired %d times, refused writes %q: want twice, the filter's", acquired, refused)
	}
	if v, _ := w.store.Cursor(t.Context(), "matrix.next_batch"); v == "" {
		t.Error("no sync position stored")
	}
}
