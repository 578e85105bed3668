package delivery

import (
	"context"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
)

// typingEvery is how often the typing indicator is renewed (Telegram's
// lasts five seconds); typingFor bounds one working spell's indicator.
const (
	typingEvery = 4500 * time.Millisecond
	typingFor   = 10 * time.Minute
)

// typing runs the loops that show the typing indicator while an agent
// works, one per session and adapter.
type typing struct {
	outbox *Outbox

	mu sync.Mutex
	// loops holds, per session and adapter, the stop function of the loop
	// showing the indicator.
	loops map[string]context.CancelFunc
}

func newTyping(outbox *Outbox) *typing {
	return &typing{outbox: outbox, loops: map[string]context.CancelFunc{}}
}

// set starts or stops the typing indicator of s on a. Each renewal is
// an outbox op at the lowest priority, coalesced per session: it is paced
// like every other call the platform throttles, never sent to a scope
// paused after a 429, and dropped when it cannot go out before the next
// renewal is due (an indicator sent late shows nothing useful).
func (ty *typing) set(s core.Session, a core.Adapter, on bool) {
	t, ok := a.(core.TypingNotifier)
	if !ok {
		return
	}
	key := string(s.ID) + "\x00" + string(a.Name())
	ty.mu.Lock()
	defer ty.mu.Unlock()
	if stop, running := ty.loops[key]; running {
		if on {
			return
		}
		stop()
		delete(ty.loops, key)
		return
	}
	b, bound := s.Bindings[a.Name()]
	if !on || !bound {
		return
	}
	ctx, stop := context.WithTimeout(context.Background(), typingFor)
	ty.loops[key] = stop
	go func() {
		defer func() {
			ty.mu.Lock()
			if _, still := ty.loops[key]; still && ctx.Err() == context.DeadlineExceeded {
				delete(ty.loops, key)
			}
			ty.mu.Unlock()
		}()
		tick := time.NewTicker(typingEvery)
		defer tick.Stop()
		for {
			ty.outbox.Enqueue(core.Op{Kind: core.OpTyping, Adapter: a.Name(), Place: b.Place, Key: "typing\x00" + key,
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

// stopAll ends every typing indicator.
func (ty *typing) stopAll() {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	for k, stop := range ty.loops {
		stop()
		delete(ty.loops, k)
	}
}
