package delivery

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"

	"github.com/parley-chat/parley/core"
)

// Bindings: where a session lives on each adapter, created lazily through
// Binder adapters, one at a time per session and adapter, and made anew once
// when a send finds the thread gone. The binding also carries what the
// adapter shows of the session's title and status, and the adapter's own
// metadata.

// bindings creates and looks up bindings for the Dispatcher and shows
// their status; its locks serialise binding creation per session and
// adapter (striped, so memory does not grow with the number of sessions).
type bindings struct {
	store  core.Store
	outbox *Outbox
	typing *typing
	log    *slog.Logger
	locks  [64]sync.Mutex
}

// lock is the bind lock of session id on adapter name.
func (bs *bindings) lock(id core.SessionID, name core.AdapterName) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return &bs.locks[h.Sum32()%uint32(len(bs.locks))]
}

// get returns the session's binding on a, creating it through Binder
// when there is none yet. An op queued for another place (before the session
// was bound) gets a *MovedError, so the outbox paces it at its real place.
func (bs *bindings) get(ctx context.Context, a core.Adapter, id core.SessionID, queuedAt core.Place) (core.Binding, error) {
	b, _, err := bs.of(ctx, a, id, queuedAt)
	return b, err
}

// of is get, also saying whether it made the binding (a
// platform call) just now.
func (bs *bindings) of(ctx context.Context, a core.Adapter, id core.SessionID, queuedAt core.Place) (b core.Binding, made bool, err error) {
	lock := bs.lock(id, a.Name())
	lock.Lock()
	s, err := bs.store.Session(ctx, id)
	if err == nil {
		var ok bool
		if b, ok = s.Bindings[a.Name()]; !ok {
			b, err = bs.bindLocked(ctx, a, s)
			made = err == nil
		}
	}
	lock.Unlock()
	if err == nil && queuedAt != b.Place {
		return core.Binding{}, made, &MovedError{Place: b.Place}
	}
	return b, made, err
}

// bindLocked creates a new binding (replacing a stale one); the caller
// holds the session's bind lock.
func (bs *bindings) bindLocked(ctx context.Context, a core.Adapter, s core.Session) (core.Binding, error) {
	binder, ok := a.(core.Binder)
	if !ok {
		return core.Binding{}, core.Permanent(fmt.Errorf("dispatch: session %s has no binding on %s: %w", s.ID, a.Name(), core.ErrUnsupported))
	}
	nb, err := binder.Bind(ctx, s)
	if err != nil {
		return core.Binding{}, fmt.Errorf("dispatch: bind %s on %s: %w", s.ID, a.Name(), err)
	}
	b := core.Binding{Adapter: a.Name(), Place: nb.Place, Meta: nb.Meta, Shown: nb.Shown, Output: core.OutputState{Turn: s.Turn}}
	s, _, err = bs.store.UpdateSession(ctx, s.ID, func(s *core.Session) error {
		if s.Bindings == nil {
			s.Bindings = map[core.AdapterName]core.Binding{}
		}
		s.Bindings[a.Name()] = b
		return nil
	})
	if err != nil {
		return b, err
	}
	// Status changes published before the binding existed did not reach
	// this adapter: show the current status and, while the agent works,
	// the typing indicator.
	bs.typing.set(s, a, s.Status == core.StatusWorking)
	bs.enqueueStatus(s, a)
	return b, nil
}

// sendAt sends m at the binding's place; when the platform says the thread
// is gone it binds the session anew and retries once.
func (bs *bindings) sendAt(ctx context.Context, a core.Adapter, id core.SessionID, b *core.Binding, m core.OutMessage) (core.MessageRef, error) {
	ref, err := a.Send(ctx, b.Place, m)
	if !errors.Is(err, core.ErrThreadGone) {
		return ref, err
	}
	bs.log.Info("thread gone, binding anew", "adapter", a.Name(), "session", id)
	lock := bs.lock(id, a.Name())
	lock.Lock()
	s, err := bs.store.Session(ctx, id)
	if err == nil {
		if cur, ok := s.Bindings[a.Name()]; ok && cur.Place != b.Place {
			*b = cur // someone else rebound meanwhile
		} else {
			*b, err = bs.bindLocked(ctx, a, s)
		}
	}
	lock.Unlock()
	if err != nil {
		return core.MessageRef{}, err
	}
	return a.Send(ctx, b.Place, m)
}

// enqueueStatus queues showing s's title and status on a StatusShower. The
// op reads the session when it runs, so a burst of changes coalesces into
// one call showing the newest state.
func (bs *bindings) enqueueStatus(s core.Session, a core.Adapter) {
	if _, ok := a.(core.StatusShower); !ok {
		return
	}
	key := "status\x00" + string(s.ID) + "\x00" + string(a.Name())
	bs.outbox.Enqueue(core.Op{Kind: core.OpRename, Adapter: a.Name(), Place: queuePlace(s, a), Key: key,
		Run: func(ctx context.Context, _ core.Place) error { return bs.showStatus(ctx, a, s.ID) }})
}

// showStatus shows the session's title and status, skipping the call when
// the platform already shows them.
func (bs *bindings) showStatus(ctx context.Context, a core.Adapter, id core.SessionID) error {
	s, err := bs.store.Session(ctx, id)
	if err != nil {
		return err
	}
	b, ok := s.Bindings[a.Name()]
	if !ok {
		return core.ErrNoCall
	}
	v := core.StatusView{Title: s.Title, Status: s.Status}
	if b.Shown == v {
		return core.ErrNoCall
	}
	meta, err := a.(core.StatusShower).ShowStatus(ctx, b, v)
	if err != nil {
		return err
	}
	_, _, err = bs.store.UpdateSession(ctx, id, func(s *core.Session) error {
		if b, ok := s.Bindings[a.Name()]; ok {
			b.Shown = v
			if meta != nil {
				b.Meta = meta
			}
			s.Bindings[a.Name()] = b
		}
		return nil
	})
	return err
}
