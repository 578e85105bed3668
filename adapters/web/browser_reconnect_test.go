package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parley-chat/parley/adapters/web/httpguard"
	"github.com/parley-chat/parley/adapters/web/webtest"
)

// streamGate holds /api/events requests while it is shut, so that a test
// can act while a client is between two streams.
type streamGate struct {
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
	held chan struct{} // a request arrived while the gate was shut
}

func newStreamGate() *streamGate {
	g := &streamGate{open: make(chan struct{}), held: make(chan struct{}, 100)}
	close(g.open)
	return g
}

func (g *streamGate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *streamGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
}

func (g *streamGate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/events" {
			g.mu.Lock()
			open := g.open
			g.mu.Unlock()
			select {
			case <-open:
			default:
				g.held <- struct{}{}
			}
			select {
			case <-open:
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// TestBrowserReconnects: the page through streams that end by their
// lifetime (1 s here) and reconnect. Each time, the test holds the
// reconnection until a message has been posted, so the message arrives
// while the page has no stream. The page shows each such message once,
// its connection dot says "live" throughout (no "connecting" for a
// reconnect the daemon announced), and it loads the session's snapshot
// only once, when it first connects: a resumed stream sends what was
// missed, and nothing has to be reloaded.
func TestBrowserReconnects(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.web.StreamLifetime = time.Second })
	gate := newStreamGate()
	srv := httptest.NewUnstartedServer(gate.wrap(s.web.Handler()))
	srv.Config.ConnContext = httpguard.ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	ctx, console := webtest.Browser(t)
	poll, eval := pageChecks(t, ctx, console)
	held := func() {
		t.Helper()
		select {
		case <-gate.held:
		case <-time.After(30 * time.Second):
			t.Fatalf("the page did not reconnect; console: %v", console())
		}
	}

	id := s.newSession("reconnecting")
	s.chat(id, "before the page opened")
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/#session="+string(id))); err != nil {
		t.Fatal(err)
	}
	poll(`document.getElementById('conn').dataset.state === 'live'`)
	poll(`document.querySelectorAll('#timeline .item.user').length === 1`)
	// The id the stream begins with, in a message with no data, is a
	// resume point before any event: the "agents" message that follows
	// carries it as its lastEventId.
	poll(`app.agents !== undefined`)
	resumes := eval(`[String(app.es.resumes)]`)[0]
	// Every state the dot is set to from now on, and the snapshots loaded.
	eval(`window.connStates = [];
		new MutationObserver(() => connStates.push(document.getElementById('conn').dataset.state))
			.observe(document.getElementById('conn'), {attributes: true, attributeFilter: ['data-state']});
		[]`)
	snapshots := `[String(performance.getEntriesByType('resource').filter((e) => e.name.includes('/state')).length)]`
	if n := eval(snapshots); n[0] != "1" {
		t.Fatalf("%s snapshots loaded before any reconnect", n[0])
	}

	const rounds = 3
	for i := range rounds {
		gate.shut()
		held() // the stream ended, and the page reconnects
		s.chat(id, fmt.Sprintf("posted during reconnect %d", i))
		gate.release()
		poll(`Array.from(document.querySelectorAll('#timeline .item.user')).some((e) => e.innerText.includes('posted during reconnect ` + strconv.Itoa(i) + `'))`)
	}
	// And a last one with nothing new.
	gate.shut()
	held()
	gate.release()
	poll(`connStates.length > 0 && connStates[connStates.length - 1] === 'live'`)

	items := eval(`Array.from(document.querySelectorAll('#timeline .item.user')).map((e) => e.innerText)`)
	if len(items) != 1+rounds {
		t.Errorf("the timeline has %d messages, want %d, each once: %q", len(items), 1+rounds, items)
	}
	states := eval(`connStates`)
	if i := slices.IndexFunc(states, func(s string) bool { return s != "live" }); i >= 0 {
		t.Errorf("the connection showed %q during reconnects the daemon announced: %q", states[i], states)
	}
	if n := eval(snapshots); n[0] != "1" {
		t.Errorf("%s snapshots loaded: reconnecting reloaded the session", n[0])
	}
	if resumes != "true" {
		t.Errorf("before any event the page had no resume point (resumes %s)", resumes)
	}
	for _, m := range console() {
		if m.IsException() || m.Type == chromedp.ConsoleError {
			t.Errorf("console %s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1)
		}
	}
}
