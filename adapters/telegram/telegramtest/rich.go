package telegramtest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/go-telegram/bot/models"
)

// maxRich is the length limit of a rich message's text (Telegram documents
// 32,768 characters; counted here in UTF-16 units, the stricter reading).
const maxRich = 32768

// richInput is rich_message as it arrives. The library's InputRichMessage
// holds interfaces that do not decode, so the fake reads what it needs.
type richInput struct {
	Markdown string          `json:"markdown,omitempty"`
	HTML     string          `json:"html,omitempty"`
	Blocks   json.RawMessage `json:"blocks,omitempty"`
	Media    json.RawMessage `json:"media,omitempty"`
	IsRTL    bool            `json:"is_rtl,omitempty"`
}

// visible is the text a reader sees, approximated: Telegram renders rich
// messages itself, and the fake only needs the amount of text and its words.
func (r richInput) visible() (string, error) {
	switch {
	case r.HTML != "":
		return richHTMLVisible(r.HTML)
	case r.Markdown != "":
		return markdownVisible(r.Markdown), nil
	case len(r.Blocks) > 0 && string(r.Blocks) != "null" && string(r.Blocks) != "[]":
		return "[blocks]", nil
	}
	return "", nil
}

// wire is the RichMessage a sent rich message carries in answers and
// updates: one paragraph of its visible text (Telegram would return the
// parsed blocks).
func (r richInput) wire(visible string) *models.RichMessage {
	return &models.RichMessage{IsRTL: r.IsRTL, Blocks: []models.RichBlock{{
		Type:               models.RichBlockTypeParagraph,
		RichBlockParagraph: &models.RichBlockParagraph{Text: models.RichText{PlainText: visible}},
	}}}
}

var (
	mdFence     = regexp.MustCompile("^\\s*(```|~~~)")
	mdHeading   = regexp.MustCompile(`^\s{0,3}#{1,6}\s+`)
	mdQuote     = regexp.MustCompile(`^\s*(>\s?)+`)
	mdBullet    = regexp.MustCompile(`^\s*([-*+]|\d+[.)])\s+(\[[ xX]\]\s+)?`)
	mdTableSep  = regexp.MustCompile(`^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$`)
	mdRule      = regexp.MustCompile(`^\s*([-*_]\s*){3,}$`)
	mdImage     = regexp.MustCompile(`!\[([^\]]*)\]\([^)]*\)`)
	mdLink      = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	mdEmphasis  = regexp.MustCompile("\\*\\*|__|~~|\\*|`")
	mdHTMLBreak = regexp.MustCompile(`(?i)<br\s*/?>`)
)

// markdownVisible strips markdown syntax from md: fences, heading marks,
// list bullets, quote marks, table pipes and rules, emphasis markers, link
// targets. Single underscores stay (they are more often part of a name).
func markdownVisible(md string) string {
	var out []string
	inFence := false
	for _, line := range strings.Split(md, "\n") {
		if mdFence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			out = append(out, line)
			continue
		}
		if mdTableSep.MatchString(line) && strings.Contains(line, "-") && strings.Contains(line, "|") {
			continue
		}
		if mdRule.MatchString(line) {
			continue
		}
		line = mdHeading.ReplaceAllString(line, "")
		line = mdQuote.ReplaceAllString(line, "")
		line = mdBullet.ReplaceAllString(line, "")
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "|") || strings.HasSuffix(t, "|") {
			cells := strings.Split(strings.Trim(t, "|"), "|")
			for k := range cells {
				cells[k] = strings.TrimSpace(cells[k])
			}
			line = strings.Join(cells, " ")
		}
		line = mdImage.ReplaceAllString(line, "$1")
		line = mdLink.ReplaceAllString(line, "$1")
		line = mdEmphasis.ReplaceAllString(line, "")
		line = mdHTMLBreak.ReplaceAllString(line, "\n")
		line = strings.ReplaceAll(line, `\`, "")
		out = append(out, line)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// richHTMLVisible checks that rich HTML is well formed (every tag closed, in
// order; void elements excepted) and returns its text with entities
// decoded. Rich HTML allows far more tags than the HTML parse mode
// (headings, lists, tables, details), so tag names are not checked.
func richHTMLVisible(src string) (string, error) {
	var out strings.Builder
	var stack []string
	n := len(src)
	for i := 0; i < n; {
		c := src[i]
		if c == '&' {
			if r, next, ok := decodeEntity(src, i); ok {
				out.WriteRune(r)
				i = next
				continue
			}
		}
		if c != '<' {
			r, size := utf8.DecodeRuneInString(src[i:])
			out.WriteRune(r)
			i += size
			continue
		}
		begin := i
		end := strings.IndexByte(src[i:], '>')
		if end < 0 {
			return "", fmt.Errorf("Unclosed start tag at byte offset %d", begin)
		}
		tag := src[i+1 : i+end]
		i += end + 1
		if strings.HasPrefix(tag, "!--") {
			continue
		}
		if name, ok := strings.CutPrefix(tag, "/"); ok {
			name = strings.ToLower(strings.TrimSpace(name))
			if len(stack) == 0 {
				return "", fmt.Errorf("Unexpected end tag at byte offset %d", begin)
			}
			if top := stack[len(stack)-1]; name != top {
				return "", fmt.Errorf("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", begin, top, name)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		fields := strings.FieldsFunc(tag, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '/' })
		if len(fields) == 0 || strings.HasPrefix(tag, " ") {
			return "", fmt.Errorf("Unsupported start tag \"\" at byte offset %d", begin)
		}
		name := strings.ToLower(fields[0])
		switch name {
		case "br":
			out.WriteByte('\n')
			continue
		case "hr", "img", "wbr", "col":
			continue
		}
		if strings.HasSuffix(tag, "/") {
			continue
		}
		stack = append(stack, name)
	}
	if len(stack) > 0 {
		return "", fmt.Errorf("Can't find end tag corresponding to start tag \"%s\"", stack[len(stack)-1])
	}
	return strings.TrimSpace(out.String()), nil
}
