package claudecode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// parseFile parses a recorded stdout of Claude Code 2.1.328, as the
// process does.
func parseFile(t *testing.T, name string) ([]Event, []parsed) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	p := newParser()
	var events []Event
	var all []parsed
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		got, err := p.parse(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		events = append(events, got.events...)
		all = append(all, got)
	}
	return events, all
}

func formatEvents(events []Event) string {
	var b strings.Builder
	for _, e := range events {
		j, _ := json.Marshal(e)
		fmt.Fprintf(&b, "%T %s\n", e, j)
	}
	return b.String()
}

// TestParseGolden parses every recorded sample and compares the events
// with testdata/NAME.golden (go test -run TestParseGolden -update rewrites them).
func TestParseGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no samples")
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			events, _ := parseFile(t, name)
			got := formatEvents(events)
			golden := filepath.Join("testdata", strings.TrimSuffix(name, ".jsonl")+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("events differ from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

func only[T Event](events []Event) []T {
	var out []T
	for _, e := range events {
		if v, ok := e.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func TestParseStreamedText(t *testing.T) {
	events, _ := parseFile(t, "hello.jsonl")
	var deltas strings.Builder
	for _, d := range only[TextDelta](events) {
		if d.Block != 0 {
			t.Errorf("delta in block %d, want 0", d.Block)
		}
		deltas.WriteString(d.Text)
	}
	texts := only[Text](events)
	if len(texts) != 1 || texts[0].Text != "Hello there!" || deltas.String() != texts[0].Text {
		t.Fatalf("texts %+v, deltas %q", texts, deltas.String())
	}
	inits := only[Init](events)
	res := only[Result](events)
	if len(inits) != 1 || inits[0].Model == "" || len(res) != 1 || res[0].Subtype != "success" ||
		res[0].Text != "Hello there!" || res[0].SessionID != inits[0].SessionID {
		t.Fatalf("init %+v result %+v", inits, res)
	}
}

func TestParsePermissionAllowed(t *testing.T) {
	events, all := parseFile(t, "allow.jsonl")
	uses := only[ToolUse](events)
	reqs := only[PermissionRequest](events)
	if len(uses) != 1 || uses[0].Name != "Bash" || len(reqs) != 1 {
		t.Fatalf("uses %+v reqs %+v", uses, reqs)
	}
	r := reqs[0]
	if r.ToolName != "Bash" || r.ToolUseID != uses[0].ID || r.Description != "Create f" || r.RequestID == "" ||
		!strings.Contains(string(r.Input), `"touch f"`) {
		t.Fatalf("request %+v", r)
	}
	var pending int
	for _, p := range all {
		if p.request != nil && p.request.Subtype == "can_use_tool" && p.request.ID == r.RequestID {
			pending++
		}
	}
	if pending != 1 {
		t.Fatalf("the process would not know the request's input: %d", pending)
	}
	results := only[ToolResult](events)
	if len(results) != 1 || results[0].IsError || results[0].ExitCode == nil || *results[0].ExitCode != 0 ||
		results[0].ToolUseID != uses[0].ID {
		t.Fatalf("result %+v", results)
	}
}

func TestParseBashExitCode(t *testing.T) {
	events, _ := parseFile(t, "exit3.jsonl")
	results := only[ToolResult](events)
	if len(results) != 1 {
		t.Fatalf("results %+v", results)
	}
	r := results[0]
	if !r.IsError || r.ExitCode == nil || *r.ExitCode != 3 || r.Stderr != "out\nerr" || r.Stdout != "" {
		t.Fatalf("result %+v (exit %v)", r, r.ExitCode)
	}
}

func TestParseDenials(t *testing.T) {
	events, _ := parseFile(t, "deny.jsonl")
	r := only[ToolResult](events)
	if len(r) != 1 || !r[0].IsError || r[0].ExitCode != nil || r[0].Stderr != "The person denied this call" {
		t.Fatalf("denied: %+v", r)
	}
	if res := only[Result](events); len(res) != 1 || res[0].Subtype != "success" {
		t.Fatalf("a denial that continues ends the turn normally: %+v", res)
	}

	events, _ = parseFile(t, "abort.jsonl")
	res := only[Result](events)
	if len(res) != 1 || !res[0].IsError || res[0].TerminalReason != "aborted_tools" {
		t.Fatalf("aborted: %+v", res)
	}
}

func TestParseInterrupt(t *testing.T) {
	events, all := parseFile(t, "interrupt.jsonl")
	var acks []string
	for _, p := range all {
		if p.response != nil {
			acks = append(acks, p.response.ID+"/"+p.response.Error)
		}
	}
	if len(acks) != 1 || acks[0] != "int-1/" {
		t.Fatalf("acks %q", acks)
	}
	res := only[Result](events)
	if len(res) != 1 || res[0].TerminalReason != "aborted_streaming" || !res[0].IsError {
		t.Fatalf("result %+v", res)
	}
}

func TestParseFailures(t *testing.T) {
	_, all := parseFile(t, "resume_unknown.jsonl")
	if len(all) != 1 || !all[0].noConversation {
		t.Fatalf("resume of an unknown id: %+v", all)
	}
	auth := func(name string) string {
		_, all := parseFile(t, name)
		for _, p := range all {
			if p.auth != "" {
				return p.auth
			}
		}
		return ""
	}
	if got := auth("api_retry_401.jsonl"); got != "api_key" {
		t.Errorf("401: %q", got)
	}
	if got := auth("not_logged_in.jsonl"); got != "login" {
		t.Errorf("not logged in: %q", got)
	}
	if got := auth("api_retry_unreachable.jsonl"); got != "" {
		t.Errorf("an unreachable API is retried, not a credentials problem: %q", got)
	}
	events, _ := parseFile(t, "api_retry_unreachable.jsonl")
	if r := only[APIRetry](events); len(r) != 1 || r[0].Status != 0 || r[0].Delay.Milliseconds() != 500 || r[0].Attempt != 1 {
		t.Fatalf("retry %+v", r)
	}
}

// TestParseRobust covers what the samples do not: key order, unknown
// lines, text blocks of a turn numbered across messages, a long line.
func TestParseRobust(t *testing.T) {
	p := newParser()
	lines := []string{
		`not json`,
		`{"type":"something_new","x":1}`,
		`{"session_id":"s","subtype":"init","type":"system","model":"m"}`,
		`{"event":{"index":0,"content_block":{"type":"text","text":""},"type":"content_block_start"},"type":"stream_event","parent_tool_use_id":null}`,
		`{"type":"stream_event","parent_tool_use_id":null,"event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}}`,
		`{"type":"assistant","parent_tool_use_id":null,"message":{"content":[{"type":"text","text":"a"}]}}`,
		`{"type":"assistant","parent_tool_use_id":null,"message":{"content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/x"}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"line1"}]}]},"tool_use_result":{"type":"text","file":{}}}`,
		`{"type":"stream_event","parent_tool_use_id":null,"event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}}`,
		`{"type":"stream_event","parent_tool_use_id":null,"event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}}}`,
		`{"type":"assistant","parent_tool_use_id":"sub","message":{"content":[{"type":"text","text":"sub-agent text"}]}}`,
		`{"type":"assistant","parent_tool_use_id":null,"message":{"content":[{"type":"text","text":"b"}]}}`,
		`{"type":"result","subtype":"success","result":"` + strings.Repeat("x", 5<<20) + `"}`,
	}
	var events []Event
	errs := 0
	for _, l := range lines {
		got, err := p.parse([]byte(l))
		if err != nil {
			errs++
		}
		events = append(events, got.events...)
	}
	if errs != 1 {
		t.Errorf("%d lines failed to parse, want only the non-JSON one", errs)
	}
	want := "claudecode.Init claudecode.TextDelta claudecode.Text claudecode.ToolUse claudecode.ToolResult claudecode.TextDelta claudecode.Text claudecode.Result"
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, fmt.Sprintf("%T", e))
	}
	if strings.Join(kinds, " ") != want {
		t.Fatalf("events %s", strings.Join(kinds, " "))
	}
	if d := events[5].(TextDelta); d.Block != 1 {
		t.Errorf("second text block numbered %d", d.Block)
	}
	if tx := events[6].(Text); tx.Block != 1 || tx.Text != "b" {
		t.Errorf("second text %+v", tx)
	}
	if r := events[4].(ToolResult); r.Stdout != "line1" || r.ExitCode != nil {
		t.Errorf("Read result %+v", r)
	}
	if r := events[7].(Result); len(r.Text) != 5<<20 {
		t.Errorf("long result cut to %d", len(r.Text))
	}
}
