package follow

import (
	"context"
	"maps"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
)

// hub is the exchange of a few instances in one process.
type hub struct {
	mu        sync.Mutex
	listeners map[int]func(Announcement)
	next      int
	muted     map[string]bool // instances whose announcements are lost (dead)
}

func newHub() *hub { return &hub{listeners: map[int]func(Announcement){}, muted: map[string]bool{}} }

func (h *hub) Announce(_ context.Context, a Announcement) error {
	h.mu.Lock()
	if h.muted[a.Instance] {
		h.mu.Unlock()
		return nil
	}
	ls := make([]func(Announcement), 0, len(h.listeners))
	for _, l := range h.listeners {
		ls = append(ls, l)
	}
	h.mu.Unlock()
	for _, l := range ls {
		l(a)
	}
	return nil
}

func (h *hub) ListenPresence(ctx context.Context, ready func(), hear func(Announcement)) error {
	h.mu.Lock()
	id := h.next
	h.next++
	h.listeners[id] = hear
	h.mu.Unlock()
	ready()
	<-ctx.Done()
	h.mu.Lock()
	delete(h.listeners, id)
	h.mu.Unlock()
	return nil
}

func (h *hub) mute(instance string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.muted[instance] = true
}

// localPresence is an instance's MCP server as far as presence goes.
type localPresence struct {
	mu    sync.Mutex
	st    core.AgentStatus
	moved chan struct{}
}

func newLocal(st core.AgentStatus) *localPresence {
	return &localPresence{st: st, moved: make(chan struct{})}
}

func (l *localPresence) set(st core.AgentStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st = st
	close(l.moved)
	l.moved = make(chan struct{})
}

func (l *localPresence) AgentStatus() core.AgentStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return core.AgentStatus{Ready: l.st.Ready, All: l.st.All, Sessions: maps.Clone(l.st.Sessions)}
}

func (l *localPresence) PresenceChanged() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.moved
}

// runPresence runs an instance's Presence until the returned stop.
func runPresence(t *testing.T, h *hub, name string, local *localPresence) (*Presence, func()) {
	p := NewPresence(local, h, PresenceOptions{Instance: name})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return p, stop
}

func status(all int, sessions map[core.SessionID]int) core.AgentStatus {
	if sessions == nil {
		sessions = map[core.SessionID]int{}
	}
	return core.AgentStatus{Ready: true, All: all, Sessions: sessions}
}

func checkStatus(t *testing.T, who string, p *Presence, want core.AgentStatus) {
	t.Helper()
	if got := p.AgentStatus(); !sameStatus(got, want) {
		t.Errorf("%s: status %+v, want %+v", who, got, want)
	}
}

// Every instance's status is the sum of all instances' listeners; a new
// instance learns the others at once, a change is seen everywhere at once,
// a stopped instance is forgotten at once and a dead one after three
// heartbeats.
func TestPresenceIsTheSameEverywhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHub()
		la := newLocal(status(0, map[core.SessionID]int{"s1": 1}))
		lb := newLocal(status(0, map[core.SessionID]int{"s2": 2}))
		a, _ := runPresence(t, h, "a", la)
		b, stopB := runPresence(t, h, "b", lb)
		synctest.Wait()
		both := status(0, map[core.SessionID]int{"s1": 1, "s2": 2})
		checkStatus(t, "a", a, both)
		checkStatus(t, "b", b, both)

		time.Sleep(2 * time.Second)
		c, _ := runPresence(t, h, "c", newLocal(status(1, nil)))
		synctest.Wait()
		all := status(1, map[core.SessionID]int{"s1": 1, "s2": 2})
		for name, p := range map[string]*Presence{"a": a, "b": b, "c": c} {
			checkStatus(t, name, p, all)
		}

		changed := a.PresenceChanged()
		lb.set(status(0, nil)) // b's agent went
		synctest.Wait()
		select {
		case <-changed:
		default:
			t.Error("a was not told that b's agent went")
		}
		checkStatus(t, "a", a, status(1, map[core.SessionID]int{"s1": 1}))
		checkStatus(t, "c", c, status(1, map[core.SessionID]int{"s1": 1}))

		stopB() // a clean stop says so
		synctest.Wait()
		checkStatus(t, "a", a, status(1, map[core.SessionID]int{"s1": 1}))

		// c dies: nothing more comes from it. Its last announcement was
		// its heartbeat at 5 s after it started (7 s); a forgets it at
		// its first heartbeat 15 s or more after that.
		time.Sleep(6 * time.Second) // 8 s: past c's beat at 7 s
		h.mute("c")
		time.Sleep(14 * time.Second) // 22 s: 15 s after c's last beat, a's beat is at 25 s
		synctest.Wait()
		checkStatus(t, "a", a, status(1, map[core.SessionID]int{"s1": 1}))
		time.Sleep(3 * time.Second) // 25 s
		synctest.Wait()
		checkStatus(t, "a", a, status(0, map[core.SessionID]int{"s1": 1}))
	})
}

// An instance whose chat server is not ready counts nobody, its own
// listeners included; the others still count theirs.
func TestPresenceNotReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHub()
		la := newLocal(core.AgentStatus{Sessions: map[core.SessionID]int{}})
		a, _ := runPresence(t, h, "a", la)
		_, _ = runPresence(t, h, "b", newLocal(status(2, nil)))
		synctest.Wait()
		checkStatus(t, "a", a, core.AgentStatus{Ready: false, All: 2, Sessions: map[core.SessionID]int{}})
		la.set(core.AgentStatus{Ready: true, All: 1, Sessions: map[core.SessionID]int{}})
		synctest.Wait()
		checkStatus(t, "a", a, status(3, nil))
	})
}

// PresenceChanged costs one goroutine however many ask: every caller
// until a change shares its channel, and all are told of the change. When
// the presence stops, the waiting ends: nothing is left blocked.
func TestPresenceChangedShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHub()
		la := newLocal(status(1, nil))
		a, stop := runPresence(t, h, "a", la)
		synctest.Wait()
		before := runtime.NumGoroutine()
		chans := make([]<-chan struct{}, 1000)
		for i := range chans {
			chans[i] = a.PresenceChanged()
		}
		if n := runtime.NumGoroutine() - before; n > 1 {
			t.Errorf("%d goroutines for 1000 calls", n)
		}
		la.set(status(2, nil))
		synctest.Wait()
		for i, ch := range chans {
			select {
			case <-ch:
			default:
				t.Fatalf("caller %d was not told of the change", i)
			}
		}
		// After the change, a new wait: told of the next one only.
		next := a.PresenceChanged()
		select {
		case <-next:
			t.Fatal("told of a change before it happened")
		default:
		}
		_, _ = runPresence(t, h, "b", newLocal(status(1, nil)))
		synctest.Wait()
		select {
		case <-next:
		default:
			t.Fatal("not told of another instance's change")
		}

		// A wait pending when the presence stops ends; one begun after
		// starts no goroutine. (The bubble fails the test if one is left
		// blocked.)
		waiting := a.PresenceChanged()
		stop()
		synctest.Wait()
		select {
		case <-waiting:
		default:
			t.Fatal("the wait did not end with the presence")
		}
		a.PresenceChanged()
	})
}
