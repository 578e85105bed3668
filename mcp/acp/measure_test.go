//go:build linux

package acp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/agent"
	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
	"github.com/parley-chat/parley/mcp/internal/agentproc"
)

// TestOpenCodeMeasure measures a real OpenCode behind the driver: RSS of
// its process group after initialize and with 1 and 20 sessions, the time
// of session/new and of a prompt (against the instant fake API), and the
// driver's own share of streamed text: from the line of the first
// agent_message_chunk read off the pipe to its TextDelta on Events.
//
//	PARLEY_ACP_MEASURE=1 go test -run TestOpenCodeMeasure -v ./mcp/acp/
func TestOpenCodeMeasure(t *testing.T) {
	if os.Getenv("PARLEY_ACP_MEASURE") == "" {
		t.Skip("set PARLEY_ACP_MEASURE=1 to measure")
	}
	oc := newOpenCode(t)
	oc.opts.Logger = nil
	d := oc.driver(t)
	var mu sync.Mutex
	var firstChunk time.Time
	d.lineRead = func(line []byte) {
		if bytes.Contains(line, []byte(`"agent_message_chunk"`)) {
			mu.Lock()
			if firstChunk.IsZero() {
				firstChunk = time.Now()
			}
			mu.Unlock()
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	p, err := d.process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start and initialize: %v; RSS %s", time.Since(t0), rss(p.proc.PID))

	var convs []agent.Conversation
	var news []time.Duration
	for i := range 20 {
		t0 := time.Now()
		c := start(t, d, agent.StartRequest{Session: fmt.Sprintf("s%d", i)})
		news = append(news, time.Since(t0))
		convs = append(convs, c)
		if i == 0 {
			t.Logf("first session/new: %v; RSS %s", news[0], rss(p.proc.PID))
		}
	}
	t.Logf("session/new 2–20: p50 %v, max %v; RSS with 20 sessions %s", p50(news[1:]), slices.Max(news[1:]), rss(p.proc.PID))

	var prompts, overheads []time.Duration
	for i := range 20 {
		c := convs[i]
		oc.api.Say(claudetest.Text("OK"))
		mu.Lock()
		firstChunk = time.Time{}
		mu.Unlock()
		t0 := time.Now()
		if err := c.Send(t.Context(), "hi"); err != nil {
			t.Fatal(err)
		}
		var delta time.Time
		for e := range c.Events() {
			if _, ok := e.(agent.TextDelta); ok && delta.IsZero() {
				delta = time.Now()
			}
			if _, ok := e.(agent.Result); ok {
				break
			}
		}
		prompts = append(prompts, time.Since(t0))
		mu.Lock()
		overheads = append(overheads, delta.Sub(firstChunk))
		mu.Unlock()
	}
	t.Logf("prompt (Send to Result): p50 %v, max %v", p50(prompts), slices.Max(prompts))
	t.Logf("driver overhead (chunk read to TextDelta): p50 %v, max %v", p50(overheads), slices.Max(overheads))
	t.Logf("RSS after 20 prompts: %s", rss(p.proc.PID))
}

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// rss sums VmRSS over the process group pgid.
func rss(pgid int) string {
	var kb int
	members := agentproc.GroupMembers(pgid)
	for _, pid := range members {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				kb += n
			}
		}
	}
	return fmt.Sprintf("%d MiB (%d processes)", kb/1024, len(members))
}
