package telegram_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/telegram"
	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
	"github.com/parley-chat/parley/store/postgres"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// polls counts the getUpdates requests of several adapters from the
// client's side: in flight from the request until its answer's body is
// closed, so that two holders' polls overlapping by a moment show.
type polls struct {
	inFlight, most, conflicts atomic.Int32
	mu                        sync.Mutex
	by                        map[string]int // getUpdates sent, per instance
	first                     map[string]time.Time
}

func (p *polls) client(instance string) *http.Client {
	return &http.Client{Timeout: time.Minute, Transport: pollCounter{p: p, instance: instance}}
}

type pollCounter struct {
	p        *polls
	instance string
}

func (c pollCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if !isGetUpdates(r) {
		return http.DefaultTransport.RoundTrip(r)
	}
	p := c.p
	n := p.inFlight.Add(1)
	for m := p.most.Load(); n > m && !p.most.CompareAndSwap(m, n); m = p.most.Load() {
	}
	p.mu.Lock()
	p.by[c.instance]++
	if _, ok := p.first[c.instance]; !ok {
		p.first[c.instance] = time.Now()
	}
	p.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		p.inFlight.Add(-1)
		return nil, err
	}
	if resp.StatusCode == http.StatusConflict {
		p.conflicts.Add(1)
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, done: func() { p.inFlight.Add(-1) }}
	return resp, nil
}

