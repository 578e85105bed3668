package matrix_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/matrix"
	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
)

// TestConformance runs the adapter conformance suite against a real
// Dendrite. One homeserver serves every check (it takes a second to
// start); each check gets a fresh adapter behind its own matrixtest.Proxy,
// which injects the 429s the suite asks for, and a recorder of the calls
// the adapter makes. The adapter binds its own places (a room per
// session), with the allowed person invited; the person joins a room when
// the suite makes them write there.
func TestConformance(t *testing.T) {
	hs := matrixtest.Dendrite(t)
	bot := hs.Register(t, "parley")
	ann := matrixtest.NewPerson(t, hs.URL, hs.Register(t, "ann"))
	adaptertest.Run(t, adaptertest.Harness{New: func(t *testing.T) adaptertest.Env {
		return newConformanceEnv(t, hs, bot, ann)
	}})
}

func newConformanceEnv(t *testing.T, hs *matrixtest.Homeserver, bot *matrixtest.User, ann *matrixtest.Person) adaptertest.Env {
	t.Helper()
	proxy := matrixtest.NewProxy(t, hs.URL)
	rec := &recorder{next: http.DefaultTransport}
	cur := newCursors()
	a, err := matrix.New(matrix.Options{Homeserver: proxy.URL, UserID: bot.ID, AccessToken: bot.AccessToken,
		Allowed: []string{string(ann.User.ID)}, Authorizer: admit(ann.User.ID), Cursors: cur, Leases: cur, Files: tempFiles(t),
		HTTPClient: &http.Client{Transport: rec, Timeout: time.Minute}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The bot's own client, straight to the homeserver, for what people
	// would see and do behind the adapter's back.
	raw := bot.Client(t, hs.URL)
	return adaptertest.Env{
		Adapter: a,
		Shown: func(p core.Place) []adaptertest.ShownMessage {
			room := id.RoomID(p.Chat)
			// Dendrite serves /messages from its sync API, which learns
			// new events asynchronously: wait until it has every event
			// the adapter made in the room.
			var out []adaptertest.ShownMessage
			eventually(t, "the adapter's events in "+p.Chat, func() bool {
				var have map[id.EventID]bool
				out, have = shown(t, raw, room)
				for _, ev := range rec.events(room) {
					if !have[ev] {
						return false
					}
				}
				return true
			})
			return out
		},
		Vanish: func(r core.MessageRef) {
			room, ev := id.RoomID(r.Place.Chat), id.EventID(r.ID)
			if _, err := raw.RedactEvent(t.Context(), room, ev); err != nil {
				t.Fatalf("redact %s: %v", r.ID, err)
			}
			eventually(t, "the redaction of "+r.ID, func() bool {
				got, err := raw.GetEvent(t.Context(), room, ev)
				return err == nil && got.Unsigned.RedactedBecause != nil
			})
		},
		// The bot leaves the room: the homeserver then refuses its sends
		// there, as after a kick.
		DeleteThread: func(p core.Place) {
			if _, err := raw.LeaveRoom(t.Context(), id.RoomID(p.Chat)); err != nil {
				t.Fatalf("leave %s: %v", p.Chat, err)
			}
		},
		RateLimitNext: func(k core.OpKind, d time.Duration) { proxy.LimitNext(proxyKinds[k], 1, d) },
		// Homeservers limit events per account.
		RateLimitScope: func(core.OpKind) core.Scope { return core.ScopeAccount },
		Title: func(p core.Place) string {
			var c event.RoomNameEventContent
			if err := raw.StateEvent(t.Context(), id.RoomID(p.Chat), event.StateRoomName, "", &c); err != nil {
				t.Fatalf("room name of %s: %v", p.Chat, err)
			}
			return c.Name
		},
		Calls: rec.calls,
		InjectPersonMessage: func(p core.Place, text string) core.MessageRef {
			room := id.RoomID(p.Chat)
			if !ann.Joined(room) {
				ann.Join(t, room)
			}
			ev := ann.Send(t, room, text)
			// Like the adapter's own events, the person's reaches
			// /messages asynchronously (see Shown).
			eventually(t, "the person's message "+string(ev), func() bool {
				_, have := shown(t, raw, room)
				return have[ev]
			})
			return core.MessageRef{Adapter: matrix.Name, Place: p, ID: string(ev)}
		},
	}
}

// proxyKinds maps the outbox's operation kinds to the requests the proxy
// refuses for them.
var proxyKinds = map[core.OpKind]matrixtest.Kind{
	core.OpSend: matrixtest.KindMessage, core.OpEdit: matrixtest.KindEdit, core.OpDelete: matrixtest.KindRedaction,
	core.OpRename: matrixtest.KindState, core.OpTyping: matrixtest.KindTyping,
}

// shown is what a client shows of the room's messages, oldest first: each
// message with its latest edit applied, redacted ones left out.
func shown(t *testing.T, cli *mautrix.Client, room id.RoomID) ([]adaptertest.ShownMessage, map[id.EventID]bool) {
	t.Helper()
	have := map[id.EventID]bool{}
	var events []*event.Event
	from := ""
	for range 20 {
		resp, err := cli.Messages(t.Context(), room, from, "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			t.Fatalf("messages of %s: %v", room, err)
		}
		events = append(events, resp.Chunk...)
		if resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
	}
	slices.Reverse(events)
	var out []adaptertest.ShownMessage
	index := map[id.EventID]int{}
	for _, ev := range events {
		have[ev.ID] = true
		if ev.Type != event.EventMessage || ev.Unsigned.RedactedBecause != nil {
			continue
		}
		var c struct {
			Body       string `json:"body"`
			NewContent *struct {
				Body    string `json:"body"`
				Buttons []struct {
					Label string `json:"label"`
				} `json:"org.parley.buttons"`
			} `json:"m.new_content"`
			RelatesTo *struct {
				RelType string     `json:"rel_type"`
				EventID id.EventID `json:"event_id"`
			} `json:"m.relates_to"`
			Buttons []struct {
				Label string `json:"label"`
			} `json:"org.parley.buttons"`
		}
		if json.Unmarshal(ev.Content.VeryRaw, &c) != nil || (c.Body == "" && c.NewContent == nil) {
			continue // redacted: no content left
		}
		if c.RelatesTo != nil && c.RelatesTo.RelType == "m.replace" && c.NewContent != nil {
			if i, ok := index[c.RelatesTo.EventID]; ok {
				out[i].Text = c.NewContent.Body
				out[i].Buttons = nil
				for _, b := range c.NewContent.Buttons {
					out[i].Buttons = append(out[i].Buttons, b.Label)
				}
			}
			continue
		}
		m := adaptertest.ShownMessage{ID: string(ev.ID), Text: c.Body}
		for _, b := range c.Buttons {
			m.Buttons = append(m.Buttons, b.Label)
		}
		index[ev.ID] = len(out)
		out = append(out, m)
	}
	return out, have
}

// eventually waits until cond holds, polling, and fails the test after a
// generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(15 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// recorder records the calls the adapter makes, by the outbox's kinds,
// with the room and the homeserver's error code.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	log  []adaptertest.Call
	made map[id.RoomID][]id.EventID // events the homeserver made for the adapter
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	kind, room, ok := callKind(req, body)
	start := time.Now()
	resp, err := r.next.RoundTrip(req)
	if !ok {
		return resp, err
	}
	c := adaptertest.Call{Time: start, Kind: kind, Place: core.Place{Chat: string(room)}}
	switch {
	case err != nil:
		c.Err = err.Error()
	case resp.StatusCode >= 300:
		c.Err = resp.Status
	}
	var made struct {
		EventID id.EventID `json:"event_id"`
	}
	if err == nil && resp.StatusCode < 300 && room != "" && kind != core.OpTyping {
		b, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		_ = json.Unmarshal(b, &made)
	}
	r.mu.Lock()
	r.log = append(r.log, c)
	if made.EventID != "" {
		if r.made == nil {
			r.made = map[id.RoomID][]id.EventID{}
		}
		r.made[room] = append(r.made[room], made.EventID)
	}
	r.mu.Unlock()
	return resp, err
}

func (r *recorder) events(room id.RoomID) []id.EventID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.made[room])
}

