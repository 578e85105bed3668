package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parley-chat/parley/adapters/web/httpguard"
	"github.com/parley-chat/parley/adapters/web/webtest"
	"github.com/parley-chat/parley/core"
)

// The page end to end: create a session, send a message from the composer,
// see the agent's answer and streamed output appear live, click a question's
// button, reload and find the same timeline.
func TestBrowser(t *testing.T) {
	s := newStack(t)
	ctx, console := webtest.Browser(t)
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("browser: %v\nconsole: %v", err, console())
		}
	}
	poll, eval := pageChecks(t, ctx, console)

	// A session that exists already shows in the list.
	s.newSession("Earlier session")
	run(chromedp.Navigate(s.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#new-session")))
	poll(`document.querySelectorAll('#sessions .session').length === 1`)
	poll(`document.getElementById('conn').dataset.state === 'live'`)

	run(chromedp.SendKeys(chromedp.CSS("#new-title"), "Refactor the parser"),
		chromedp.Click(chromedp.CSS("#new-button")))
	poll(`new URLSearchParams(location.hash.slice(1)).get('session')`)
	ids := eval(`[new URLSearchParams(location.hash.slice(1)).get('session')]`)
	id := core.SessionID(ids[0])
	poll(`document.querySelectorAll('#sessions .session').length === 2`)
	poll(`document.getElementById('session-title').textContent === 'Refactor the parser'`)

	run(chromedp.WaitEnabled(chromedp.CSS("#input")),
		chromedp.SendKeys(chromedp.CSS("#input"), "Please look at `parse.go` and tell me what is **wrong**."),
		chromedp.Click(chromedp.CSS("#send")))

	// The agent's side, as the MCP server would do it: read, answer, stream.
	var human core.Message
	deadline := time.After(30 * time.Second)
	for human.ID == "" {
		msgs, err := s.store.Inbox(context.Background(), id, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) > 0 {
			human = msgs[0]
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the page's message never reached the inbox; console: %v", console())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if human.Origin != "web" || !strings.Contains(human.Content, "`parse.go`") {
		t.Fatalf("inbox message %+v", human)
	}
	poll(`document.querySelector('#timeline .item.user') && document.querySelector('#timeline .item.user').innerText.includes('parse.go')`)

	evs, _ := s.store.AppendEvents(context.Background(),
		core.Event{Kind: core.EventToolActivity, Session: id, Origin: core.OriginMCP, Tool: &core.ToolActivity{ID: "c1", Name: "read_file", Status: "ok", Detail: "parse.go"}},
		core.Event{Kind: core.EventToolActivity, Session: id, Origin: core.OriginMCP, Tool: &core.ToolActivity{ID: "c2", Name: "go test ./parser", Status: "error", Detail: "1 failing test"}})
	for _, e := range evs {
		s.bus.Publish(e)
	}
	answer := "I read `parse.go`. The tokenizer **drops** the last token when the input has no trailing newline.\n\n" +
		"```go\nfor i < len(src) {\n\tif src[i] == '\\n' {\n\t\temit(tok)\n\t}\n}\n```\n\n" +
		"- *Fix*: emit the pending token after the loop\n- Add a test for input without a newline\n\n" +
		"Details: [issue tracker](https://example.com/issues/42). Literal HTML stays text: <img src=x onerror=alert(1)>"
	s.handle(core.Command{Kind: core.AssistantPost, Session: id, Origin: core.OriginMCP, Text: answer})
	poll(`document.querySelector('#timeline .item.assistant pre code')`)

	for _, step := range []string{"Applying the fix…", "Applying the fix… done.\nRunning `go test ./parser`…"} {
		s.handle(core.Command{Kind: core.OutputUpdate, Session: id, Origin: core.OriginMCP, Text: step})
	}
	poll(`document.querySelector('#timeline .item.output.live') && document.querySelector('#timeline .item.output').innerText.includes('Running')`)

	s.handle(core.Command{Kind: core.Ask, Session: id, Origin: core.OriginMCP, QuestionID: "commit",
		Text: "Tests pass. Shall I commit the fix?", Options: []string{"Commit", "Show me the diff first"}})
	poll(`document.querySelectorAll('#timeline .item.question button.option:not([disabled])').length === 2`)
	run(chromedp.Click(chromedp.CSS("#timeline .item.question button.option")))
	poll(`document.querySelector('#timeline .item.question button.chosen') && document.querySelector('#timeline .item.question button.chosen').innerText === 'Commit'`)
	sess, err := s.store.Session(context.Background(), id)
	if err != nil || len(sess.Questions) != 0 || sess.LastInputOrigin != "web" {
		t.Fatalf("after the click: %+v, %v", sess, err)
	}

	final := "Applying the fix… done.\nRunning `go test ./parser`… **ok**.\n\nCommitted as `a1b2c3d`."
	s.handle(core.Command{Kind: core.OutputUpdate, Session: id, Origin: core.OriginMCP, Text: final})
	s.handle(core.Command{Kind: core.YieldTurn, Session: id, Origin: core.OriginMCP})
	poll(`document.querySelector('#timeline .item.output .state.final') && document.querySelector('#timeline .item.output').innerText.includes('a1b2c3d')`)
	poll(`document.getElementById('session-status').dataset.status === 'idle'`)

	// Text from people and agents never becomes markup.
	if n := eval(`[String(document.querySelectorAll('#timeline img, #timeline script').length)]`); n[0] != "0" {
		t.Fatalf("%s injected elements in the timeline", n[0])
	}
	links := eval(`Array.from(document.querySelectorAll('#timeline a')).map(a => a.href + ' ' + a.rel)`)
	if len(links) != 1 || links[0] != "https://example.com/issues/42 noopener noreferrer" {
		t.Fatalf("links %q", links)
	}
	before := eval(webtest.TimelineJS)
	want := []string{"parse.go", "2 tool calls", "drops", "a1b2c3d", "Shall I commit"}
	if len(before) != len(want) {
		t.Fatalf("timeline before reload has %d items, want %d: %q", len(before), len(want), before)
	}
	for i, w := range want {
		if !strings.Contains(before[i], w) {
			t.Errorf("item %d %q lacks %q", i, before[i], w)
		}
	}

	webtest.Screenshot(t, ctx, "web-page.png")

	run(chromedp.Reload())
	poll(`document.querySelectorAll('#timeline .item').length === ` + strconv.Itoa(len(before)))
	if after := eval(webtest.TimelineJS); !slices.Equal(after, before) {
		t.Fatalf("the timeline changed across a reload:\n%q\nwant\n%q", after, before)
	}
	if title := eval(`[document.getElementById('session-title').textContent]`); title[0] != "Refactor the parser" {
		t.Fatalf("title after reload %q", title)
	}
	for _, m := range console() {
		if m.IsException() || m.Type == chromedp.ConsoleError {
			t.Errorf("console %s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1)
		}
	}
}

// pageChecks are what a browser test asks of the tab: poll waits, 30 s at
// most, until expr is true; eval returns what expr evaluates to, strings.
// Both fail the test when the browser does not answer.
func pageChecks(t *testing.T, ctx context.Context, console func() []chromedp.ConsoleMessage) (poll func(expr string), eval func(expr string) []string) {
	poll = func(expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("waiting for %s: %v\nconsole: %v", expr, err, console())
		}
	}
	eval = func(expr string) []string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	return poll, eval
}

// guarded serves h behind httpguard as cmd mounts the adapter: everything
// behind the browser guard, /api/ behind the token and the bounds on
// bodies, except the liveness probe; the page itself needs no token.
func guarded(token string, h http.Handler) http.Handler {
	g := httpguard.New(httpguard.Options{Token: token})
	mux := http.NewServeMux()
	mux.Handle("/api/", g.API(h))
	mux.Handle("GET /api/health", h)
	mux.Handle("/", h)
	return g.Browser(mux)
}

// With a token configured, the page takes it from #token=…, keeps it, and
// sends it on every request and on the event stream.
func TestBrowserToken(t *testing.T) {
	s := newStack(t)
	srv := httptest.NewServer(guarded("s3cret", s.web.Handler()))
	t.Cleanup(srv.Close)
	ctx, console := webtest.Browser(t)
	poll := func(expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("waiting for %s: %v\nconsole: %v", expr, err, console())
		}
	}

	// Without the token the page asks for it (TestBrowserTokenBox types
	// it in); here it comes in the URL instead.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	poll(`!document.getElementById('token-box').hidden`)

	id := s.newSession("guarded")
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/#token=s3cret&session="+string(id))); err != nil {
		t.Fatal(err)
	}
	poll(`document.getElementById('conn').dataset.state === 'live'`)
	poll(`document.getElementById('session-title').textContent === 'guarded'`)
	if h, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash`)); err != nil || strings.Contains(h, "token") {
		t.Fatalf("the token stays in the URL: %q %v", h, err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitEnabled(chromedp.CSS("#input")),
		chromedp.SendKeys(chromedp.CSS("#input"), "sent with a token\n")); err != nil {
		t.Fatal(err)
	}
	poll(`document.querySelector('#timeline .item.user') !== null`)
	s.handle(core.Command{Kind: core.AssistantPost, Session: id, Origin: core.OriginMCP, Text: "received"})
	poll(`document.querySelector('#timeline .item.assistant') && document.querySelector('#timeline .item.assistant').innerText.includes('received')`)

	// Remembered across a visit without the fragment.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/#session="+string(id))); err != nil {
		t.Fatal(err)
	}
	poll(`document.querySelectorAll('#timeline .item').length === 2`)
}

// The page's markdown renderer, on its own: the subset it knows, and text
// that must stay text.
func TestBrowserMarkdown(t *testing.T) {
	s := newStack(t)
	ctx, _ := webtest.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#sidebar"))); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, src, want string }{
		{"paragraphs", "one\ntwo\n\nthree", "<p>one\ntwo</p><p>three</p>"},
		{"emphasis", "**bold** and *it* and _it_ and ~~gone~~", "<p><strong>bold</strong> and <em>it</em> and <em>it</em> and <del>gone</del></p>"},
		{"snake_case stays", "a snake_case_name here", "<p>a snake_case_name here</p>"},
		{"inline code keeps markup", "`**x** <b>`", "<p><code>**x** &lt;b&gt;</code></p>"},
		{"fenced code", "```go\nif a < b {\n}\n```", `<pre><code data-lang="go">if a &lt; b {` + "\n}</code></pre>"},
		{"unclosed fence", "```\ncode", "<pre><code>code</code></pre>"},
		{"heading", "## Title", "<h4>Title</h4>"},
		{"lists", "- a\n- b\n\n3. c\n4. d", `<ul><li>a</li><li>b</li></ul><ol start="3"><li>c</li><li>d</li></ol>`},
		{"quote", "> quoted *text*", "<blockquote><p>quoted <em>text</em></p></blockquote>"},
		{"link", "[docs](https://example.com/a?b=1&c=2)", `<p><a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">docs</a></p>`},
		{"bare link", "see https://example.com/x.", `<p>see <a href="https://example.com/x" target="_blank" rel="noopener noreferrer">https://example.com/x</a>.</p>`},
		{"javascript link is text", "[x](javascript:alert(1))", "<p>[x](javascript:alert(1))</p>"},
		{"html is text", `<img src=x onerror="alert(1)"><script>alert(2)</script>`, `<p>&lt;img src=x onerror="alert(1)"&gt;&lt;script&gt;alert(2)&lt;/script&gt;</p>`},
		{"entities stay", "&lt; &amp;", "<p>&amp;lt; &amp;amp;</p>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, _ := json.Marshal(tt.src)
			got, err := chromedp.Run(ctx, chromedp.Evaluate[string](
				`(() => { const d = document.createElement('div'); markdown(`+string(src)+`, d); return d.innerHTML; })()`))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("markdown(%q)\n got %s\nwant %s", tt.src, got, tt.want)
			}
		})
	}
}
