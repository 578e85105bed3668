package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// posted answers chat.postMessage as Slack does: ts, and the message with
// its thread_ts when it is a reply.
func posted(ts string) func(url.Values) answer {
	return func(f url.Values) answer {
		msg := map[string]any{"type": "message", "ts": ts, "text": f.Get("text")}
		if th := f.Get("thread_ts"); th != "" {
			msg["thread_ts"] = th
		}
		return okAnswer(map[string]any{"channel": f.Get("channel"), "ts": ts, "message": msg})
	}
}

func TestSend(t *testing.T) {
	api := newFakeAPI(t)
	api.on("chat.postMessage", posted("300.1"))
	a := newTestAdapter(t, api)
	p := core.Place{Chat: "C1", Thread: "100.1"}
	r, err := a.Send(context.Background(), p, core.OutMessage{Kind: core.KindAssistant, Text: "**hi** <there>"})
	if err != nil {
		t.Fatal(err)
	}
	if r != (core.MessageRef{Adapter: Name, Place: p, ID: "300.1"}) {
		t.Errorf("ref %+v", r)
	}
	c := api.called("chat.postMessage")[0].Form
	if c.Get("channel") != "C1" || c.Get("thread_ts") != "100.1" || c.Get("text") != "hi &lt;there&gt;" || c.Get("unfurl_links") != "false" {
		t.Errorf("posted %v", c)
	}
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(c.Get("blocks")), &blocks); err != nil || len(blocks) != 1 || blocks[0]["type"] != "markdown" || blocks[0]["text"] != "**hi** <there>" {
		t.Errorf("blocks %s (%v)", c.Get("blocks"), err)
	}
}

// TestSendThreadGone: Slack posts a reply whose root was deleted at the top
// level; the stray message is deleted and the send is core.ErrThreadGone.
func TestSendThreadGone(t *testing.T) {
	api := newFakeAPI(t)
	api.on("chat.postMessage", func(f url.Values) answer {
		return okAnswer(map[string]any{"channel": "C1", "ts": "300.2", "message": map[string]any{"type": "message", "ts": "300.2", "text": "x"}})
	})
	a := newTestAdapter(t, api)
	_, err := a.Send(context.Background(), core.Place{Chat: "C1", Thread: "100.1"}, core.OutMessage{Text: "x"})
	if !errors.Is(err, core.ErrThreadGone) {
		t.Fatalf("Send: %v, want core.ErrThreadGone", err)
	}
	if d := api.called("chat.delete"); len(d) != 1 || d[0].Form.Get("ts") != "300.2" {
		t.Errorf("chat.delete calls %v, want the stray 300.2", d)
	}

	// thread_not_found, should Slack say so, is the same.
	api.on("chat.postMessage", func(url.Values) answer { return failAnswer("thread_not_found") })
	if _, err := a.Send(context.Background(), core.Place{Chat: "C1", Thread: "100.1"}, core.OutMessage{Text: "x"}); !errors.Is(err, core.ErrThreadGone) {
		t.Errorf("Send: %v, want core.ErrThreadGone", err)
	}
	// An answer without the message says nothing about the thread.
	api.on("chat.postMessage", func(url.Values) answer { return okAnswer(map[string]any{"channel": "C1", "ts": "300.3"}) })
	if _, err := a.Send(context.Background(), core.Place{Chat: "C1", Thread: "100.1"}, core.OutMessage{Text: "x"}); err != nil {
		t.Errorf("Send: %v", err)
	}
}

// TestSendAsTextWhenBlocksRefused: invalid_blocks or msg_too_long is tried
// once more as text only, then is permanent.
func TestSendAsTextWhenBlocksRefused(t *testing.T) {
	for _, code := range []string{"invalid_blocks", "msg_too_long"} {
		t.Run(code, func(t *testing.T) {
			api := newFakeAPI(t)
			api.on("chat.postMessage", func(f url.Values) answer {
				if f.Get("blocks") != "" {
					return failAnswer(code)
				}
				return posted("300.4")(f)
			})
			a := newTestAdapter(t, api)
			m := core.OutMessage{Kind: core.KindQuestion, Text: "Go **on**?", Buttons: options("Yes", "No")}
			if _, err := a.Send(context.Background(), core.Place{Chat: "C1", Thread: "100.1"}, m); err != nil {
				t.Fatalf("Send: %v", err)
			}
			calls := api.called("chat.postMessage")
			if len(calls) != 2 || !strings.Contains(calls[1].Form.Get("text"), "Go *on*?\n1. Yes\n2. No") {
				t.Errorf("calls %v", calls)
			}
			api.on("chat.postMessage", func(url.Values) answer { return failAnswer(code) })
			_, err := a.Send(context.Background(), core.Place{Chat: "C1", Thread: "100.1"}, m)
			if !core.IsPermanent(err) {
				t.Errorf("Send refused twice: %v, want permanent", err)
			}
		})
	}
}

