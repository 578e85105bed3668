package delivery

import (
	"context"
	"errors"
	"fmt"

	"github.com/parley-chat/parley/core"
)

// Bindings: where a session lives on each adapter, created lazily through
// Binder adapters, one at a time per session and adapter, and made anew once
// when a send finds the thread gone. The binding also carries what the
// adapter shows of the session's title and status, and the adapter's own
// metadata.

// binding returns the session's binding on a, creating it through Binder
// when there is none yet. An op queued for another place (before the session
// was bound) gets a *MovedError, so the outbox paces it at its real place.
func (d *Dispatcher) binding(ctx context.Context, a core.Adapter, id core.SessionID, queuedAt core.Place) (core.Binding, error) {
	b, _, err := d.bindingOf(ctx, a, id, queuedAt)
	return b, err
}

// bindingOf is binding, also saying whether it made the binding (a
// platform call) just now.
func (d *Dispatcher) bindingOf(ctx context.Context, a core.Adapter, id core.SessionID, queuedAt core.Place) (b core.Binding, made bool, err error) {
	lock := d.bindLock(id, a.Name())
	lock.Lock()
	s, err := d.store.Session(ctx, id)
	if err == nil {
		var ok bool
		if b, ok = s.Bindings[a.Name()]; !ok {
			b, err = d.bindLocked(ctx, a, s)
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
func (d *Dispatcher) bindLocked(ctx context.Context, a core.Adapter, s core.Session) (core.Binding, error) {
	binder, ok := a.(core.Binder)
	if !ok {
		return core.Binding{}, core.Permanent(fmt.Errorf("dispatch: session %s has no binding on %s: %w", s.ID, a.Name(), core.ErrUnsupported))
	}
	nb, err := binder.Bind(ctx, s)
	if err != nil {
		return core.Binding{}, fmt.Errorf("dispatch: bind %s on %s: %w", s.ID, a.Name(), err)
	}
	b := core.Binding{Adapter: a.Name(), Place: nb.Place, Meta: nb.Meta, Shown: nb.Shown, Output: core.OutputState{Turn: s.Turn}}
	s, _, err = d.store.UpdateSession(ctx, s.ID, func(s *core.Session) error {
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
	d.setTyping(s, a, s.Status == core.StatusWorking)
	d.enqueueStatus(s, a)
	return b, nil
}

// sendAt sends m at the binding's place; when the platform says the thread
// is gone it binds the session anew and retries once.
func (d *Dispatcher) sendAt(ctx context.Context, a core.Adapter, id core.SessionID, b *core.Binding, m core.OutMessage) (core.MessageRef, error) {
	ref, err := a.Send(ctx, b.Place, m)
	if !errors.Is(err, core.ErrThreadGone) {
		return ref, err
	}
	d.log.Info("thread gone, binding anew", "adapter", a.Name(), "session", id)
	lock := d.bindLock(id, a.Name())
	lock.Lock()
	s, err := d.store.Session(ctx, id)
	if err == nil {
		if cur, ok := s.Bindings[a.Name()]; ok && cur.Place != b.Place {
			*b = cur // someone else rebound meanwhile
		} else {
			*b, err = d.bindLocked(ctx, a, s)
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
func (d *Dispatcher) enqueueStatus(s core.Session, a core.Adapter) {
	if _, ok := a.(core.StatusShower); !ok {
		return
	}
	key := "status\x00" + string(s.ID) + "\x00" + string(a.Name())
	d.outbox.Enqueue(core.Op{Kind: core.OpRename, Adapter: a.Name(), Place: queuePlace(s, a), Key: key,
		Run: func(ctx context.Context, _ core.Place) error { return d.showStatus(ctx, a, s.ID) }})
}

// showStatus shows the session's title and status, skipping the call when
// the platform already shows them.
func (d *Dispatcher) showStatus(ctx context.Context, a core.Adapter, id core.SessionID) error {
	s, err := d.store.Session(ctx, id)
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
	_, _, err = d.store.UpdateSession(ctx, id, func(s *core.Session) error {
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

// EnqueueDelete deletes ref through its owning adapter's outbox lane and
// reports the outcome to done: nil also when the message was already gone,
// and at once for an adapter that follows events (core put nothing on a
// platform there: the row predates the declaration); an error wrapping
// ErrUnsupported when the adapter cannot delete, a permanent error when
// the platform refused for good, and one wrapping ErrOutboxClosed when
// parley stopped first.
func (d *Dispatcher) EnqueueDelete(ref core.MessageRef, done func(error)) {
	a, ok := d.router.Adapter(ref.Adapter)
	if ok && followsEvents(a) {
		done(nil)
		return
	}
	del, can := a.(core.Deleter)
	if !ok || !can {
		done(fmt.Errorf("delete on %s: %w", ref.Adapter, core.ErrUnsupported))
		return
	}
	d.outbox.Enqueue(core.Op{Kind: core.OpDelete, Adapter: ref.Adapter, Place: ref.Place,
		Key: "del\x00" + string(ref.Adapter) + "\x00" + ref.Place.Chat + "\x00" + ref.Place.Thread + "\x00" + ref.ID,
		Run: func(ctx context.Context, _ core.Place) error {
			err := del.Delete(ctx, ref)
			if errors.Is(err, core.ErrMessageGone) {
				return nil
			}
			return err
		},
		Done: done})
}