func isGetUpdates(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/getUpdates") }

type countedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *countedBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

// inbox records what the adapters hand on, by platform message id.
type inbox struct {
	mu   sync.Mutex
	seen map[string]int
}

func (in *inbox) Handle(_ context.Context, c core.Command) (core.Result, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.seen[c.PlatformID]++
	return core.Result{Session: "s", Duplicate: in.seen[c.PlatformID] > 1}, nil
}

func (in *inbox) count() (distinct, total int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, n := range in.seen {
		distinct++
		total += n
	}
	return distinct, total
}

// pollCluster is instances' adapters polling one telegramtest bot, each
// on its own connection to one PostgreSQL store, while a person writes to
// the bot.
type pollCluster struct {
	t    *testing.T
	pg   *pgtest.Server
	srv  *telegramtest.Server
	chat int64
	ann  telegramtest.User
	p    *polls
	in   *inbox
}

func newPollCluster(t *testing.T) *pollCluster {
	c := &pollCluster{t: t, pg: pgtest.Start(t), srv: telegramtest.NewServer(t, telegramtest.Options{}),
		ann: telegramtest.User{ID: 42, FirstName: "Ann"},
		p:   &polls{by: map[string]int{}, first: map[string]time.Time{}}, in: &inbox{seen: map[string]int{}}}
	c.chat = c.srv.NewPrivateChat(c.ann)
	return c
}

// start runs an instance's adapter until stop, which returns Run's error.
func (c *pollCluster) start(instance string) (stop func() error, st *postgres.Store) {
	t := c.t
	st, err := postgres.Open(t.Context(), c.pg.URL, postgres.Options{Instance: core.InstanceID(instance)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a, err := telegram.New(telegram.Options{Token: c.srv.Token, APIURL: c.srv.URL, Cursors: st, Leases: st,
		Authorizer: adaptertest.Everyone, PollTimeout: 2 * time.Second, HTTPClient: c.p.client(instance),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, c.in) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(10 * time.Second):
				runErr = fmt.Errorf("%s: Run did not return", instance)
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop, st
}

// polled is how many getUpdates instance sent.
func (c *pollCluster) polled(instance string) int {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return c.p.by[instance]
}

// firstPoll is when instance sent its first getUpdates.
func (c *pollCluster) firstPoll(instance string) time.Time {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return c.p.first[instance]
}

// write makes the person write a message every 20 ms until the returned
// stop, which says how many were written.
func (c *pollCluster) write() (stop func() int) {
	written := make(chan int, 1)
	quit := make(chan struct{})
	go func() {
		n := 0
		defer func() { written <- n }()
		for {
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
				c.srv.SendText(c.chat, 0, c.ann, fmt.Sprintf("message %d", n))
				n++
			}
		}
	}()
	return func() int {
		close(quit)
		return <-written
	}
}

// TestPollLeaseHandover runs two instances' adapters on one PostgreSQL
// store polling one bot: only the lease's holder polls (telegramtest
// would end a second getUpdates with 409; the client sees no two polls in
// flight at once), and when the holder stops the other takes over within
// 2 s, from the offset the holder stored: people's messages written
// throughout reach the handler each exactly once.
func TestPollLeaseHandover(t *testing.T) {
	c := newPollCluster(t)
	stopWriting := c.write()
	stopA, _ := c.start("a")
	c.srv.Await(t, 10*time.Second, "instance a to poll", func() bool { return c.polled("a") > 0 })
	stopB, _ := c.start("b")
	// b tries for the lease every 0.5 s meanwhile and must not poll.
	waitFor(t, 10*time.Second, "a to hand on 30 messages", func() bool { d, _ := c.in.count(); return d >= 30 })
	if n := c.polled("b"); n != 0 {
		t.Fatalf("instance b polled %d times while a held the lease", n)
	}
	stopped := time.Now()
	if err := stopA(); err != nil {
		t.Fatalf("a's Run: %v", err)
	}
	waitFor(t, 10*time.Second, "instance b to poll", func() bool { return c.polled("b") > 0 })
	took := c.firstPoll("b").Sub(stopped)
	t.Logf("handover after a clean stop: %s", took)
	if took > 2*time.Second {
		t.Errorf("b took over %s after a stopped, want ≤ 2 s", took)
	}
	waitFor(t, 10*time.Second, "b to hand on 20 more messages", func() bool {
		d, _ := c.in.count()
		return d >= 30+20
	})
	n := stopWriting()
	waitFor(t, 10*time.Second, "every message handed on", func() bool { d, _ := c.in.count(); return d == n })
	if err := stopB(); err != nil {
		t.Fatalf("b's Run: %v", err)
	}
	if d, total := c.in.count(); d != n || total != n {
		t.Errorf("%d messages written, %d handed on, %d times in all: want each exactly once", n, d, total)
	}
	if most, conflicts := c.p.most.Load(), c.p.conflicts.Load(); most != 1 || conflicts != 0 {
		t.Errorf("at most %d getUpdates in flight at once, %d answered 409: want 1 and 0", most, conflicts)
	}
}

// TestPollLeaseHolderCutOff: the holder loses the database (its store
// closes: it can neither renew nor store an offset) while it keeps
// polling Telegram. It stops polling on its own clock before the lease
// expires by the database's, so the other instance, which takes over once
// it has, never polls at the same time; it takes over within 10 s and no
// message is lost (those the cut-off holder handled without storing their
// offset come again, for the store's dedup to drop).
func TestPollLeaseHolderCutOff(t *testing.T) {
	c := newPollCluster(t)
	stopWriting := c.write()
	_, stA := c.start("a")
	c.srv.Await(t, 10*time.Second, "instance a to poll", func() bool { return c.polled("a") > 0 })
	c.start("b")
	waitFor(t, 10*time.Second, "a to hand on 10 messages", func() bool { d, _ := c.in.count(); return d >= 10 })
	cut := time.Now()
	stA.Close()
	waitFor(t, 15*time.Second, "instance b to poll", func() bool { return c.polled("b") > 0 })
	took := c.firstPoll("b").Sub(cut)
	t.Logf("takeover after the holder lost the database: %s", took)
	if took > 10*time.Second {
		t.Errorf("b took over %s after a was cut off, want ≤ 10 s", took)
	}
	n := stopWriting()
	waitFor(t, 10*time.Second, "every message handed on", func() bool { d, _ := c.in.count(); return d == n })
	d, total := c.in.count()
	t.Logf("%d messages written, %d handed on, %d repeats for dedup", n, d, total-d)
	if most, conflicts := c.p.most.Load(), c.p.conflicts.Load(); most != 1 || conflicts != 0 {
		t.Errorf("at most %d getUpdates in flight at once, %d answered 409: want 1 and 0", most, conflicts)
	}
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
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

// conflictOnce answers the start-up calls as botAPIDown does and the first
// getUpdates with Telegram's 409 for a second poller, the later ones with
// an empty batch after their timeout; it records when each getUpdates
// came, on a synctest bubble's clock.
type conflictOnce struct {
	mu    sync.Mutex
	polls []time.Time
}

func (c *conflictOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	if !isGetUpdates(r) {
		return botAPIDown{}.RoundTrip(r)
	}
	c.mu.Lock()
	c.polls = append(c.polls, time.Now())
	first := len(c.polls) == 1
	c.mu.Unlock()
	body := `{"ok":false,"error_code":409,"description":"Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}`
	if !first {
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-time.After(time.Second):
		}
		body = `{"ok":true,"result":[]}`
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// TestConflictGivesTheLeaseUp: a 409 to getUpdates (another consumer of
// the bot's updates is active) gives the lease up and polls again only
// after core.Lead's conflict backoff, the lease's TTL: another instance
// may take it meanwhile, and two pollers do not end each other's polls
// in turn every moment.
func TestConflictGivesTheLeaseUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &conflictOnce{}
		cur := &releases{cursors: cursors{m: map[string]string{}}}
		a, err := telegram.New(telegram.Options{Token: "1:x", APIURL: "http://bot.invalid", HTTPClient: &http.Client{Transport: api},
			PollTimeout: time.Second, Cursors: cur, Leases: cur, Authorizer: adaptertest.Everyone, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- a.Run(ctx, core.HandlerFunc(func(context.Context, core.Command) (core.Result, error) { return core.Result{}, nil }))
		}()
		time.Sleep(core.LeaseTTL + time.Second/2) // the bubble's clock
		synctest.Wait()
		api.mu.Lock()
		polls := append([]time.Time(nil), api.polls...)
		api.mu.Unlock()
		if len(polls) != 2 || polls[1].Sub(polls[0]) != core.LeaseTTL {
			t.Errorf("getUpdates at %v: want a second one %s after the 409", polls, core.LeaseTTL)
		}
		if got := cur.released(); len(got) != 1 || got[0] != "telegram/1" {
			t.Errorf("released %q, want the lease telegram/1 once (given up)", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// releases is the tests' always-granted leases, recording releases.
type releases struct {
	cursors
	mu   sync.Mutex
	rels []string
}

func (r *releases) ReleaseLease(_ context.Context, l core.Lease) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rels = append(r.rels, l.Name)
	return nil
}

func (r *releases) released() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.rels...)
}

// TestSecondPollerGivesTheLeaseUp: against telegramtest, a getUpdates by
// a poller outside the cluster (its own process, its own store) ends the
// holder's poll with 409 as Telegram does, and the holder gives its lease
// up rather than take the poll back at once.
func TestSecondPollerGivesTheLeaseUp(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	p := &polls{by: map[string]int{}, first: map[string]time.Time{}}
	cur := &releases{cursors: cursors{m: map[string]string{}}}
	a, err := telegram.New(telegram.Options{Token: srv.Token, APIURL: srv.URL, Cursors: cur, Leases: cur,
		Authorizer: adaptertest.Everyone, PollTimeout: 10 * time.Second, HTTPClient: p.client("a"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- a.Run(ctx, core.HandlerFunc(func(context.Context, core.Command) (core.Result, error) { return core.Result{}, nil }))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	srv.Await(t, 10*time.Second, "the adapter to poll", func() bool { return srv.Polling() == 1 })
	other := make(chan error, 1)
	go func() {
		resp, err := http.Post(srv.URL+"/bot"+srv.Token+"/getUpdates", "application/json", strings.NewReader(`{"timeout":1}`))
		if err == nil {
			resp.Body.Close()
		}
		other <- err
	}()
	defer func() { <-other }()
	waitFor(t, 10*time.Second, "the lease to be given up", func() bool { return len(cur.released()) == 1 })
	if c := p.conflicts.Load(); c != 1 {
		t.Errorf("the adapter's polls answered 409: %d, want 1", c)
	}
	if got := cur.released(); got[0] != telegram.LeaseName(botID(t, srv.Token)) {
		t.Errorf("released %q", got)
	}
}

// botID is the bot's id: the token's number before the colon.
func botID(t *testing.T, token string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(token[:strings.IndexByte(token, ':')], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// oneUpdate is a Bot API in memory with one update queued (id 5), handed
// to every getUpdates whose offset does not confirm it, as Telegram does;
// a poll with nothing to hand waits its timeout on the bubble's clock.
type oneUpdate struct{}

func (oneUpdate) RoundTrip(r *http.Request) (*http.Response, error) {
	if !isGetUpdates(r) {
		return botAPIDown{}.RoundTrip(r)
	}
	var req struct {
		Offset int64 `json:"offset"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return nil, err
	}
	body := `{"ok":true,"result":[{"update_id":5,"message":{"message_id":1,"date":1,"chat":{"id":42,"type":"private"},"from":{"id":42,"is_bot":false,"first_name":"Ann"},"text":"hi"}}]}`
	if req.Offset > 5 {
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-time.After(time.Second):
		}
		body = `{"ok":true,"result":[]}`
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// refusedOnce is the tests' always-granted leases, except that the first
// fenced write is refused as a store refuses a holder that lost its lease.
type refusedOnce struct {
	cursors
	mu       sync.Mutex
	acquired int
	refused  bool
}

func (r *refusedOnce) AcquireLease(ctx context.Context, name string, ttl time.Duration) (core.Lease, bool, error) {
	r.mu.Lock()
	r.acquired++
	r.mu.Unlock()
	return r.cursors.AcquireLease(ctx, name, ttl)
}

func (r *refusedOnce) SetCursorFenced(ctx context.Context, name, value string, l core.Lease) error {
	r.mu.Lock()
	first := !r.refused
	r.refused = true
	r.mu.Unlock()
	if first {
		return fmt.Errorf("set cursor under lease %s: %w", l.Name, core.ErrLeaseLost)
	}
	return r.cursors.SetCursorFenced(ctx, name, value, l)
}

// TestFencedOffsetRefused: when the store refuses the offset write (the
// lease passed to another instance meanwhile), the poll stops at once, the
// adapter waits for the lease again and, holding it, reads the offset
// anew: the update whose offset was refused comes again (for the store's
// dedup), and nothing is skipped.
func TestFencedOffsetRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		leases := &refusedOnce{cursors: cursors{m: map[string]string{}}}
		var mu sync.Mutex
		handled := 0
		a, err := telegram.New(telegram.Options{Token: "1:x", APIURL: "http://bot.invalid", HTTPClient: &http.Client{Transport: oneUpdate{}},
			PollTimeout: time.Second, Cursors: leases, Leases: leases, Authorizer: adaptertest.Everyone, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- a.Run(ctx, core.HandlerFunc(func(_ context.Context, c core.Command) (core.Result, error) {
				if c.PlatformID == "42:1" {
					mu.Lock()
					handled++
					mu.Unlock()
				}
				return core.Result{Session: "s"}, nil
			}))
		}()
		time.Sleep(5 * time.Second) // the bubble's clock
		synctest.Wait()
		mu.Lock()
		n := handled
		mu.Unlock()
		leases.mu.Lock()
		acquired := leases.acquired
		leases.mu.Unlock()
		if n != 2 || acquired != 2 {
			t.Errorf("the update handed on %d times, the lease acquired %d times: want 2 and 2", n, acquired)
		}
		if v, _ := leases.Cursor(t.Context(), "telegram.offset"); v != "6" {
			t.Errorf("offset = %q, want 6", v)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
