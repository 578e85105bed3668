// Package metrics exposes parley's Prometheus metrics at /metrics.
//
// Counters that happen in the flow (messages in and out, edit lag) are
// recorded as they happen: messages from the bus, edit lag from the
// dispatcher's hook. Numbers that components already keep (the outbox's
// queue and per-adapter operation counts, the cleanup ledger's deletions,
// SSE clients and MCP subscribers) are read at scrape time through small
// functions, so no component depends on Prometheus.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Sources are the numbers read at scrape time. Nil functions are skipped.
type Sources struct {
	Outbox func() delivery.OutboxStats
	// Delivering is the number of journaled events not yet confirmed by
	// every platform they go to.
	Delivering func() int
	// DeliveringBy is Delivering by the adapter still owing an operation.
	DeliveringBy   func() map[core.AdapterName]int
	Agents         func() int
	Cleanup        func() (deleted, failed uint64)
	SSEClients     func() int
	MCPSubscribers func() int
	// Platforms is the daemon's status of each platform.
	Platforms func() map[core.AdapterName]core.PlatformStatus
	// Instance is this instance's id among those sharing the store.
	Instance string
	// Leases says, for every lease the store knows, whether this
	// instance holds it.
	Leases func() (map[string]bool, error)
}

// Metrics is parley's registry.
type Metrics struct {
	reg      *prometheus.Registry
	messages *prometheus.CounterVec
	editLag  *prometheus.HistogramVec
	confirm  *prometheus.HistogramVec
}

// New returns the registry with the Go runtime and process collectors.
func New(src Sources) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_messages_total",
			Help: "Inbox messages by direction (in: people, out: agents) and origin.",
		}, []string{"direction", "origin"}),
		editLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "parley_edit_lag_seconds",
			Help:    "Time from an agent's output update to a platform showing it.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2, 3, 5, 10, 30, 60},
		}, []string{"adapter"}),
		confirm: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "parley_delivery_confirm_seconds",
			Help:    "Time from a platform accepting a journaled send to its durable confirmation: the window in which a crash would repeat it.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"adapter"}),
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.messages, m.editLag, m.confirm, &sourceCollector{src: src})
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// OutputShown records an edit lag; it fits delivery.DispatcherOptions.OnOutputShown.
func (m *Metrics) OutputShown(adapter core.AdapterName, lag time.Duration) {
	m.editLag.WithLabelValues(string(adapter)).Observe(lag.Seconds())
}

// Confirmed records a confirmation window; it fits
// delivery.DispatcherOptions.OnConfirmed.
func (m *Metrics) Confirmed(adapter core.AdapterName, window time.Duration) {
	m.confirm.WithLabelValues(string(adapter)).Observe(window.Seconds())
}

// Run counts inbox messages from a bus subscription until ctx ends.
func (m *Metrics) Run(ctx context.Context, sub *core.Subscription) {
	core.Consume(ctx, sub, func(_ context.Context, e core.Event) {
		origin := string(e.Origin)
		if origin == "" {
			origin = "none"
		}
		switch e.Kind {
		case core.EventHumanMessage, core.EventAnswer, core.EventCancel:
			m.messages.WithLabelValues("in", origin).Inc()
		case core.EventAssistant, core.EventQuestion:
			m.messages.WithLabelValues("out", origin).Inc()
		}
	})
}

var (
	descQueue     = prometheus.NewDesc("parley_outbox_queue_depth", "Platform operations waiting in the outbox.", nil, nil)
	descInFlight  = prometheus.NewDesc("parley_outbox_in_flight", "Platform operations being performed.", nil, nil)
	descOps       = prometheus.NewDesc("parley_platform_operations_total", "Platform operations performed, by adapter and method.", []string{"adapter", "method"}, nil)
	descLimited   = prometheus.NewDesc("parley_platform_rate_limited_total", "Platform answers of 429 (rate limited), by adapter and method.", []string{"adapter", "method"}, nil)
	descFailed    = prometheus.NewDesc("parley_platform_failures_total", "Platform operations refused for good (never retried), by adapter.", []string{"adapter"}, nil)
	descRetries   = prometheus.NewDesc("parley_platform_retries_total", "Transient platform failures (5xx, resets, timeouts) retried, by adapter.", []string{"adapter"}, nil)
	descJournal   = prometheus.NewDesc("parley_delivery_pending", "Journaled messages not yet confirmed by every platform they go to.", nil, nil)
	descDeleted   = prometheus.NewDesc("parley_cleanup_deletions_total", "Messages deleted by the cleanup ledger.", nil, nil)
	descDelFailed = prometheus.NewDesc("parley_cleanup_failures_total", "Cleanup deletions that failed (kept for replay).", nil, nil)
	descSSE       = prometheus.NewDesc("parley_sse_clients", "Connected /api/events clients.", nil, nil)
	descMCP       = prometheus.NewDesc("parley_mcp_subscribers", "Active MCP inbox subscriptions.", nil, nil)
	descAgents    = prometheus.NewDesc("parley_mcp_agents", "Agents connected over MCP (initialized sessions and open listen streams).", nil, nil)
	descOutcomes  = prometheus.NewDesc("parley_operations_ended_total", "Platform operations ended, by adapter and outcome (done, refused, superseded, expired, dropped, closed).", []string{"adapter", "outcome"}, nil)
	descBacklog   = prometheus.NewDesc("parley_outbox_backlog", "Platform operations waiting in the outbox, by adapter.", []string{"adapter"}, nil)
	descJournalBy = prometheus.NewDesc("parley_delivery_pending_by_adapter", "Journaled messages with an operation of the adapter not yet confirmed.", []string{"adapter"}, nil)
	descUp        = prometheus.NewDesc("parley_platform_up", "1 while the platform's adapter runs, 0 while it is down and being retried (see /api/health for why).", []string{"adapter"}, nil)
	descInstance  = prometheus.NewDesc("parley_instance_info", "Always 1; its label is this instance's id among those sharing the store.", []string{"instance"}, nil)
	descLease     = prometheus.NewDesc("parley_lease_held", "1 while this instance holds the lease (a single consumer such as a Telegram poller), 0 while another does or none.", []string{"lease"}, nil)
)

