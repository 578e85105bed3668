package web

import (
	"container/list"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
)

// backend is what the adapter is attached to: the store, the bus, and the
// session states fed from a reliable bus subscription.
type backend struct {
	store  core.Store
	bus    core.Bus
	states *states
	// done is closed when the backend is detached; SSE streams end.
	done   chan struct{}
	cancel func()
	wg     sync.WaitGroup
}

// subBuffer is the reliable subscription's buffer. Reducing an event is
// cheap, so the feed keeps up; the buffer absorbs bursts.
const subBuffer = 4096

func newBackend(store core.Store, bus core.Bus, maxStates int, log *slog.Logger) *backend {
	b := &backend{store: store, bus: bus, states: newStates(store, maxStates, log), done: make(chan struct{})}
	sub, unsubscribe := bus.Subscribe(subBuffer, false)
	// Events stored before the subscription may never come on it: count
	// them as fed (no reducer exists yet to miss them; builds read the
	// store), so nobody waits for them.
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	if last, err := store.LastEventSeq(ctx); err == nil {
		b.states.applied = last
	} else {
		log.Warn("read the event log's end", "err", err)
	}
	stop()
	ctx, stop = context.WithCancel(context.Background())
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		core.Consume(ctx, sub, func(_ context.Context, e core.Event) { b.states.apply(e) })
	}()
	b.cancel = func() {
		unsubscribe() // first: releases a Publish blocked on a full buffer
		stop()
	}
	return b
}

func (b *backend) stop() {
	b.cancel()
	b.wg.Wait()
	close(b.done)
	b.states.close()
}

// The recent UiUpdates kept for SSE messages (by seq) are bounded in number
// and in size: an update carries whole items, and a long streamed output
// repeats its text in every one.
const (
	uiLogSize  = 8192
	uiLogBytes = 32 << 20
)

// states holds one UiReducer per recently used session, fed by every event
// of the bus, and the UiUpdates they produced for the most recent events.
//
// A session's reducer is built on first use (see build.go). While it is
// being built, the session's live events are queued on its entry and
// applied once the build is done; the reducer ignores those the build
// already covered (by Seq), so the state misses none and doubles none.
type states struct {
	store core.Store
	log   *slog.Logger
	max   int

	mu      sync.Mutex
	entries map[core.SessionID]*entry
	lru     list.List // of *entry, most recently used first
	uis     map[uint64]uiRecord
	uiQueue []uint64 // seqs in uis, oldest first, from uiHead on
	uiHead  int
	uiBytes int
	applied uint64        // highest Seq fed so far
	moved   chan struct{} // closed (and replaced) when applied grows
	closed  bool
}

type uiRecord struct {
	u    uistate.UIUpdate
	size int
}

type entry struct {
	id   core.SessionID
	elem *list.Element
	red  *uistate.UIReducer // nil while building
	// pending are live events that arrived while building.
	pending []core.Event
	ready   chan struct{} // closed when the build finished, well or not
}

func newStates(store core.Store, max int, log *slog.Logger) *states {
	return &states{store: store, log: log, max: max, entries: map[core.SessionID]*entry{},
		uis: map[uint64]uiRecord{}, moved: make(chan struct{})}
}

// apply feeds one bus event. Events that are not logged (Seq 0) are not
// applied: a state rebuilt from the log would not have them.
func (s *states) apply(e core.Event) {
	if e.Seq == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Kind == core.EventResync {
		s.dropAllLocked()
	} else if en := s.entries[e.Session]; en != nil {
		if en.red == nil {
			en.pending = append(en.pending, e)
		} else {
			s.record(e.Seq, en.red.Apply(e))
		}
	}
	if e.Seq > s.applied {
		s.applied = e.Seq
		close(s.moved)
		s.moved = make(chan struct{})
	}
}

