package daemon_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
)

// checked is the fake platform with a start check that fails as a test
// scripts it, and a Run that may fail before it receives: a platform that
// cannot be reached, or refuses parley's token, at start.
type checked struct {
	*fake.Adapter
	mu      sync.Mutex
	checks  []error // the next Checks' results; nil (or none left) passes
	runs    []error // the next Runs' immediate failures
	checked []time.Time
}

func (c *checked) Check(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked = append(c.checked, time.Now())
	if len(c.checks) == 0 {
		return nil
	}
	err := c.checks[0]
	c.checks = c.checks[1:]
	return err
}

func (c *checked) Run(ctx context.Context, h core.Handler) error {
	c.mu.Lock()
	if len(c.runs) > 0 {
		err := c.runs[0]
		c.runs = c.runs[1:]
		c.mu.Unlock()
		return err
	}
	c.mu.Unlock()
	return c.Adapter.Run(ctx, h)
}

func (c *checked) times() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.checked...)
}

// newCheckedHarness starts a bubble harness whose platform is c around its
// fake, with no jitter in the start backoff.
func newCheckedHarness(t *testing.T, c *checked) *harness {
	t.Helper()
	return newBubbleHarness(t, telegramLike(), func(o *daemon.Options) {
		c.Adapter = o.Adapters[0].(*fake.Adapter)
		o.Adapters = []core.Adapter{c}
		o.Jitter = func() float64 { return 0 }
	})
}

func status(h *harness) core.PlatformStatus { return h.d.Health().Platforms()["fake"] }

// TestUnreachablePlatformIsRetriedWithBackoff: a platform that cannot be
// reached at start is tried again after 1 s, 2 s, 4 s (doubling, capped),
// is reported down and why meanwhile, and what was posted for it while it
// was down is delivered once it is up.
func TestUnreachablePlatformIsRetriedWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		unreachable := errors.New("dial tcp: connection refused")
		c := &checked{checks: []error{unreachable, unreachable, unreachable}}
		start := time.Now()
		h := newCheckedHarness(t, c)
		synctest.Wait()
		s := status(h)
		if s.Up || s.State != core.PlatformUnreachable || !s.NextRetry.Equal(start.Add(time.Second)) {
			t.Fatalf("status after the first failure: %+v", s)
		}
		if err := h.d.PlatformError("fake"); !errors.Is(err, unreachable) {
			t.Errorf("platform error %v", err)
		}
		// Meanwhile the daemon serves: a session is made, an answer posted.
		id := h.newSession("while down")
		h.post(id, "answer while down")
		synctest.Wait()
		if ops := c.Ops(); len(ops) != 0 {
			t.Fatalf("a down platform was called: %v", ops)
		}
		time.Sleep(7 * time.Second) // 1 + 2 + 4
		synctest.Wait()
		var got []time.Duration
		for _, at := range c.times() {
			got = append(got, at.Sub(start))
		}
		want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second}
		if len(got) != len(want) {
			t.Fatalf("checks at %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("checks at %v, want %v", got, want)
			}
		}
		if s := status(h); !s.Up || s.State != "" || !s.NextRetry.IsZero() || !s.Since.Equal(start.Add(7*time.Second)) {
			t.Errorf("status once up: %+v", s)
		}
		if h.d.PlatformError("fake") != nil {
			t.Errorf("error once up: %v", h.d.PlatformError("fake"))
		}
		h.drain()
		if n := texts(c.Adapter, h.place(id), core.KindAssistant)["answer while down"]; n != 1 {
			t.Errorf("the answer posted while down shown %d times", n)
		}
		// And the platform's input reaches the daemon.
		h.say(core.Place{Chat: "c1"}, "hello")
	})
}

// TestRefusedPlatformIsRetriedSlowly: a refusal (the platform does not
// know the token) is reported as such and retried every RefusedRetry;
// while it lasts, nothing is sent, so a delivery is not refused for good
// but delivered once the platform takes the token.
func TestRefusedPlatformIsRetriedSlowly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := core.WithFix(core.Permanent(errors.New("401 Unauthorized")), "set the token")
		c := &checked{checks: []error{refused, refused}}
		start := time.Now()
		h := newCheckedHarness(t, c)
		c.SetDown(core.Permanent(errors.New("401 Unauthorized"))) // every call refused too
		synctest.Wait()
		if s := status(h); s.State != core.PlatformRefused || !s.NextRetry.Equal(start.Add(daemon.RefusedRetry)) {
			t.Fatalf("status: %+v", s)
		}
		id := h.newSession("refused")
		h.post(id, "kept")
		time.Sleep(daemon.RefusedRetry)
		synctest.Wait()
		if s := status(h); s.Up || !s.NextRetry.Equal(start.Add(2*daemon.RefusedRetry)) || !s.Since.Equal(start) {
			t.Fatalf("status after the second refusal: %+v", s)
		}
		c.SetDown(nil) // the token was fixed on the platform's side
		time.Sleep(daemon.RefusedRetry)
		synctest.Wait()
		if s := status(h); !s.Up {
			t.Fatalf("status: %+v", s)
		}
		h.drain()
		if n := texts(c.Adapter, h.place(id), core.KindAssistant)["kept"]; n != 1 {
			t.Errorf("the answer posted while refused shown %d times", n)
		}
	})
}

// TestFailedRunIsRestarted: an adapter whose Run fails after it started
// (the platform went away) is reported down and started again, and the
// daemon keeps running.
func TestFailedRunIsRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &checked{runs: []error{errors.New("connection reset")}}
		start := time.Now()
		h := newCheckedHarness(t, c)
		synctest.Wait()
		if s := status(h); s.Up || s.State != core.PlatformUnreachable || !s.NextRetry.Equal(start.Add(time.Second)) {
			t.Fatalf("status after Run failed: %+v", s)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if s := status(h); !s.Up {
			t.Fatalf("status: %+v", s)
		}
		if n := len(c.times()); n != 2 {
			t.Errorf("%d checks, want 2", n)
		}
		h.say(core.Place{Chat: "c1"}, "hello")
	})
}
