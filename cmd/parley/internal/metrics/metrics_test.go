package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

func TestScrape(t *testing.T) {
	m := New(Sources{
		Outbox: func() delivery.OutboxStats {
			return delivery.OutboxStats{
				Pending: 3, InFlight: 1,
				Ops:         map[core.AdapterName]map[core.OpKind]uint64{"telegram": {core.OpEdit: 7}},
				RateLimited: map[core.AdapterName]map[core.OpKind]uint64{"telegram": {core.OpSend: 2}},
				Failed:      map[core.AdapterName]uint64{"telegram": 1},
				Retries:     map[core.AdapterName]uint64{"telegram": 6},
				Backlog:     map[core.AdapterName]int{"telegram": 3},
				Outcomes:    map[core.AdapterName]map[string]uint64{"telegram": {delivery.OutcomeDone: 6, delivery.OutcomeRefused: 1}},
			}
		},
		Delivering:     func() int { return 9 },
		DeliveringBy:   func() map[core.AdapterName]int { return map[core.AdapterName]int{"telegram": 7, "slack": 2} },
		Agents:         func() int { return 2 },
		Cleanup:        func() (uint64, uint64) { return 5, 1 },
		SSEClients:     func() int { return 2 },
		MCPSubscribers: func() int { return 4 },
		Platforms: func() map[core.AdapterName]core.PlatformStatus {
			return map[core.AdapterName]core.PlatformStatus{"telegram": {State: core.PlatformUnreachable}, "slack": {Up: true}}
		},
		Instance: "host-42-0a1b2c3d",
		Leases: func() (map[string]bool, error) {
			return map[string]bool{"telegram/poll/1": true, "matrix/sync/@bot:x": false}, nil
		},
	})
	m.OutputShown("telegram", 300*time.Millisecond)
	m.Confirmed("telegram", 200*time.Microsecond)
	bus := core.NewMemBus(0)
	sub, cancel := bus.Subscribe(16, false)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx, sub); close(done) }()
	bus.Publish(core.Event{Seq: 1, Kind: core.EventHumanMessage, Origin: "telegram"})
	bus.Publish(core.Event{Seq: 2, Kind: core.EventAssistant, Origin: core.OriginMCP})
	stop()
	<-done
	cancel()

	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Body)
	for _, want := range []string{
		`parley_outbox_queue_depth 3`,
		`parley_outbox_in_flight 1`,
		`parley_platform_operations_total{adapter="telegram",method="edit"} 7`,
		`parley_platform_rate_limited_total{adapter="telegram",method="send"} 2`,
		`parley_platform_failures_total{adapter="telegram"} 1`,
		`parley_platform_retries_total{adapter="telegram"} 6`,
		`parley_delivery_pending 9`,
		`parley_delivery_pending_by_adapter{adapter="slack"} 2`,
		`parley_delivery_pending_by_adapter{adapter="telegram"} 7`,
		`parley_outbox_backlog{adapter="telegram"} 3`,
		`parley_operations_ended_total{adapter="telegram",outcome="done"} 6`,
		`parley_operations_ended_total{adapter="telegram",outcome="refused"} 1`,
		`parley_mcp_agents 2`,
		`parley_delivery_confirm_seconds_count{adapter="telegram"} 1`,
		`parley_cleanup_deletions_total 5`,
		`parley_cleanup_failures_total 1`,
		`parley_sse_clients 2`,
		`parley_mcp_subscribers 4`,
		`parley_platform_up{adapter="slack"} 1`,
		`parley_platform_up{adapter="telegram"} 0`,
		`parley_messages_total{direction="in",origin="telegram"} 1`,
		`parley_messages_total{direction="out",origin="mcp"} 1`,
		`parley_edit_lag_seconds_count{adapter="telegram"} 1`,
		`parley_instance_info{instance="host-42-0a1b2c3d"} 1`,
		`parley_lease_held{lease="telegram/poll/1"} 1`,
		`parley_lease_held{lease="matrix/sync/@bot:x"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
