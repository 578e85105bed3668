package web_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// fakePresence is a core.Presence the test changes by hand.
type fakePresence struct {
	mu    sync.Mutex
	st    core.AgentStatus
	moved chan struct{}
}

func newFakePresence() *fakePresence {
	return &fakePresence{st: core.AgentStatus{Ready: true, Sessions: map[core.SessionID]int{}}, moved: make(chan struct{})}
}

func (p *fakePresence) AgentStatus() core.AgentStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

func (p *fakePresence) PresenceChanged() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.moved
}

func (p *fakePresence) listen(id core.SessionID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.st.Sessions = map[core.SessionID]int{id: 1}
	close(p.moved)
	p.moved = make(chan struct{})
}

type agentsJSON struct {
	Kind     string                 `json:"kind"`
	Ready    bool                   `json:"ready"`
	All      int                    `json:"all_sessions"`
	Sessions map[core.SessionID]int `json:"sessions"`
}

// Presence reaches the page: GET /api/agents, and an "agents" message on
// the event stream when it starts and when an agent starts listening.
func TestPresenceOnStream(t *testing.T) {
	s := newStack(t)
	id := s.newSession("presence")
	p := newFakePresence()
	s.web.SetPresence(p)

	if v := must[agentsJSON](t, http.StatusOK)(s.get("/api/agents")); v.Kind != "agents" || !v.Ready || v.All != 0 || len(v.Sessions) != 0 {
		t.Fatalf("GET /api/agents with nobody listening: %+v", v)
	}
	c := s.sse("?session="+string(id), "")
	first := readAgents(t, c)
	if !first.Ready || first.Sessions[id] != 0 {
		t.Fatalf("first agents message: %+v", first)
	}
	p.listen(id)
	if next := readAgents(t, c); next.Sessions[id] != 1 {
		t.Fatalf("after an agent subscribed: %+v", next)
	}
	if v := must[agentsJSON](t, http.StatusOK)(s.get("/api/agents")); v.Sessions[id] != 1 {
		t.Fatalf("GET /api/agents with an agent on the session: %+v", v)
	}
}

func readAgents(t *testing.T, c *sseClient) agentsJSON {
	t.Helper()
	select {
	case f := <-c.agents:
		var v agentsJSON
		if f.ID != "" {
			t.Fatalf("an agents message has an id (%s): it would move Last-Event-ID", f.ID)
		}
		if err := json.Unmarshal([]byte(f.Data), &v); err != nil {
			t.Fatal(err)
		}
		return v
	case <-c.done:
		t.Fatal("the stream ended")
	case <-time.After(wait):
		t.Fatal("no agents message")
	}
	return agentsJSON{}
}