func TestRateLimitScopes(t *testing.T) {
	api := newFakeAPI(t)
	limited := func(url.Values) answer {
		return answer{Status: 429, Header: map[string]string{"Retry-After": "3"}, Body: map[string]any{"ok": false, "error": "ratelimited"}}
	}
	for _, m := range []string{"chat.postMessage", "chat.update", "chat.delete", "reactions.add", "assistant.threads.setStatus"} {
		api.on(m, limited)
	}
	a := newTestAdapter(t, api)
	ctx := context.Background()
	p := core.Place{Chat: "C1", Thread: "100.1"}
	r := core.MessageRef{Adapter: Name, Place: p, ID: "300.1"}
	calls := map[string]struct {
		err   error
		scope core.Scope
	}{
		"send":   {func() error { _, err := a.Send(ctx, p, core.OutMessage{Text: "x"}); return err }(), core.ScopeGroup},
		"edit":   {a.Edit(ctx, r, core.OutMessage{Text: "x"}), core.ScopeAccount},
		"delete": {a.Delete(ctx, r), core.ScopeAccount},
		"status": {func() error {
			_, err := a.ShowStatus(ctx, core.Binding{Place: p, Meta: meta{Owner: ownerPerson}.raw()}, core.StatusView{Title: "t"})
			return err
		}(), core.ScopeAccount},
		"typing": {a.Typing(ctx, p), core.ScopeAccount},
	}
	for name, c := range calls {
		var rl *core.RateLimitError
		if !errors.As(c.err, &rl) || rl.RetryAfter != 3*time.Second || rl.Scope != c.scope || core.IsPermanent(c.err) {
			t.Errorf("%s: %v, want a rate limit of 3s in %v", name, c.err, c.scope)
		}
	}
}

func TestEditAndDelete(t *testing.T) {
	api := newFakeAPI(t)
	a := newTestAdapter(t, api)
	ctx := context.Background()
	r := core.MessageRef{Adapter: Name, Place: core.Place{Chat: "C1", Thread: "100.1"}, ID: "300.1"}
	if err := a.Edit(ctx, r, core.OutMessage{Kind: core.KindOutput, Text: "more"}); err != nil {
		t.Fatal(err)
	}
	if c := api.called("chat.update")[0].Form; c.Get("ts") != "300.1" || c.Get("channel") != "C1" || !strings.Contains(c.Get("blocks"), `"more"`) {
		t.Errorf("chat.update %v", c)
	}
	if err := a.Delete(ctx, r); err != nil {
		t.Fatal(err)
	}
	api.on("chat.update", func(url.Values) answer { return failAnswer("message_not_found") })
	api.on("chat.delete", func(url.Values) answer { return failAnswer("message_not_found") })
	if err := a.Edit(ctx, r, core.OutMessage{Text: "x"}); !errors.Is(err, core.ErrMessageGone) {
		t.Errorf("Edit of a gone message: %v", err)
	}
	if err := a.Delete(ctx, r); !errors.Is(err, core.ErrMessageGone) {
		t.Errorf("Delete of a gone message: %v", err)
	}
	api.on("chat.delete", func(url.Values) answer { return failAnswer("cant_delete_message") })
	if err := a.Delete(ctx, r); !core.IsPermanent(err) {
		t.Errorf("Delete of a person's message: %v, want permanent", err)
	}
	file := core.MessageRef{Adapter: Name, Place: r.Place, ID: filePrefix + "F1"}
	if err := a.Edit(ctx, file, core.OutMessage{Text: "x"}); !errors.Is(err, core.ErrUnsupported) {
		t.Errorf("Edit of a file: %v", err)
	}
	if err := a.Delete(ctx, file); err != nil || api.called("files.delete")[0].Form.Get("file") != "F1" {
		t.Errorf("Delete of a file: %v", err)
	}
}

func TestSendFile(t *testing.T) {
	api := newFakeAPI(t)
	uploadURL := strings.TrimSuffix(api.URL, "api/") + "api/upload"
	api.on("files.getUploadURLExternal", func(url.Values) answer {
		return okAnswer(map[string]any{"upload_url": uploadURL, "file_id": "F9"})
	})
	api.on("files.completeUploadExternal", func(f url.Values) answer {
		return okAnswer(map[string]any{"files": []map[string]any{{"id": "F9", "title": "out.md"}}})
	})
	a := newTestAdapter(t, api)
	body := "# the whole output"
	p := core.Place{Chat: "C1", Thread: "100.1"}
	r, err := a.SendFile(context.Background(), p, core.Attachment{Name: "out.md", Size: int64(len(body))}, strings.NewReader(body), "the final output")
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != filePrefix+"F9" || r.Place != p {
		t.Errorf("ref %+v", r)
	}
	if c := api.called("files.completeUploadExternal")[0].Form; c.Get("channel_id") != "C1" || c.Get("thread_ts") != "100.1" || c.Get("initial_comment") != "the final output" {
		t.Errorf("completeUploadExternal %v", c)
	}
	if len(api.called("upload")) != 1 {
		t.Error("the file was not uploaded")
	}
}

