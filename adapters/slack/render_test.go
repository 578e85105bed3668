package slack

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// golden compares got with testdata/name.golden, byte for byte; -update
// rewrites the file.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestRender -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs:\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

func options(labels ...string) []core.Button {
	var out []core.Button
	for i, l := range labels {
		out = append(out, core.Button{Label: l, Data: delivery.ButtonData("01JQUESTION", i+1)})
	}
	return out
}

// TestRender pins the Block Kit payloads: what chat.postMessage and
// chat.update carry for each kind of message, and the text-only second
// try. Regenerate with go test -run TestRender -update.
func TestRender(t *testing.T) {
	many := make([]string, 30)
	for i := range many {
		many[i] = "Option " + strconv.Itoa(i+1)
	}
	tests := []struct {
		name string
		m    core.OutMessage
		text bool // renderText rather than render
	}{
		{name: "assistant", m: core.OutMessage{Kind: core.KindAssistant,
			Text: "## Plan\n\n1. Read `main.go` & fix <the> bug\n2. Run **all** tests\n\n```go\nfmt.Println(\"hi\")\n```\n\nSee [docs](https://go.dev)."}},
		{name: "output_empty", m: core.OutMessage{Kind: core.KindOutput}},
		{name: "notice", m: core.OutMessage{Kind: core.KindNotice, Text: "📎 Received *report.pdf* & <notes>"}},
		{name: "notice_long", m: core.OutMessage{Kind: core.KindNotice, Text: strings.Repeat("long notice ", 300)}},
		{name: "question", m: core.OutMessage{Kind: core.KindQuestion, Text: "Deploy **now**?",
			Buttons: options("Yes", "No", strings.Repeat("a very long label ", 6))}},
		{name: "question_many", m: core.OutMessage{Kind: core.KindQuestion, Text: "Pick one", Buttons: options(many...)}},
		{name: "buttons_only", m: core.OutMessage{Kind: core.KindQuestion, Buttons: options("A", "B")}},
		{name: "text_question", text: true, m: core.OutMessage{Kind: core.KindQuestion, Text: "Deploy **now**?", Buttons: options("Yes", "<No>")}},
		{name: "text_markdown", text: true, m: core.OutMessage{Kind: core.KindAssistant, Text: "# Title\n\n- *one* & two\n- [link](https://example.com)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := render(tt.m)
			if tt.text {
				p = renderText(tt.m)
			}
			var got bytes.Buffer
			enc := json.NewEncoder(&got)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(p); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name, got.Bytes())
			checkLimits(t, p)
		})
	}
}

// checkLimits checks a payload against Slack's limits.
func checkLimits(t *testing.T, p payload) {
	t.Helper()
	if len(p.Blocks) > 50 {
		t.Errorf("%d blocks, Slack takes 50", len(p.Blocks))
	}
	if p.Text == "" || len(p.Text) > maxText {
		t.Errorf("text of %d bytes", len(p.Text))
	}
	data, _ := json.Marshal(p)
	var raw struct {
		Blocks []struct {
			Type     string `json:"type"`
			Text     any    `json:"text"`
			Elements []struct {
				ActionID string          `json:"action_id"`
				Value    string          `json:"value"`
				Text     json.RawMessage `json:"text"`
			} `json:"elements"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	markdownLen := 0
	ids := map[string]bool{}
	for _, b := range raw.Blocks {
		switch b.Type {
		case "markdown":
			markdownLen += len(b.Text.(string))
		case "actions":
			if len(b.Elements) > 25 {
				t.Errorf("%d buttons in one actions block", len(b.Elements))
			}
			for _, e := range b.Elements {
				var label struct{ Text string }
				_ = json.Unmarshal(e.Text, &label)
				if len(e.Value) > 2000 || len(e.ActionID) > 255 || ids[e.ActionID] || utf8.RuneCountInString(label.Text) > 75 {
					t.Errorf("button %+v breaks a limit or repeats an action_id", e)
				}
				ids[e.ActionID] = true
			}
		}
	}
	if markdownLen > maxMarkdown {
		t.Errorf("markdown blocks of %d bytes", markdownLen)
	}
}

func TestRenderFitsLongMarkdown(t *testing.T) {
	p := render(core.OutMessage{Kind: core.KindAssistant, Text: strings.Repeat("é", maxMarkdown)})
	checkLimits(t, p)
	if len(p.Text) > maxFallback {
		t.Errorf("fallback text of %d bytes", len(p.Text))
	}
}

func TestStatusTexts(t *testing.T) {
	tests := []struct{ got, want string }{
		{rootText(core.StatusView{Title: "Fix the tests", Status: core.StatusWorking}), "⏳ *Fix the tests*"},
		{rootText(core.StatusView{Title: "a < b & c", Status: core.StatusIdle}), "💬 *a &lt; b &amp; c*"},
		{rootText(core.StatusView{Title: "2*3", Status: core.StatusClosed}), "✅ 2*3"},
		{rootText(core.StatusView{Title: "  many\n spaces ", Status: core.StatusWaiting}), "❓ *many spaces*"},
		{headerText("Renamed"), "🏷 *Renamed*"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	long := rootText(core.StatusView{Title: strings.Repeat("word ", 100), Status: core.StatusIdle})
	if len(long) > maxTitle+20 || !strings.HasSuffix(long, "…*") {
		t.Errorf("a long title is shown as %q", long)
	}
	for st := range reactions {
		if reactionFor(st) == "" {
			t.Errorf("no reaction for %s", st)
		}
	}
	if reactionFor("bogus") != reactions[core.StatusIdle] {
		t.Error("an unknown status should show as idle")
	}
}
