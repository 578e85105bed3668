package follow

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
)

// Presence across instances. Which sessions have an agent listening is
// known only where the agent's MCP connection is (its subscriptions live
// in that instance's MCP server), so every instance announces its own
// core.AgentStatus to the others, at each change and every heartbeat, and
// the status from any instance is the sum of the statuses of all the
// instances heard from within the TTL (three heartbeats): an instance that
// dies is forgotten by then, one that stops says so at once. An instance
// heard from for the first time is answered with an announcement, so a new
// instance knows the others within a round trip rather than a heartbeat.
// Presence is about who can hear now, so it is carried by notifications
// only and never stored.

// Announcement is one instance's agent status, as it sent it.
type Announcement struct {
	Instance string           `json:"instance"`
	Status   core.AgentStatus `json:"status"`
	// Gone says that the instance stops: forget it.
	Gone bool `json:"gone,omitempty"`
}

// Exchange carries announcements between the instances sharing a store.
// store/postgres implements it with NOTIFY; on store/bolt there is no other
// instance, and announcing goes nowhere.
type Exchange interface {
	// Announce sends a to every instance listening (this one included).
	Announce(ctx context.Context, a Announcement) error
	// ListenPresence calls hear with each announcement, until ctx ends
	// (then it returns nil) or it stops hearing (the error). Once it
	// listens it calls ready. hear and ready do not block.
	ListenPresence(ctx context.Context, ready func(), hear func(Announcement)) error
}

// Defaults of PresenceOptions.
const DefaultHeartbeat = 5 * time.Second

// PresenceOptions configure a Presence.
type PresenceOptions struct {
	// Instance names this instance in its announcements; it must differ
	// between instances (the daemon's instance id).
	Instance string
	// Heartbeat is how often the status is announced when it does not
	// change; zero means DefaultHeartbeat. Others forget an instance not
	// heard from for three of them.
	Heartbeat time.Duration
	Logger    *slog.Logger
}

// Presence is the core.Presence of every instance together, built from the
// local one (the MCP server) and the others' announcements. See above.
type Presence struct {
	local core.Presence
	ex    Exchange
	opts  PresenceOptions

	mu     sync.Mutex
	others map[string]heard
	moved  chan struct{} // closed at the next change of others; nil until asked
	// changed is what PresenceChanged returns until the next change here
	// or of others; nil until asked.
	changed chan struct{}
	kick    chan struct{} // capacity 1: announce now
	// done is closed when Run returns: no change is told after it.
	done     chan struct{}
	stopOnce sync.Once
}

type heard struct {
	status core.AgentStatus
	at     time.Time
}

var _ core.Presence = (*Presence)(nil)

// NewPresence returns the presence of all instances around local.
func NewPresence(local core.Presence, ex Exchange, opts PresenceOptions) *Presence {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Presence{local: local, ex: ex, opts: opts, others: map[string]heard{}, kick: make(chan struct{}, 1),
		done: make(chan struct{})}
}

// AgentStatus implements core.Presence: Ready when this instance's chat
// server is, and the listeners of every instance that is ready.
func (p *Presence) AgentStatus() core.AgentStatus {
	st := p.local.AgentStatus()
	out := core.AgentStatus{Ready: st.Ready, Sessions: map[core.SessionID]int{}}
	add := func(s core.AgentStatus) {
		if !s.Ready {
			return
		}
		out.All += s.All
		for id, n := range s.Sessions {
			out.Sessions[id] += n
		}
	}
	add(st)
	p.mu.Lock()
	for _, h := range p.others {
		add(h.status)
	}
	p.mu.Unlock()
	return out
}

// PresenceChanged implements core.Presence: the channel is closed at the
// next change here or at another instance, or when Run returns; after
// that, it is never closed. Every caller until that change gets the same
// channel, and one goroutine waits for the change: a goroutine for each
// caller would outlive it (every /api/events stream asks, and goes) until
// the next change, which may be days away, and then the daemon.
func (p *Presence) PresenceChanged() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.changed != nil {
		return p.changed
	}
	out := make(chan struct{})
	select {
	case <-p.done:
		return out
	default:
	}
	if p.moved == nil {
		p.moved = make(chan struct{})
	}
	local, moved := p.local.PresenceChanged(), p.moved
	p.changed = out
	go func() {
		select {
		case <-local:
		case <-moved:
		case <-p.done:
		}
		p.mu.Lock()
		if p.changed == out {
			p.changed = nil
		}
		p.mu.Unlock()
		close(out)
	}()
	return out
}

func (p *Presence) changedLocked() {
	if p.moved != nil {
		close(p.moved)
		p.moved = nil
	}
}

func (p *Presence) announceSoon() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// hear records another instance's announcement.
func (p *Presence) hear(a Announcement) {
	if a.Instance == p.opts.Instance {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old, known := p.others[a.Instance]
	if a.Gone {
		delete(p.others, a.Instance)
	} else {
		p.others[a.Instance] = heard{status: a.Status, at: time.Now()}
	}
	if !known && !a.Gone {
		p.announceSoon() // a newcomer: tell it about us
	}
	if known == a.Gone || !sameStatus(old.status, a.Status) {
		p.changedLocked()
	}
}

// expire forgets the instances not heard from within the TTL.
func (p *Presence) expire() {
	ttl := 3 * p.opts.Heartbeat
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, h := range p.others {
		if time.Since(h.at) >= ttl {
			delete(p.others, id)
			p.opts.Logger.Info("an instance's agents are no longer heard of", "instance", id)
			p.changedLocked()
		}
	}
}

func sameStatus(a, b core.AgentStatus) bool {
	return a.Ready == b.Ready && a.All == b.All && maps.Equal(a.Sessions, b.Sessions)
}

// Run announces this instance's status at each change and every
// heartbeat, hears the others' and forgets the silent, until ctx ends; then
// it announces that this instance no longer listens. It returns nil. It is
// run once: once it has returned, PresenceChanged tells no more changes.
func (p *Presence) Run(ctx context.Context) error {
	defer p.stopOnce.Do(func() { close(p.done) })
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { p.listen(ctx) })
	beat := time.NewTicker(p.opts.Heartbeat)
	defer beat.Stop()
	// The first announcement waits for the listener (its ready kicks):
	// the others answer a newcomer once, and it must hear them.
	changed := p.local.PresenceChanged()
	for {
		select {
		case <-ctx.Done():
			stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.Heartbeat)
			if err := p.ex.Announce(stop, Announcement{Instance: p.opts.Instance, Gone: true}); err != nil {
				p.opts.Logger.Warn("cannot tell other instances that this one stops", "err", err)
			}
			cancel()
			return nil
		case <-changed:
		case <-p.kick:
		case <-beat.C:
		}
		changed = p.local.PresenceChanged() // before the status: no change is missed
		p.announce(ctx, p.local.AgentStatus())
		p.expire()
	}
}

func (p *Presence) announce(ctx context.Context, st core.AgentStatus) {
	if err := p.ex.Announce(ctx, Announcement{Instance: p.opts.Instance, Status: st}); err != nil && ctx.Err() == nil {
		p.opts.Logger.Warn("cannot tell other instances which agents listen here", "err", err)
	}
}

// listen keeps hearing announcements, listening again after a failure as
// the Follower does, until ctx ends.
func (p *Presence) listen(ctx context.Context) {
	wait := minRelisten
	for {
		start := time.Now()
		err := p.ex.ListenPresence(ctx, p.announceSoon, p.hear)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > maxRelisten {
			wait = minRelisten
		}
		p.opts.Logger.Warn("not hearing which agents listen at other instances", "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, maxRelisten)
	}
}
