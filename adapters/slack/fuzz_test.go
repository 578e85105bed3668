package slack

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

// FuzzRender: whatever the markdown, a payload stays within Slack's limits
// (checkLimits), its text is valid UTF-8, and the text-only second try
// fits Slack's text limit.
func FuzzRender(f *testing.F) {
	for _, s := range []string{"", "**a** <b> & c", "```\ncode\n```", strings.Repeat("é", maxMarkdown+3), "# h\n\n- [x](https://e.org)\n| a | b |\n|---|---|\n| 1 | 2 |"} {
		f.Add(s, "label", 0)
	}
	kinds := []core.MessageKind{core.KindOutput, core.KindNotice, core.KindQuestion, core.KindAssistant}
	f.Fuzz(func(t *testing.T, md, label string, k int) {
		if !utf8.ValidString(md) || !utf8.ValidString(label) {
			t.Skip()
		}
		m := core.OutMessage{Kind: kinds[(k%len(kinds)+len(kinds))%len(kinds)], Text: md}
		if m.Kind == core.KindQuestion {
			m.Buttons = []core.Button{{Label: label, Data: "Q:1"}, {Label: "No", Data: "Q:2"}}
		}
		p := render(m)
		checkLimits(t, p)
		if !utf8.ValidString(p.Text) {
			t.Errorf("fallback text is not UTF-8: %q", p.Text)
		}
		if tp := renderText(m); tp.Text == "" || len(tp.Text) > maxText || !utf8.ValidString(tp.Text) {
			t.Errorf("text-only payload of %d bytes", len(tp.Text))
		}
	})
}

// FuzzFromSlack: Slack's markup never makes the conversion panic or lose
// UTF-8 validity.
func FuzzFromSlack(f *testing.F) {
	for _, s := range []string{"<@U1> hi", "<https://a.b|c> &amp;", "<!subteam^S1|@t>", "<#C1|x>", "<>", "<|>", "&lt;&gt;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip()
		}
		if out := fromSlack(s, "UBOT", nil); !utf8.ValidString(out) {
			t.Errorf("fromSlack(%q) = %q, not UTF-8", s, out)
		}
	})
}
