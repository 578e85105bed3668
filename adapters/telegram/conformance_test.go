package telegram_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/telegram"
	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
)

// The adapter runs the suite against telegramtest in a forum supergroup
// where the bot is an administrator, once against a server that speaks
// rich messages and once against one that does not (HTML parse mode). The
// server's own rate limits are off: the suite calls the adapter directly,
// faster than the outbox would, and injects the 429s it checks.
func TestConformance(t *testing.T) {
	for _, rich := range []bool{false, true} {
		name := "html"
		if rich {
			name = "rich"
		}
		t.Run(name, func(t *testing.T) {
			adaptertest.Run(t, adaptertest.Harness{New: func(t *testing.T) adaptertest.Env { return newConformanceEnv(t, rich) }})
		})
	}
}

// person writes the messages the suite injects.
var person = telegramtest.User{ID: 42, FirstName: "Ann"}

// kinds maps Bot API methods to the outbox's operation kinds.
var kinds = map[string]core.OpKind{
	"sendMessage": core.OpSend, "sendRichMessage": core.OpSend, "sendDocument": core.OpSend, "createForumTopic": core.OpSend,
	"editMessageText": core.OpEdit, "deleteMessage": core.OpDelete, "editForumTopic": core.OpRename, "sendChatAction": core.OpTyping,
}

func newConformanceEnv(t *testing.T, rich bool) adaptertest.Env {
	t.Helper()
	srv := telegramtest.NewServer(t, telegramtest.Options{RichMessages: rich})
	forum := srv.NewForum("Conformance")
	cur := &cursors{m: map[string]string{}}
	a, err := telegram.New(telegram.Options{Token: srv.Token, APIURL: srv.URL, ChatID: forum,
		Cursors: cur, Leases: cur, Authorizer: adaptertest.Everyone, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// The methods a 429 is injected into, by kind; sends go as rich
	// messages where the server has them.
	methods := map[core.OpKind]string{core.OpSend: "sendMessage", core.OpEdit: "editMessageText",
		core.OpDelete: "deleteMessage", core.OpRename: "editForumTopic", core.OpTyping: "sendChatAction"}
	if rich {
		methods[core.OpSend] = "sendRichMessage"
	}
	ids := func(p core.Place) (int64, int) {
		chat, err := strconv.ParseInt(p.Chat, 10, 64)
		if err != nil {
			t.Fatalf("place %+v: %v", p, err)
		}
		thread, _ := strconv.Atoi(p.Thread)
		return chat, thread
	}
	return adaptertest.Env{
		Adapter: a,
		Shown: func(p core.Place) []adaptertest.ShownMessage {
			chat, thread := ids(p)
			var out []adaptertest.ShownMessage
			for _, m := range srv.Messages(chat, thread) {
				sm := adaptertest.ShownMessage{ID: strconv.Itoa(m.ID), Text: m.Text}
				for _, row := range m.Buttons {
					for _, b := range row {
						sm.Buttons = append(sm.Buttons, b.Text)
					}
				}
				out = append(out, sm)
			}
			return out
		},
		Vanish: func(ref core.MessageRef) {
			chat, _ := ids(ref.Place)
			id, _ := strconv.Atoi(ref.ID)
			srv.DeleteMessage(chat, id)
		},
		DeleteThread: func(p core.Place) { srv.DeleteTopic(ids(p)) },
		RateLimitNext: func(k core.OpKind, d time.Duration) {
			secs := int((d + time.Second - 1) / time.Second)
			srv.FailNext(methods[k], telegramtest.Error{Code: 429, Description: fmt.Sprintf("Too Many Requests: retry after %d", secs), RetryAfter: secs})
		},
		// Telegram's 429 does not say what it throttled; the adapter
		// leaves the scope unspecified and the outbox pauses the group.
		RateLimitScope: func(core.OpKind) core.Scope { return core.ScopeUnspecified },
		Title: func(p core.Place) string {
			chat, thread := ids(p)
			for _, topic := range srv.Topics(chat) {
				if topic.ID == thread {
					return topic.Name
				}
			}
			return ""
		},
		Calls: func() []adaptertest.Call {
			var out []adaptertest.Call
			for _, c := range srv.Calls() {
				k, ok := kinds[c.Method]
				if !ok {
					continue
				}
				// Failures injected with FailNext are recorded before
				// the request is read: no chat.
				var p core.Place
				if c.Chat != 0 {
					p = core.Place{Chat: strconv.FormatInt(c.Chat, 10)}
				}
				if c.Thread != 0 {
					p.Thread = strconv.Itoa(c.Thread)
				}
				out = append(out, adaptertest.Call{Time: c.Time, Kind: k, Place: p, Err: c.Err})
			}
			return out
		},
		InjectPersonMessage: func(p core.Place, text string) core.MessageRef {
			chat, thread := ids(p)
			id := srv.SendText(chat, thread, person, text)
			return core.MessageRef{Adapter: telegram.Name, Place: p, ID: strconv.Itoa(id)}
		},
	}
}

// cursors is an in-memory telegram.Cursors.
type cursors struct {
	mu sync.Mutex
	m  map[string]string
}

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