// dropAllLocked forgets every session's state after an EventResync: the
// events it missed will not come, so each state is built again from the
// store at its next use. A build under way may have read the store before
// them: it is finished for its caller but not kept. The caller holds mu.
func (s *states) dropAllLocked() {
	for id, en := range s.entries {
		s.lru.Remove(en.elem)
		delete(s.entries, id)
	}
}

// record keeps u as the update of event seq, dropping the oldest past the
// bounds; the caller holds mu.
func (s *states) record(seq uint64, u uistate.UIUpdate) {
	size := 256
	for _, it := range u.Items {
		size += 256 + len(it.Content)
	}
	if old, ok := s.uis[seq]; ok {
		s.uiBytes -= old.size
	} else {
		s.uiQueue = append(s.uiQueue, seq)
	}
	s.uis[seq] = uiRecord{u: u, size: size}
	s.uiBytes += size
	for len(s.uis) > 1 && (len(s.uis) > uiLogSize || s.uiBytes > uiLogBytes) {
		old := s.uiQueue[s.uiHead]
		s.uiHead++
		s.uiBytes -= s.uis[old].size
		delete(s.uis, old)
	}
	if s.uiHead > len(s.uiQueue)/2 && s.uiHead > 1024 {
		s.uiQueue = append([]uint64(nil), s.uiQueue[s.uiHead:]...)
		s.uiHead = 0
	}
}

// update returns the UiUpdate event seq produced, if its session's reducer
// was in memory when it arrived and the update is still kept.
func (s *states) update(seq uint64) (uistate.UIUpdate, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.uis[seq]
	return r.u, ok
}

// waitApplied waits until every event up to seq was fed (the bus delivers
// an event to subscribers after the store has it, so a reader of the store
// may be ahead of the feed), or ctx ends, or timeout passes.
func (s *states) waitApplied(ctx context.Context, seq uint64, timeout time.Duration) {
	var deadline <-chan time.Time
	for {
		s.mu.Lock()
		moved, done := s.moved, s.applied >= seq || s.closed
		s.mu.Unlock()
		if done {
			return
		}
		if deadline == nil {
			t := time.NewTimer(timeout)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-moved:
		case <-deadline:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (s *states) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	close(s.moved)
	s.moved = make(chan struct{})
}

// get returns the session's current state, building its reducer if it is
// not in memory. Errors wrap core.ErrNotFound for an unknown session.
func (s *states) get(ctx context.Context, id core.SessionID) (uistate.UIState, error) {
	for {
		s.mu.Lock()
		en := s.entries[id]
		if en != nil && en.red != nil {
			s.lru.MoveToFront(en.elem)
			st := en.red.State()
			s.mu.Unlock()
			return st, nil
		}
		if en != nil {
			// Someone else is building it: wait and look again.
			s.mu.Unlock()
			select {
			case <-en.ready:
				continue
			case <-ctx.Done():
				return uistate.UIState{}, ctx.Err()
			}
		}
		en = &entry{id: id, ready: make(chan struct{})}
		en.elem = s.lru.PushFront(en)
		s.entries[id] = en
		s.mu.Unlock()
		st, err := build(ctx, s.store, id)
		return s.finish(en, st, err)
	}
}

// finish installs a built state, applies the events queued meanwhile and
// evicts the least recently used reducers past the limit.
func (s *states) finish(en *entry, st uistate.UIState, err error) (uistate.UIState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer close(en.ready)
	if err != nil {
		s.lru.Remove(en.elem)
		if s.entries[en.id] == en { // not dropped and built again meanwhile
			delete(s.entries, en.id)
		}
		return uistate.UIState{}, err
	}
	en.red = uistate.NewUIReducer(st)
	for _, e := range en.pending {
		s.record(e.Seq, en.red.Apply(e))
	}
	en.pending = nil
	for el := s.lru.Back(); s.lru.Len() > s.max && el != nil; {
		prev := el.Prev()
		if old := el.Value.(*entry); old != en && old.red != nil {
			s.lru.Remove(el)
			delete(s.entries, old.id)
		}
		el = prev
	}
	return en.red.State(), nil
}
