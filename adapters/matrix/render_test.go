package matrix

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

func TestContent(t *testing.T) {
	c := content(core.OutMessage{Text: "**bold** and `<code>` & more", Kind: core.KindAssistant})
	if c.MsgType != "m.text" || c.Format != "org.matrix.custom.html" {
		t.Errorf("msgtype %q format %q", c.MsgType, c.Format)
	}
	if !strings.Contains(c.FormattedBody, "<strong>bold</strong>") || !strings.Contains(c.FormattedBody, "<code>&lt;code&gt;</code>") {
		t.Errorf("formatted_body %q: bold or escaped code missing", c.FormattedBody)
	}
	if strings.Contains(c.Body, "**") || !strings.Contains(c.Body, "<code>") {
		t.Errorf("body %q is not the plain text", c.Body)
	}
	if s := content(core.OutMessage{Text: "working", Silent: true}); s.MsgType != "m.notice" {
		t.Errorf("silent message is %q, want m.notice (clients do not notify)", s.MsgType)
	}
	b, err := encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `\u003c`) {
		t.Errorf("content escapes HTML in JSON, wasting bytes: %s", b)
	}
	if !strings.Contains(string(b), `"m.mentions":{}`) {
		t.Errorf("content pings by default: %s", b)
	}
}

func TestQuestionContent(t *testing.T) {
	m := core.OutMessage{Kind: core.KindQuestion, Text: "Which one?",
		Buttons: []core.Button{{Label: "Red", Data: delivery.ButtonData("q1", 1)}, {Label: "Blue", Data: delivery.ButtonData("q1", 2)}}}
	c := content(m)
	for _, want := range []string{"1️⃣ Red", "2️⃣ Blue", "react with its number"} {
		if !strings.Contains(c.Body, want) {
			t.Errorf("body %q lacks %q", c.Body, want)
		}
	}
	b, _ := encode(c)
	var back inContent
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Buttons) != 2 || back.Buttons[1].Label != "Blue" {
		t.Fatalf("buttons do not survive the event: %+v", back.Buttons)
	}
	if q, opt, ok := delivery.ParseButtonData(back.Buttons[1].Data); !ok || q != "q1" || opt != 2 {
		t.Errorf("button data → %q %d %v", q, opt, ok)
	}
}

func TestEditContent(t *testing.T) {
	e := editOf("$ev", content(core.OutMessage{Text: "new *text*"}))
	b, err := encode(e)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Body       string `json:"body"`
		NewContent struct {
			Body          string `json:"body"`
			FormattedBody string `json:"formatted_body"`
		} `json:"m.new_content"`
		RelatesTo relatesTo `json:"m.relates_to"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.RelatesTo != (relatesTo{RelType: "m.replace", EventID: "$ev"}) || got.Body != "* new text" ||
		got.NewContent.Body != "new text" || !strings.Contains(got.NewContent.FormattedBody, "<em>text</em>") {
		t.Errorf("edit = %s", b)
	}
}

// TestEncodeLimit: the largest message the adapter declares fits one
// event even in its edit, whose fallback doubles the text, with the
// characters JSON escapes most (quotes, backslashes, newlines).
func TestEncodeLimit(t *testing.T) {
	a := &Adapter{}
	for _, unit := range []string{"a", "\"", "\\", "\n\n", "<", "&", "é", "`x`"} {
		md := strings.Repeat(unit, maxLength)
		for a.RenderedLength(md) > maxLength {
			md = md[:len(md)*9/10]
		}
		send, err := encode(content(core.OutMessage{Text: md}))
		if err != nil || len(send) > maxContent {
			t.Errorf("%q: send is %d bytes, %v", unit, len(send), err)
		}
		edit, err := encode(editOf("$ev", content(core.OutMessage{Text: md})))
		if err != nil || len(edit) > maxContent {
			t.Errorf("%q: edit is %d bytes, %v", unit, len(edit), err)
		}
	}
}

func TestTxnIDStable(t *testing.T) {
	if txnID("k1") != txnID("k1") || txnID("k1") == txnID("k2") {
		t.Error("transaction ids are not a function of the key")
	}
	if got := txnID("k1"); len(got) > 64 || strings.ContainsAny(got, "/ ") {
		t.Errorf("txn id %q is not path-safe", got)
	}
}

func TestEmojiNumber(t *testing.T) {
	for i, e := range numberEmoji {
		if got := emojiNumber(e); got != i+1 {
			t.Errorf("%q → %d, want %d", e, got, i+1)
		}
	}
	if got := emojiNumber("2\u20e3"); got != 2 {
		t.Errorf("keycap without variation selector → %d, want 2", got)
	}
	if emojiNumber("👍") != 0 {
		t.Error("👍 counted as an option")
	}
}

func TestWithQuote(t *testing.T) {
	if got := withQuote("> <@a:x> older\n\nfirst line\nsecond", "yes"); got != "> first line\n\nyes" {
		t.Errorf("withQuote = %q", got)
	}
	if got := withQuote("", "yes"); got != "yes" {
		t.Errorf("withQuote of nothing = %q", got)
	}
}

func TestRoomName(t *testing.T) {
	if got := roomName(core.StatusView{Title: "Fix  the\nbuild", Status: core.StatusWorking}); got != "⏳ Fix the build" {
		t.Errorf("roomName = %q", got)
	}
	long := roomName(core.StatusView{Title: strings.Repeat("é", 300)})
	if len(long) > maxRoomName || !strings.HasSuffix(long, "…") {
		t.Errorf("long name is %d bytes: %q", len(long), long)
	}
}
