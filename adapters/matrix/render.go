package matrix

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parley-chat/parley/adapters/markdown"
	"github.com/parley-chat/parley/core"
)

// maxContent bounds the JSON of one event's content. A homeserver refuses
// events over 65,536 bytes, envelope included (sender, room, hashes,
// signatures, auth and previous events: well under 4 KiB); the content is
// sent without HTML escapes, so its size here is what the homeserver
// counts.
const maxContent = 60000

// Content keys of parley's own. A question carries its buttons' data, so a
// reply or a reaction to it is answered from the event itself, after a
// restart too, without local state.
const keyButtons = "org.parley.buttons"

// numberEmoji are the reactions that answer options 1 to 10.
var numberEmoji = []string{"1️⃣", "2️⃣", "3️⃣", "4️⃣", "5️⃣", "6️⃣", "7️⃣", "8️⃣", "9️⃣", "🔟"}

// message is an m.room.message content as parley sends it.
type message struct {
	MsgType       string     `json:"msgtype"`
	Body          string     `json:"body"`
	Format        string     `json:"format,omitempty"`
	FormattedBody string     `json:"formatted_body,omitempty"`
	NewContent    *message   `json:"m.new_content,omitempty"`
	RelatesTo     *relatesTo `json:"m.relates_to,omitempty"`
	Buttons       []button   `json:"org.parley.buttons,omitempty"`
	Mentions      *mentions  `json:"m.mentions,omitempty"`
}

// button is one option of a question, as the question's event carries it.
type button struct {
	Data  string `json:"data"`
	Label string `json:"label"`
}

type relatesTo struct {
	RelType string `json:"rel_type"`
	EventID string `json:"event_id"`
}

// mentions is always sent empty: nothing the agent writes pings anyone by
// accident (intentional mentions, MSC3952).
type mentions struct{}

// content renders m as a message: the plain body and the HTML body of the
// same markdown, a question's options as a numbered list with their
// reaction emoji, m.notice for silent messages (clients do not notify for
// notices), m.text for the rest.
func content(m core.OutMessage) message {
	text := m.Text
	var buttons []button
	if len(m.Buttons) > 0 {
		var b strings.Builder
		b.WriteString(text)
		b.WriteString("\n\n")
		for i, btn := range m.Buttons {
			if i < len(numberEmoji) {
				fmt.Fprintf(&b, "%s %s  \n", numberEmoji[i], btn.Label)
			} else {
				fmt.Fprintf(&b, "%d. %s  \n", i+1, btn.Label)
			}
			buttons = append(buttons, button{Data: btn.Data, Label: btn.Label})
		}
		b.WriteString("\n*Reply to this message with the number or the option's text, or react with its number.*")
		text = b.String()
	}
	body, html := markdown.Matrix(text)
	if body == "" {
		body = strings.TrimSpace(text)
	}
	msg := message{MsgType: "m.text", Body: body, Buttons: buttons, Mentions: &mentions{}}
	if m.Silent {
		msg.MsgType = "m.notice"
	}
	if html != "" {
		msg.Format, msg.FormattedBody = "org.matrix.custom.html", html
	}
	return msg
}

// encode marshals c without HTML escapes (they would multiply the size of
// every < and & in the body), within maxContent: when c is too large, the
// formatted body goes first (the plain body says the same), then an
// edit's fallback is shortened; what still does not fit is refused for
// good.
func encode(c message) ([]byte, error) {
	b, err := marshal(c)
	if err != nil || len(b) <= maxContent {
		return b, err
	}
	if c.NewContent != nil {
		// An edit's fallback body is for clients without edits: its start
		// is enough.
		c.Body = shorten(c.Body, 1000)
		c.Format, c.FormattedBody = "", ""
		if b, err = marshal(c); err != nil || len(b) <= maxContent {
			return b, err
		}
		nc := *c.NewContent
		nc.Format, nc.FormattedBody = "", ""
		c.NewContent = &nc
	} else {
		c.Format, c.FormattedBody = "", ""
	}
	if b, err = marshal(c); err != nil || len(b) <= maxContent {
		return b, err
	}
	return nil, core.Permanent(fmt.Errorf("matrix: the message is %d bytes as an event, more than %d: %w", len(b), maxContent, errTooLarge))
}

var errTooLarge = errors.New("event too large")

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// editOf is the m.replace of event target with c: the new content, and a
// fallback body marked with "* " as clients send it.
func editOf(target string, c message) message {
	nc := c
	nc.Mentions = nil
	return message{MsgType: c.MsgType, Body: "* " + c.Body, Format: c.Format, FormattedBody: prefixHTML(c.FormattedBody),
		NewContent: &nc, RelatesTo: &relatesTo{RelType: "m.replace", EventID: target}, Mentions: &mentions{}}
}

func prefixHTML(h string) string {
	if h == "" {
		return ""
	}
	return "* " + h
}

// txnID is the transaction id of a logical send with key: the same key
// gives the same id, so the homeserver answers a repeated send (a retry
// after a timeout, a replay after a crash) with the event it already made
// instead of a second one.
func txnID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "parley." + hex.EncodeToString(sum[:16])
}

// shorten cuts s to at most n bytes on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// RenderedLength implements core.Measurer: the bytes of the longer of the
// plain body and the HTML body. An event carries both, so MaxLength bounds
// each of them and the pair is at most twice it; counting the longer one
// keeps the measure close to the markdown's own length (the HTML of prose
// is its text plus a few tags), which is what core's splitting and the
// conformance suite's sizing assume.
func (a *Adapter) RenderedLength(md string) int {
	body, html := markdown.Matrix(md)
	return max(len(body), len(html))
}