// sourceCollector reads Sources at scrape time.
type sourceCollector struct{ src Sources }

func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueue, descInFlight, descOps, descLimited, descFailed, descRetries, descJournal,
		descDeleted, descDelFailed, descSSE, descMCP, descAgents, descOutcomes, descBacklog, descJournalBy, descUp, descInstance, descLease} {
		ch <- d
	}
}

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	if c.src.Outbox != nil {
		st := c.src.Outbox()
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(st.Pending))
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(st.InFlight))
		for a, kinds := range st.Ops {
			for k, n := range kinds {
				ch <- prometheus.MustNewConstMetric(descOps, prometheus.CounterValue, float64(n), string(a), k.String())
			}
		}
		for a, kinds := range st.RateLimited {
			for k, n := range kinds {
				ch <- prometheus.MustNewConstMetric(descLimited, prometheus.CounterValue, float64(n), string(a), k.String())
			}
		}
		for a, n := range st.Failed {
			ch <- prometheus.MustNewConstMetric(descFailed, prometheus.CounterValue, float64(n), string(a))
		}
		for a, n := range st.Retries {
			ch <- prometheus.MustNewConstMetric(descRetries, prometheus.CounterValue, float64(n), string(a))
		}
		for a, n := range st.Backlog {
			ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(n), string(a))
		}
		for a, outcomes := range st.Outcomes {
			for o, n := range outcomes {
				ch <- prometheus.MustNewConstMetric(descOutcomes, prometheus.CounterValue, float64(n), string(a), o)
			}
		}
	}
	if c.src.Delivering != nil {
		ch <- prometheus.MustNewConstMetric(descJournal, prometheus.GaugeValue, float64(c.src.Delivering()))
	}
	if c.src.DeliveringBy != nil {
		for a, n := range c.src.DeliveringBy() {
			ch <- prometheus.MustNewConstMetric(descJournalBy, prometheus.GaugeValue, float64(n), string(a))
		}
	}
	if c.src.Agents != nil {
		ch <- prometheus.MustNewConstMetric(descAgents, prometheus.GaugeValue, float64(c.src.Agents()))
	}
	if c.src.Cleanup != nil {
		del, failed := c.src.Cleanup()
		ch <- prometheus.MustNewConstMetric(descDeleted, prometheus.CounterValue, float64(del))
		ch <- prometheus.MustNewConstMetric(descDelFailed, prometheus.CounterValue, float64(failed))
	}
	if c.src.SSEClients != nil {
		ch <- prometheus.MustNewConstMetric(descSSE, prometheus.GaugeValue, float64(c.src.SSEClients()))
	}
	if c.src.MCPSubscribers != nil {
		ch <- prometheus.MustNewConstMetric(descMCP, prometheus.GaugeValue, float64(c.src.MCPSubscribers()))
	}
	if c.src.Instance != "" {
		ch <- prometheus.MustNewConstMetric(descInstance, prometheus.GaugeValue, 1, c.src.Instance)
	}
	if c.src.Leases != nil {
		// A store that does not answer leaves the gauges out rather than
		// reporting every lease lost.
		if held, err := c.src.Leases(); err == nil {
			for name, mine := range held {
				v := 0.0
				if mine {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(descLease, prometheus.GaugeValue, v, name)
			}
		}
	}
	if c.src.Platforms != nil {
		for a, s := range c.src.Platforms() {
			up := 0.0
			if s.Up {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up, string(a))
		}
	}
}
