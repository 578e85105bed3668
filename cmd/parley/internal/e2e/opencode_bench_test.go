//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/acp"
	agentapi "github.com/parley-chat/parley/mcp/agent"
	"github.com/parley-chat/parley/mcp/agent/agenttest"
	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// BenchmarkOpenCodeOverhead measures what BenchmarkClaudeCodeOverhead
// measures, for an Agent Client Protocol agent: parley serve runs the real
// OpenCode ([agent] kind = "opencode", `opencode acp`, set up offline by
// agenttest) against modeltest's fake Messages API that answers at once,
// and a person writes in a telegramtest topic with Telegram's limits on.
//
// first-text: per message i of 20 on one session whose OpenCode process is
// warm (two first messages, not measured, started it and counted the group
// calls a turn makes up to its first text), overhead_i = first text_i −
// OpenCode_i. First text is from just before telegramtest's SendText to
// the sendMessage that first showed the answer; OpenCode_i is measured
// right after message i's turn, on a second warm OpenCode process of the
// same binary and set-up driven directly by package acp's Driver against
// its own fake API with the same answer: from Conversation.Send
// (session/prompt written) to the first TextDelta. That includes the
// driver's reading of the agent_message_chunk lines (~0.1 ms, see package
// acp), so that is not counted as parley's. The fake APIs' request times
// split both at the model into inbound (Telegram's long poll to the
// prompt's request reaching the model) and outbound (the model's answer
// to the text shown), as the Claude Code benchmark does; the pacing of the
// group's calls is kept out of the measure the same way.
//
// The reference's session has no MCP server, parley's has parley's own:
// what OpenCode does with an MCP server in its session before its model
// request counts as parley's inbound. Measured with OpenCode 1.18.33 on 2
// loaded cores, that is most of the inbound part (about 100 ms at p50):
// with the reference's session given parley's MCP server too, inbound was
// −16 ms and the overhead −7 ms at p50.
//
// sessions=20: memory for 20 sessions on one agent. Twenty topics (Telegram's
// limits off: this part measures memory, not time), each a session with
// one turn on the same OpenCode. Then agent-groups counts the process
// groups of the agent processes parley started (those whose TMPDIR is
// under this parley's data directory): it must be 1, one process for
// every session, not one each. agent-processes counts their members
// (OpenCode's launcher and its binary), agent-rss-MiB sums their VmRSS,
// and parley-heap-MiB is the Go heap in use after a collection — of the
// test process, which holds telegramtest's fake and the fake API too.
//
//	PARLEY_OPENCODE_DIR=… go test -run '^$' -bench BenchmarkOpenCodeOverhead -benchtime 1x ./cmd/parley/internal/e2e
//
// Target: overhead ≤ 300 ms at p50.
func BenchmarkOpenCodeOverhead(b *testing.B) {
	b.Run("first-text", benchOCOverheads)
	b.Run("sessions=20", benchOCSessions)
}

func benchOCOverheads(b *testing.B) {
	benchOverheads(b, func() ccRun { return benchOCOverhead(b, 20) })
}

// ocBench is parley with OpenCode as its agent (the ccBench parts that do
// not depend on the agent) and the reference OpenCode beside it.
type ocBench struct {
	*ccBench
	ref agentapi.Conversation
}

// ocConfig is parley's configuration with a as its [agent], kind opencode.
func ocConfig(tb testing.TB, srv *telegramtest.Server, forum int64, a agenttest.Agent) config.Config {
	cfg := benchConfig(tb, srv, forum)
	cfg.Agent = config.Agent{Kind: config.AgentOpenCode, Command: a.Command[0], Args: a.Command[1:],
		Workdir: a.WorkDir, Permissions: config.PermissionsAsk, MaxRunning: 4, Env: a.Env}
	return cfg
}

func benchOCOverhead(b *testing.B, messages int) ccRun {
	bn := &ocBench{ccBench: &ccBench{b: b, api: modeltest.NewMessages(b), refAPI: modeltest.NewMessages(b)}}
	bn.srv = telegramtest.NewServer(b, telegramtest.Options{RichMessages: true, Limits: true})
	bn.forum = bn.srv.NewForum("Bench")
	oc := agenttest.OpenCode(b, bn.api, agenttest.OpenCodeConfig{})
	bn.m = servetest.Serve(b, &serve.Main{Config: ocConfig(b, bn.srv, bn.forum, oc), Platforms: platforms.All()})
	servetest.AwaitStarted(b, bn.m)

	ref := agenttest.OpenCode(b, bn.refAPI, agenttest.OpenCodeConfig{})
	d := acp.New(acp.Options{Name: ref.Name, Command: ref.Command[0], Args: ref.Command[1:],
		Workdir: ref.WorkDir, Env: ref.Env, StateDir: b.TempDir(), IdleTimeout: -1})
	b.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	conv, err := d.Start(ctx, agentapi.StartRequest{Session: "reference"})
	if err != nil {
		b.Fatal(err)
	}
	bn.ref = conv
	return bn.measure(messages, bn.reference)
}