func (r *recorder) calls() []adaptertest.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// callKind classifies a client-server API request as an outbox kind.
func callKind(req *http.Request, body []byte) (core.OpKind, id.RoomID, bool) {
	var seg []string
	for _, s := range strings.Split(req.URL.EscapedPath(), "/") {
		u, _ := url.PathUnescape(s)
		seg = append(seg, u)
	}
	// /_matrix/client/v3/rooms/{room}/{what}/…
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/createRoom") {
		return core.OpSend, "", true
	}
	if req.Method != http.MethodPut || len(seg) < 7 || seg[4] != "rooms" {
		return 0, "", false
	}
	room := id.RoomID(seg[5])
	switch seg[6] {
	case "send":
		if bytes.Contains(body, []byte(`"m.replace"`)) {
			return core.OpEdit, room, true
		}
		return core.OpSend, room, true
	case "redact":
		return core.OpDelete, room, true
	case "state":
		return core.OpRename, room, true
	case "typing":
		return core.OpTyping, room, true
	}
	return 0, "", false
}

// cursors is an in-memory cursor store.
type cursors struct {
	mu sync.Mutex
	m  map[string]string
}

func newCursors() *cursors { return &cursors{m: map[string]string{}} }

func (c *cursors) Cursor(_ context.Context, name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name], nil
}

func (c *cursors) SetCursor(_ context.Context, name, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[name] = value
	return nil
}

// The in-memory cursors are also the tests' leases, always granted as on
// bbolt (one process holds every lease), so that a fenced write lands in
// the map the tests read; store/bolt and store/postgres are tested as
// Leasers on their own.
func (c *cursors) AcquireLease(_ context.Context, name string, _ time.Duration) (core.Lease, bool, error) {
	return core.Lease{Name: name, Holder: "test", Token: 1}, true, nil
}

func (c *cursors) RenewLease(_ context.Context, l core.Lease, _ time.Duration) (core.Lease, error) {
	return l, nil
}

func (c *cursors) ReleaseLease(context.Context, core.Lease) error { return nil }

func (c *cursors) Leases(context.Context) ([]core.LeaseInfo, error) { return nil, nil }

func (c *cursors) SetCursorFenced(ctx context.Context, name, value string, _ core.Lease) error {
	return c.SetCursor(ctx, name, value)
}