func TestTyping(t *testing.T) {
	api := newFakeAPI(t)
	a := newTestAdapter(t, api)
	ctx := context.Background()
	p := core.Place{Chat: "C1", Thread: "100.1"}
	if err := a.Typing(ctx, p); err != nil {
		t.Fatal(err)
	}
	if c := api.called("assistant.threads.setStatus")[0].Form; c.Get("channel_id") != "C1" || c.Get("thread_ts") != "100.1" || c.Get("status") != typingStatus {
		t.Errorf("setStatus %v", c)
	}
	if err := a.Typing(ctx, p); !errors.Is(err, core.ErrNoCall) {
		t.Errorf("Typing again at once: %v, want core.ErrNoCall (the status lasts)", err)
	}
	if err := a.Typing(ctx, core.Place{Chat: "C1"}); !errors.Is(err, core.ErrNoCall) {
		t.Errorf("Typing outside a thread: %v, want core.ErrNoCall", err)
	}
	api.on("assistant.threads.setStatus", func(f url.Values) answer {
		if f.Get("thread_ts") == "150.1" {
			return failAnswer("invalid_thread_ts")
		}
		return okAnswer(nil)
	})
	odd := core.Place{Chat: "C1", Thread: "150.1"}
	if err := a.Typing(ctx, odd); err != nil {
		t.Errorf("Typing refused for a thread: %v, want silence", err)
	}
	n := len(api.called("assistant.threads.setStatus"))
	if err := a.Typing(ctx, odd); !errors.Is(err, core.ErrNoCall) || len(api.called("assistant.threads.setStatus")) != n {
		t.Errorf("Typing again in a thread Slack refused: %v, want no call", err)
	}
	api.on("assistant.threads.setStatus", func(url.Values) answer { return failAnswer("not_allowed") })
	other := core.Place{Chat: "C1", Thread: "200.1"}
	if err := a.Typing(ctx, other); err != nil {
		t.Errorf("Typing refused by Slack: %v, want silence", err)
	}
	n = len(api.called("assistant.threads.setStatus"))
	if err := a.Typing(ctx, core.Place{Chat: "C1", Thread: "300.1"}); !errors.Is(err, core.ErrNoCall) || len(api.called("assistant.threads.setStatus")) != n {
		t.Errorf("Typing after Slack refused it: %v, want no call", err)
	}
}

// TestSendTooLongForABlock: markdown longer than a markdown block holds
// goes whole as mrkdwn text; longer than Slack's text limit, it is refused
// for good, never cut (core splits what it sends, so only a caller that
// ignores MaxLength gets there).
func TestSendTooLongForABlock(t *testing.T) {
	api := newFakeAPI(t)
	api.on("chat.postMessage", posted("300.1"))
	api.on("chat.update", func(url.Values) answer { return okAnswer(nil) })
	a := newTestAdapter(t, api)
	p := core.Place{Chat: "C1", Thread: "100.1"}
	long := strings.Repeat("word ", 2*maxMarkdown/5) + "end"
	r, err := a.Send(context.Background(), p, core.OutMessage{Kind: core.KindAssistant, Text: long})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(context.Background(), r, core.OutMessage{Kind: core.KindOutput, Text: long + " again"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range append(api.called("chat.postMessage"), api.called("chat.update")...) {
		if c.Form.Get("blocks") != "" && c.Form.Get("blocks") != "[]" || !strings.HasSuffix(c.Form.Get("text"), "end") && !strings.HasSuffix(c.Form.Get("text"), "again") {
			t.Errorf("%s sent blocks %q and %d bytes of text, want the whole text without blocks", c.Method, c.Form.Get("blocks"), len(c.Form.Get("text")))
		}
	}
	_, err = a.Send(context.Background(), p, core.OutMessage{Kind: core.KindAssistant, Text: strings.Repeat("x", maxText+1)})
	if err == nil || !core.IsPermanent(err) {
		t.Errorf("Send of %d bytes: %v, want a permanent refusal", maxText+1, err)
	}
	if n := len(api.called("chat.postMessage")); n != 1 {
		t.Errorf("%d chat.postMessage calls, want none for the refused message", n-1)
	}
}