// reference runs the turn tagged tag on the reference OpenCode and
// returns when its model request arrived and when its first TextDelta
// came, both from the start of Send.
func (bn *ocBench) reference(tag string) (request, delta time.Duration) {
	b := bn.b
	_, block := bn.answer(tag)
	bn.refAPI.Say(block)
	question := "Question " + tag + "?"
	start := time.Now()
	if err := bn.ref.Send(b.Context(), question); err != nil {
		b.Fatal(err)
	}
	timeout := time.After(time.Minute)
	for {
		select {
		case e, ok := <-bn.ref.Events():
			if !ok {
				b.Fatalf("the reference OpenCode's conversation ended: %v", bn.ref.Err())
			}
			switch e := e.(type) {
			case agentapi.TextDelta:
				if delta == 0 && e.Text != "" {
					delta = time.Since(start)
				}
			case agentapi.Result:
				if delta == 0 || e.Stop != agentapi.StopEndTurn {
					b.Fatalf("the reference turn ended %+v (first text after %v)", e, delta)
				}
				return modelRequest(b, bn.refAPI, question).Sub(start), delta
			}
		case <-timeout:
			b.Fatal("the reference turn did not end within a minute")
		}
	}
}

// benchOCSessions runs 20 sessions on parley's OpenCode, one turn each,
// and reports the agent's processes and memory and parley's heap.
func benchOCSessions(b *testing.B) {
	const sessions = 20
	for range b.N {
		api := modeltest.NewMessages(b)
		srv := telegramtest.NewServer(b, telegramtest.Options{RichMessages: true})
		forum := srv.NewForum("Bench")
		oc := agenttest.OpenCode(b, api, agenttest.OpenCodeConfig{})
		cfg := ocConfig(b, srv, forum, oc)
		m := servetest.Serve(b, &serve.Main{Config: cfg, Platforms: platforms.All()})
		servetest.AwaitStarted(b, m)
		for i := range sessions {
			srv.SendText(forum, 0, ann, fmt.Sprintf("/new memory %02d", i))
			srv.Await(b, time.Minute, "the session's topic", func() bool { return len(srv.Topics(forum)) == i+1 })
			topic := srv.Topics(forum)[i].ID
			marker := fmt.Sprintf("Reply %02d.", i)
			api.Say(modeltest.Text(marker))
			srv.SendText(forum, topic, ann, fmt.Sprintf("Question %02d?", i))
			srv.Await(b, 2*time.Minute, "the answer in session "+strconv.Itoa(i), func() bool {
				for _, msg := range botMessages(srv.Messages(forum, topic)) {
					if strings.Contains(msg.Text, marker) {
						return true
					}
				}
				return false
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := m.Daemon().WaitIdle(ctx)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
		}
		ss, err := m.Daemon().Store.Sessions(context.Background())
		if err != nil || len(ss) != sessions {
			b.Fatalf("%d sessions, want %d: %v", len(ss), sessions, err)
		}
		for _, s := range ss {
			if s.Status != core.StatusIdle {
				b.Fatalf("session %s is %s after its turn", s.ID, s.Status)
			}
		}
		groups, procs, rssKB := agentProcesses(b, filepath.Join(cfg.DataDir, "agents"))
		if len(groups) != 1 {
			b.Fatalf("%d agent process groups %v for %d sessions on one agent, want 1", len(groups), groups, sessions)
		}
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(len(groups)), "agent-groups")
		b.ReportMetric(float64(procs), "agent-processes")
		b.ReportMetric(float64(rssKB)/1024, "agent-rss-MiB")
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "parley-heap-MiB")
	}
}

// agentProcesses finds the processes of the agents a parley started: those
// whose TMPDIR is under its agents' state directory dir (package acp gives
// the agent's process TMPDIR = StateDir/tmp, and its children inherit it).
// It returns their process groups, how many they are, and their VmRSS sum
// in KiB.
func agentProcesses(tb testing.TB, dir string) (groups map[int]int, procs int, rssKB int) {
	tb.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	groups = map[int]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue // gone, or another user's
		}
		ours := false
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if t, ok := bytes.CutPrefix(kv, []byte("TMPDIR=")); ok && strings.HasPrefix(string(t), dir+string(filepath.Separator)) {
				ours = true
			}
		}
		if !ours {
			continue
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		pgid, err := syscall.Getpgid(pid)
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				rssKB += n
			}
		}
		groups[pgid]++
		procs++
	}
	return groups, procs, rssKB
}
