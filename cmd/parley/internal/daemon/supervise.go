package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
)

// Degrade, don't die. A platform that cannot be reached, or that refuses
// parley's configuration, takes down only itself: the daemon supervises
// every adapter, and the other platforms, the page, the HTTP API and MCP
// keep serving.
//
// Starting an adapter is its Check (the token works, the bot has its
// rights), when it has one, then its Run. A Check or a Run that fails is
// retried after a backoff, doubling from StartMinBackoff to StartMaxBackoff
// and shortened by up to a fifth at random (so that several parleys behind
// one outage do not come back at the same instant); a Run that had been
// going for StartMaxBackoff starts the doubling afresh. A refusal — an
// error the adapter marks core.Permanent, such as a token the platform
// does not know (401) — is a configuration error, logged with its fix at
// error level, and is retried too, but only every RefusedRetry: some are
// fixed on the platform's side without touching parley (making the bot an
// administrator, turning the group's topics on), and for the others a
// parley that keeps serving the page and its API is more use than one that
// exits.
//
// While an adapter is not up, the outbox holds its operations
// (delivery.Outbox.Hold): nothing is attempted, so nothing is refused for good,
// and journaled deliveries wait in the store and go out as soon as it is
// up. The status of every adapter is a core.PlatformHealth (Daemon.Health),
// which the web adapter serves on /api/health.

// Start backoffs (see above).
const (
	StartMinBackoff = time.Second
	StartMaxBackoff = time.Minute
	RefusedRetry    = 5 * time.Minute
)

// checker is an adapter that verifies its configuration against its
// platform; the daemon runs it before Run, as the adapter's start.
type checker interface {
	Check(ctx context.Context) error
}

// health is the status registry: one entry per adapter.
type health struct {
	mu       sync.Mutex
	statuses map[core.AdapterName]core.PlatformStatus
	errs     map[core.AdapterName]error
}

func newHealth(adapters []core.Adapter, now time.Time) *health {
	h := &health{statuses: map[core.AdapterName]core.PlatformStatus{}, errs: map[core.AdapterName]error{}}
	for _, a := range adapters {
		h.statuses[a.Name()] = core.PlatformStatus{State: core.PlatformStarting, Since: now}
	}
	return h
}

func (h *health) set(name core.AdapterName, s core.PlatformStatus, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.statuses[name]; old.Up == s.Up && !old.Since.IsZero() {
		s.Since = old.Since
	}
	h.statuses[name] = s
	h.errs[name] = err
}

// Platforms implements core.PlatformHealth.
func (h *health) Platforms() map[core.AdapterName]core.PlatformStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.statuses)
}

// Health returns the status of the daemon's adapters.
func (d *Daemon) Health() core.PlatformHealth { return d.health }

// PlatformError returns the error that keeps adapter name down, with its
// message and fix as the log has them; nil when it is up or starting. It
// is for the operator (tests, doctor's view of the log), not for the
// health probe: it may name internals.
func (d *Daemon) PlatformError(name core.AdapterName) error {
	d.health.mu.Lock()
	defer d.health.mu.Unlock()
	return d.health.errs[name]
}

// stateOf says what kind of failure err is.
func stateOf(err error) core.PlatformState {
	switch {
	case err == nil:
		return core.PlatformStopped
	case core.IsPermanent(err):
		return core.PlatformRefused
	}
	return core.PlatformUnreachable
}

// startBackoff is the wait before start attempt n+1 after err.
func (d *Daemon) startBackoff(n int, err error) time.Duration {
	if stateOf(err) == core.PlatformRefused {
		return RefusedRetry
	}
	b := rawBackoff(n)
	return b - time.Duration(d.jitter()*float64(b)/5)
}

// rawBackoff is the backoff after n failures, before jitter.
func rawBackoff(n int) time.Duration {
	if n < 1 || n >= 32 {
		return StartMaxBackoff
	}
	return min(StartMinBackoff<<(n-1), StartMaxBackoff)
}

// supervise runs a until ctx ends, starting it again after every failure.
func (d *Daemon) supervise(ctx context.Context, a core.Adapter) {
	name := a.Name()
	log := d.log.With("adapter", name)
	failures := 0
	for ctx.Err() == nil {
		err := d.start(ctx, a)
		if err == nil {
			began := time.Now()
			d.health.set(name, core.PlatformStatus{Up: true, Since: began}, nil)
			d.Outbox.Hold(name, false)
			if failures > 0 {
				log.Info("platform up again", "after_attempts", failures+1)
			}
			err = a.Run(ctx, d.Service)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				err = errors.New("stopped receiving")
			}
			if time.Since(began) >= StartMaxBackoff {
				failures = 0
			}
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		wait := d.startBackoff(failures, err)
		next := time.Now().Add(wait)
		d.Outbox.Hold(name, true)
		state := stateOf(err)
		d.health.set(name, core.PlatformStatus{State: state, Since: time.Now(), NextRetry: next}, err)
		attrs := []any{"state", state, "err", err, "retry_in", wait.Round(time.Millisecond)}
		if fix := core.FixOf(err); fix != "" {
			attrs = append(attrs, "fix", fix)
		}
		lvl := slog.LevelWarn
		switch {
		case state == core.PlatformRefused:
			lvl = slog.LevelError
		case failures > 1 && !(rawBackoff(failures) == StartMaxBackoff && rawBackoff(failures-1) < StartMaxBackoff):
			// One warning when it goes down, one when the backoff
			// reaches its cap; debug in between.
			lvl = slog.LevelDebug
		}
		log.Log(ctx, lvl, "platform down: parley serves without it and tries again", attrs...)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// start runs a's Check, if it has one, bounded by startTimeout.
func (d *Daemon) start(ctx context.Context, a core.Adapter) error {
	c, ok := a.(checker)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := c.Check(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	return nil
}

// startTimeout bounds one Check: a platform that never answers is down,
// not a start that hangs.
const startTimeout = time.Minute
