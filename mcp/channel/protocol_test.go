package channel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/mcp/channel"
)

// raw is a line-level JSON-RPC peer of a channel, for what a client
// library would hide: the exact messages, and their order.
type raw struct {
	t     *testing.T
	w     io.WriteCloser
	lines chan map[string]any
}

func startRaw(t *testing.T, opts channel.Options) *raw {
	t.Helper()
	opts.Logger, opts.Resync = testLogger(), testResync
	serverIn, w := io.Pipe()
	r, serverOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- channel.Serve(ctx, opts, serverIn, serverOut)
		_ = serverOut.Close()
	}()
	p := &raw{t: t, w: w, lines: make(chan map[string]any, 64)}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("the channel wrote %q: %v", sc.Text(), err)
				continue
			}
			p.lines <- m
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		_ = w.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
		cancel()
	})
	return p
}

func (p *raw) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.w, line+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

func (p *raw) next(within time.Duration) map[string]any {
	p.t.Helper()
	select {
	case m := <-p.lines:
		return m
	case <-time.After(within):
		return nil
	}
}

const claudeInfo = `"io.modelcontextprotocol/clientInfo":{"name":"claude-code","title":"Claude Code","version":"2.1.328"},` +
	`"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}}`

// TestHandshakeAsClaudeCode replays Claude Code 2.1.328's handshake line by
// line: its server/discover probe at 2026-07-28 gets the unsupported-version
// error naming 2025-11-25 (so it falls back, and registers channel events),
// a 2026-07-28 request is refused the same way, and no channel event is
// written before Claude Code has listed the tools, when it installs its
// handler; then the waiting message arrives.
func TestHandshakeAsClaudeCode(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	id := d.createSession("raw")
	d.human(id, "queued before Claude Code was ready")
	p := startRaw(t, channel.Options{URL: d.url(), Session: id, Settle: 50 * time.Millisecond})

	p.send(`{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + claudeInfo + `}}}`)
	m := p.next(waitFor)
	e, _ := m["error"].(map[string]any)
	if e == nil || e["code"] != float64(mcp.UNSUPPORTED_PROTOCOL_VERSION) || fmt.Sprint(e["data"].(map[string]any)["supported"]) != "[2025-11-25 2025-06-18 2025-03-26 2024-11-05]" {
		t.Fatalf("server/discover answered %v, want the unsupported-version error listing the initialize-era versions", m)
	}
	p.send(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + claudeInfo + `}}}`)
	if m := p.next(waitFor); m["error"] == nil {
		t.Fatalf("a 2026-07-28 request was served: %v", m)
	}

	p.send(`{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}},"clientInfo":{"name":"claude-code","title":"Claude Code","version":"2.1.328"}},"jsonrpc":"2.0","id":0}`)
	m = p.next(waitFor)
	res, _ := m["result"].(map[string]any)
	if res == nil || res["protocolVersion"] != "2025-11-25" {
		t.Fatalf("initialize answered %v", m)
	}
	caps := res["capabilities"].(map[string]any)
	if exp := fmt.Sprint(caps["experimental"]); exp != "map[claude/channel:map[] claude/channel/permission:map[]]" {
		t.Fatalf("experimental capabilities %s", exp)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if m := p.next(quiet); m != nil {
		t.Fatalf("the channel wrote %v before Claude Code listed the tools", m)
	}
	p.send(`{"method":"tools/list","jsonrpc":"2.0","id":1}`)
	if m := p.next(waitFor); m["id"] != float64(1) {
		t.Fatalf("tools/list answered %v", m)
	}
	m = p.next(waitFor)
	params, _ := m["params"].(map[string]any)
	if m["method"] != channel.MethodChannel || params["content"] != "queued before Claude Code was ready" {
		t.Fatalf("after tools/list the channel wrote %v, want the waiting message", m)
	}
}
