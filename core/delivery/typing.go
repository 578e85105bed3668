package delivery

import (
	"context"
	"time"

	"github.com/parley-chat/parley/core"
)

// typingEvery is how often the typing indicator is renewed (Telegram's
// lasts five seconds); typingFor bounds one working spell's indicator.
const (
	typingEvery = 4500 * time.Millisecond
	typingFor   = 10 * time.Minute
)

// setTyping starts or stops the typing indicator of s on a. Each renewal is
// an outbox op at the lowest priority, coalesced per session: it is paced
// like every other call the platform throttles, never sent to a scope
// paused after a 429, and dropped when it cannot go out before the next
// renewal is due (an indicator sent late shows nothing useful).
func (d *Dispatcher) setTyping(s core.Session, a core.Adapter, on bool) {
	t, ok := a.(core.TypingNotifier)
	if !ok {
		return
	}
	key := string(s.ID) + "\x00" + string(a.Name())
	d.mu.Lock()
	defer d.mu.Unlock()
	if stop, running := d.typing[key]; running {
		if on {
			return
		}
		stop()
		delete(d.typing, key)
		return
	}
	b, bound := s.Bindings[a.Name()]
	if !on || !bound {
		return
	}
	ctx, stop := context.WithTimeout(context.Background(), typingFor)
	d.typing[key] = stop
	go func() {
		defer func() {
			d.mu.Lock()
			if _, still := d.typing[key]; still && ctx.Err() == context.DeadlineExceeded {
				delete(d.typing, key)
			}
			d.mu.Unlock()
		}()
		tick := time.NewTicker(typingEvery)
		defer tick.Stop()
		for {
			d.outbox.Enqueue(core.Op{Kind: core.OpTyping, Adapter: a.Name(), Place: b.Place, Key: "typing\x00" + key,
				BestEffort: true, Expires: time.Now().Add(typingEvery),
				Run: func(rctx context.Context, at core.Place) error {
					if ctx.Err() != nil {
						return core.ErrNoCall // the agent stopped working meanwhile
					}
					return t.Typing(rctx, at)
				}})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// StopTyping ends every typing indicator (at shutdown).
func (d *Dispatcher) StopTyping() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, stop := range d.typing {
		stop()
		delete(d.typing, k)
	}
}
