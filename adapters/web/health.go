package web

import (
	"context"
	"net/http"
	"time"

	"github.com/parley-chat/parley/core"
)

// The health probe, GET /api/health. It needs no token, so that a
// supervisor's liveness probe can use it, and keeps that meaning: 200 while
// parley runs (even with a platform down: restarting parley would not
// bring a platform back), 503 while it starts or stops. Its body also says
// which platform is down and why, in the words of core.PlatformState only:
// anyone who reaches the address may read it, so it names no error text,
// host, token or account.
//
//	{"ok": true,
//	 "platforms": {
//	   "telegram": {"up": false, "error": "unreachable",
//	                "since": "2026-11-26T05:43:18Z", "next_retry": "2026-11-26T05:43:22Z"},
//	   "slack":    {"up": true, "since": "2026-11-26T05:43:18Z"}}}
//
// error is "starting", "unreachable", "refused" (the platform refused
// parley's configuration; the log and parley doctor say the fix) or
// "stopped". The web page itself is not listed: it answers.
//
// Among instances sharing a store, it also says which instance answered
// ("instance": its id, the host name and process id) and which leases it
// holds ("leases": their names, such as a Telegram poller's), so that an
// operator behind a load balancer sees where the single consumers run.
// Those name a host and a bot or account, so they are told only to a
// request that may read the rest of the API (with [http] token set, one
// that sends it); both are omitted when the daemon gave none (SetCluster).

type healthBox struct{ h core.PlatformHealth }

// SetPlatformHealth gives the adapter what tells it the platforms' status,
// for the health probe. cmd calls it once the daemon exists, before
// serving.
func (a *Adapter) SetPlatformHealth(h core.PlatformHealth) { a.platforms.Store(&healthBox{h}) }

type healthView struct {
	OK        bool                        `json:"ok"`
	Error     string                      `json:"error,omitempty"`
	Platforms map[core.AdapterName]status `json:"platforms,omitempty"`
	Instance  string                      `json:"instance,omitempty"`
	Leases    []string                    `json:"leases,omitempty"`
}

// clusterBox holds what SetCluster gave.
type clusterBox struct {
	instance string
	leases   func(context.Context) ([]string, error)
	admit    func(*http.Request) bool
}

// leasesTimeout bounds the store read of the leases held, so that a slow
// database never makes the liveness probe time out: the list is left out.
const leasesTimeout = time.Second

// SetCluster gives the health probe this instance's id, what lists the
// leases it holds, and admit, which says whether a request may be told
// them (it carries the API's token). cmd calls it once the daemon exists,
// before serving.
func (a *Adapter) SetCluster(instance string, leases func(context.Context) ([]string, error), admit func(*http.Request) bool) {
	a.cluster.Store(&clusterBox{instance: instance, leases: leases, admit: admit})
}

type status struct {
	Up        bool               `json:"up"`
	Error     core.PlatformState `json:"error,omitempty"`
	Since     time.Time          `json:"since,omitzero"`
	NextRetry time.Time          `json:"next_retry,omitzero"`
}

func (a *Adapter) health(w http.ResponseWriter, r *http.Request) {
	if a.back.Load() == nil || a.handler.Load() == nil {
		writeJSON(w, http.StatusServiceUnavailable, healthView{Error: "not running"})
		return
	}
	v := healthView{OK: true}
	if b := a.platforms.Load(); b != nil {
		for name, s := range b.h.Platforms() {
			if name == Name {
				continue
			}
			if v.Platforms == nil {
				v.Platforms = map[core.AdapterName]status{}
			}
			v.Platforms[name] = status{Up: s.Up, Error: s.State,
				Since: s.Since.UTC().Truncate(time.Second), NextRetry: s.NextRetry.UTC().Truncate(time.Second)}
		}
	}
	if c := a.cluster.Load(); c != nil && c.admit(r) {
		v.Instance = c.instance
		ctx, cancel := context.WithTimeout(r.Context(), leasesTimeout)
		if held, err := c.leases(ctx); err == nil {
			v.Leases = held
		} else {
			a.log.Debug("health: leases not read", "err", err)
		}
		cancel()
	}
	writeJSON(w, http.StatusOK, v)
}
