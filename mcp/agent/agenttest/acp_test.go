package agenttest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/agent/agenttest"
)

// This file is a minimal ACP client, written for the preflight tests and
// nothing else: JSON-RPC 2.0, one object a line on the agent's stdin and
// stdout (https://agentclientprotocol.com/protocol/overview). It is no
// model for the driver: it answers what the tests script and fails the
// test on anything unexpected.

// wait bounds every wait for the agent: a hang fails the test instead of
// stalling the run (OpenCode's start takes seconds on a loaded machine).
const wait = 3 * time.Minute

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

type rpcMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// acpConn is one agent process and its ACP connection.
type acpConn struct {
	t      *testing.T
	agent  agenttest.Agent
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	in     chan rpcMsg // every message the agent sent, in order; closed at its EOF
	stderr *tail
	next   int
}

// tail keeps the end of the agent's stderr for the test's log.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 16<<10 {
		t.b = t.b[len(t.b)-16<<10:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// startAgent starts a's ACP command in its own process group, killed with
// the test.
func startAgent(t *testing.T, a agenttest.Agent) *acpConn {
	t.Helper()
	c := &acpConn{t: t, agent: a, in: make(chan rpcMsg, 256), stderr: &tail{}}
	c.cmd = exec.Command(a.Command[0], a.Command[1:]...)
	c.cmd.Env, c.cmd.Dir, c.cmd.Stderr = a.Env, a.WorkDir, c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := c.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdin = stdin
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", a.Name, err)
	}
	pgid := c.cmd.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(-pgid, syscall.SIGKILL)
		c.cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", a.Name, c.stderr)
		}
	})
	go func() {
		defer close(c.in)
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				var m rpcMsg
				if jerr := json.Unmarshal(line, &m); jerr != nil {
					t.Errorf("%s wrote a line that is not JSON: %q", a.Name, line)
				} else {
					c.in <- m
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

func (c *acpConn) write(m any) {
	c.t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("write to %s: %v", c.agent.Name, err)
	}
}

// receive returns the agent's next message.
func (c *acpConn) receive() rpcMsg {
	c.t.Helper()
	select {
	case m, ok := <-c.in:
		if !ok {
			c.t.Fatalf("%s closed its stdout", c.agent.Name)
		}
		return m
	case <-time.After(wait):
		c.t.Fatalf("%s said nothing for %v", c.agent.Name, wait)
	}
	return rpcMsg{}
}

// call sends a request and returns its answer, passing every message that
// comes before it to on (which may answer requests).
func (c *acpConn) call(method string, params any, on func(rpcMsg)) (json.RawMessage, *rpcError) {
	c.t.Helper()
	c.next++
	id := strconv.Itoa(c.next)
	c.write(map[string]any{"jsonrpc": "2.0", "id": c.next, "method": method, "params": params})
	for {
		m := c.receive()
		if m.Method == "" && string(m.ID) == id {
			return m.Result, m.Error
		}
		if on == nil {
			c.t.Fatalf("%s sent %s during %s, unexpected", c.agent.Name, m.Method, method)
		}
		on(m)
	}
}

// must is call for a request that must succeed.
func (c *acpConn) must(method string, params any, on func(rpcMsg)) json.RawMessage {
	c.t.Helper()
	res, err := c.call(method, params, on)
	if err != nil {
		c.t.Fatalf("%s: %s answered error %d %s %s", c.agent.Name, method, err.Code, err.Message, err.Data)
	}
	return res
}

func (c *acpConn) notify(method string, params any) {
	c.t.Helper()
	c.write(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

func (c *acpConn) respond(id json.RawMessage, result any) {
	c.t.Helper()
	c.write(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// rss returns the resident memory of the agent's process group, in MiB
// (codex-acp is a Node.js launcher and its native child; OpenCode one
// process).
func (c *acpConn) rss() int {
	pgid := c.cmd.Process.Pid
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	kib := 0
	for _, d := range dirs {
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// pgrp is the 3rd field after the parenthesised command name.
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		f := strings.Fields(string(rest))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		status, _ := os.ReadFile(filepath.Join(d, "status"))
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				kib += n
			}
		}
	}
	return kib / 1024
}

// update is one session/update's update, with the fields the tests read.
type update struct {
	SessionUpdate string          `json:"sessionUpdate"`
	Content       json.RawMessage `json:"content"`
	ToolCallID    string          `json:"toolCallId"`
	Title         string          `json:"title"`
	Kind          string          `json:"kind"`
	Status        string          `json:"status"`
	RawInput      json.RawMessage `json:"rawInput"`
	RawOutput     json.RawMessage `json:"rawOutput"`
	raw           json.RawMessage
}

// text is an agent_message_chunk's (or user_message_chunk's) text.
func (u update) text() string {
	var c struct{ Type, Text string }
	if json.Unmarshal(u.Content, &c) != nil || c.Type != "text" {
		return ""
	}
	return c.Text
}

// contentText is a tool call's content flattened: the text of its
// content blocks.
func (u update) contentText() string {
	var blocks []struct {
		Type    string
		Content struct{ Type, Text string }
	}
	json.Unmarshal(u.Content, &blocks)
	var s []string
	for _, b := range blocks {
		s = append(s, b.Content.Text)
	}
	return strings.Join(s, "\n")
}

// permission is a session/request_permission request.
type permission struct {
	id json.RawMessage
	// at is how many of the turn's updates came before it.
	at       int
	ToolCall update `json:"toolCall"`
	Options  []struct {
		OptionID string `json:"optionId"`
		Kind     string `json:"kind"`
		Name     string `json:"name"`
	} `json:"options"`
}

// option returns the id of the option of kind, failing the test when the
// agent offers none.
func (p permission) option(t *testing.T, kind string) string {
	t.Helper()
	for _, o := range p.Options {
		if o.Kind == kind {
			return o.OptionID
		}
	}
	t.Fatalf("no %s option in %+v", kind, p.Options)
	return ""
}

// turn is what one session/prompt (or session/load) brought.
type turn struct {
	updates []update
	perms   []permission
	stop    string
	took    time.Duration
}

// text is the turn's agent_message_chunks, joined.
func (tr turn) text() string {
	var b strings.Builder
	for _, u := range tr.updates {
		if u.SessionUpdate == "agent_message_chunk" {
			b.WriteString(u.text())
		}
	}
	return b.String()
}

// kinds lists the turn's updates as sessionUpdate[:status], for the log.
func (tr turn) kinds() string {
	var s []string
	for _, u := range tr.updates {
		k := u.SessionUpdate
		if u.Status != "" {
			k += ":" + u.Status
		}
		s = append(s, k)
	}
	return strings.Join(s, " ")
}

// tool returns the turn's updates of tool call id, in order.
func (tr turn) tool(id string) []update {
	var out []update
	for _, u := range tr.updates {
		if u.ToolCallID == id {
			out = append(out, u)
		}
	}
	return out
}

// collect returns an on for call that records session updates of sid (of
// any session when sid is "") into tr and answers permission requests with answer's option id ("" answers
// cancelled); also, when it is set, calls each(update) as it comes.
func (c *acpConn) collect(sid string, tr *turn, answer func(permission) string, each func(update)) func(rpcMsg) {
	return func(m rpcMsg) {
		c.t.Helper()
		switch m.Method {
		case "session/update":
			var p struct {
				SessionID string          `json:"sessionId"`
				Update    json.RawMessage `json:"update"`
			}
			var u update
			if json.Unmarshal(m.Params, &p) != nil || json.Unmarshal(p.Update, &u) != nil || sid != "" && p.SessionID != sid {
				c.t.Fatalf("%s: session/update %s", c.agent.Name, m.Params)
			}
			u.raw = p.Update
			tr.updates = append(tr.updates, u)
			if each != nil {
				each(u)
			}
		case "session/request_permission":
			var p permission
			var raw struct {
				ToolCall json.RawMessage `json:"toolCall"`
			}
			if err := errors.Join(json.Unmarshal(m.Params, &p), json.Unmarshal(m.Params, &raw)); err != nil {
				c.t.Fatalf("%s: request_permission %s: %v", c.agent.Name, m.Params, err)
			}
			p.id, p.at, p.ToolCall.raw = m.ID, len(tr.updates), raw.ToolCall
			tr.perms = append(tr.perms, p)
			if answer == nil {
				c.t.Fatalf("%s asked permission unexpectedly: %s", c.agent.Name, m.Params)
			}
			if opt := answer(p); opt != "" {
				c.respond(m.ID, map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": opt}})
			} else {
				c.respond(m.ID, map[string]any{"outcome": map[string]string{"outcome": "cancelled"}})
			}
		default:
			c.t.Fatalf("%s sent %s %s, unexpected", c.agent.Name, m.Method, m.Params)
		}
	}
}

// prompt runs one turn of text in session sid.
func (c *acpConn) prompt(sid, text string, answer func(permission) string, each func(update)) turn {
	c.t.Helper()
	var tr turn
	start := time.Now()
	res := c.must("session/prompt", map[string]any{
		"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": text}},
	}, c.collect(sid, &tr, answer, each))
	tr.took = time.Since(start)
	var r struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		c.t.Fatalf("%s: prompt result %s", c.agent.Name, res)
	}
	tr.stop = r.StopReason
	c.t.Logf("%s turn %q: %v, stop %s, updates: %s", c.agent.Name, text, tr.took.Round(time.Millisecond), tr.stop, tr.kinds())
	return tr
}

// allowOnce answers a permission request with its allow_once option.
func allowOnce(t *testing.T) func(permission) string {
	return func(p permission) string { return p.option(t, "allow_once") }
}

// rejectOnce answers a permission request with its reject_once option.
func rejectOnce(t *testing.T) func(permission) string {
	return func(p permission) string { return p.option(t, "reject_once") }
}
