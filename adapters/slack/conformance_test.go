package slack_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/slack"
	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
)

// The adapter runs the suite against slacktest in a channel the bot is in,
// in a workspace that offers the assistant-thread status (the typing
// indicator). The server's own rate limits are off: the suite calls the
// adapter directly, faster than the outbox would, and injects the 429s it
// checks. The adapter binds its own places (a root message in the channel
// per session), so Env.Place is zero.
//
// It runs twice: with streaming off, and with it on, where the suite sees
// the limits streaming declares (its methods' tiers) and the output edits
// that become chat.startStream/appendStream/stopStream.
func TestConformance(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "update"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			adaptertest.Run(t, adaptertest.Harness{New: func(t *testing.T) adaptertest.Env { return newConformanceEnv(t, stream) }})
		})
	}
}

// kinds maps the Web API methods the adapter calls to the outbox's
// operation kinds: posting and uploading are sends, showing a status edits
// a root parley owns (chat.update, counted as an edit by Slack) or swaps a
// reaction on a person's, and typing is the assistant-thread status.
var kinds = map[string]core.OpKind{
	"chat.postMessage": core.OpSend, "files.getUploadURLExternal": core.OpSend, "files.completeUploadExternal": core.OpSend,
	"chat.update": core.OpEdit, "chat.delete": core.OpDelete,
	"reactions.add": core.OpRename, "reactions.remove": core.OpRename,
	"assistant.threads.setStatus": core.OpTyping,
	// With streaming on, an output's first send starts a stream and its
	// edits append to it or stop it.
	"chat.startStream": core.OpSend, "chat.appendStream": core.OpEdit, "chat.stopStream": core.OpEdit,
}

// methods are the calls a 429 is injected into, by kind. A session the
// suite binds has a root parley posted, whose status is shown by editing
// it: rename is chat.update.
var methods = map[core.OpKind]string{
	core.OpSend: "chat.postMessage", core.OpEdit: "chat.update", core.OpDelete: "chat.delete",
	core.OpRename: "chat.update", core.OpTyping: "assistant.threads.setStatus",
}

func newConformanceEnv(t *testing.T, stream bool) adaptertest.Env {
	t.Helper()
	srv := slacktest.NewServer(t, slacktest.Options{AssistantThreads: true, Streaming: stream})
	channel := srv.NewChannel("conformance")
	person := srv.NewUser("ann")
	opts := slack.Options{BotToken: srv.BotToken, AppToken: srv.AppToken, APIURL: srv.URL, Channel: channel,
		Authorizer: adaptertest.Everyone, Files: tempFiles(t), Logger: slog.New(slog.DiscardHandler)}
	if stream {
		// Slack streams in a channel only to a recipient; the person is
		// the one the suite's sessions are for.
		opts.Stream, opts.Recipients = true, []string{person.ID}
	}
	a, err := slack.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	return adaptertest.Env{
		Adapter: a,
		Shown: func(p core.Place) []adaptertest.ShownMessage {
			var out []adaptertest.ShownMessage
			for _, m := range srv.Replies(p.Chat, p.Thread) {
				if m.Deleted {
					continue
				}
				out = append(out, adaptertest.ShownMessage{ID: m.TS, Text: shownText(m), Buttons: buttonLabels(m)})
			}
			return out
		},
		Vanish: func(ref core.MessageRef) { srv.Delete(ref.Place.Chat, ref.ID) },
		DeleteThread: func(p core.Place) {
			// Replies first, the root last, as a person clearing a
			// thread would.
			msgs := srv.Replies(p.Chat, p.Thread)
			for i := len(msgs) - 1; i >= 0; i-- {
				if !msgs[i].Deleted {
					srv.Delete(p.Chat, msgs[i].TS)
				}
			}
		},
		RateLimitNext: func(k core.OpKind, d time.Duration) {
			srv.FailNext(methods[k], slacktest.Error{Code: "ratelimited", Status: 429, RetryAfter: d})
		},
		// chat.postMessage is limited per channel (the adapter's group);
		// every other method per workspace (its account).
		RateLimitScope: func(k core.OpKind) core.Scope {
			if k == core.OpSend {
				return core.ScopeGroup
			}
			return core.ScopeAccount
		},
		Title: func(p core.Place) string {
			// A root parley owns shows the title; a person's root is the
			// title until a header reply shows a new one.
			var parts []string
			if root, ok := srv.Message(p.Chat, p.Thread); ok && !root.Deleted {
				parts = append(parts, shownText(root))
			}
			for _, m := range srv.Replies(p.Chat, p.Thread) {
				if m.BotID != "" && m.TS != p.Thread && strings.HasPrefix(m.Text, "🏷") {
					parts = append(parts, m.Text)
				}
			}
			return strings.Join(parts, "\n")
		},
		Calls: func() []adaptertest.Call {
			var out []adaptertest.Call
			for _, c := range srv.Calls() {
				k, ok := kinds[c.Method]
				if !ok {
					continue
				}
				out = append(out, adaptertest.Call{Time: c.Time, Kind: k, Place: core.Place{Chat: c.Channel, Thread: c.Thread}, Err: c.Error})
			}
			return out
		},
		InjectPersonMessage: func(p core.Place, text string) core.MessageRef {
			ts := srv.Post(person, p.Chat, p.Thread, text)
			return core.MessageRef{Adapter: slack.Name, Place: p, ID: ts}
		},
	}
}

// block is the part of a Block Kit block the suite reads.
type block struct {
	Type     string          `json:"type"`
	Text     json.RawMessage `json:"text"`
	Elements []struct {
		Type string          `json:"type"`
		Text json.RawMessage `json:"text"`
	} `json:"elements"`
}

// textOf is a text object's text, or a markdown block's string.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct{ Text string }
	_ = json.Unmarshal(raw, &obj)
	return obj.Text
}

// shownText is what people read of a message: the text of its markdown,
// section and context blocks, or its text when it has none.
func shownText(m slacktest.Message) string {
	var blocks []block
	_ = json.Unmarshal(m.Blocks, &blocks)
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "markdown", "section", "header":
			parts = append(parts, textOf(b.Text))
		case "context":
			for _, el := range b.Elements {
				parts = append(parts, textOf(el.Text))
			}
		}
	}
	if len(parts) == 0 {
		return m.Text
	}
	return strings.Join(parts, "\n")
}

// buttonLabels are the labels of the buttons a message shows, in order.
func buttonLabels(m slacktest.Message) []string {
	var blocks []block
	_ = json.Unmarshal(m.Blocks, &blocks)
	var out []string
	for _, b := range blocks {
		if b.Type != "actions" {
			continue
		}
		for _, el := range b.Elements {
			if el.Type == "button" {
				out = append(out, textOf(el.Text))
			}
		}
	}
	return out
}
