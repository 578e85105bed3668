package markdown

import "strings"

var (
	textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
)

// escapeText escapes &, < and >: enough for HTML text, and what Slack
// asks of mrkdwn.
func escapeText(s string) string { return textEscaper.Replace(s) }

// escapeAttr escapes text for a double-quoted HTML attribute.
func escapeAttr(s string) string { return attrEscaper.Replace(s) }

// ValidLanguage reports whether lang, a code fence's first word, can name
// the block's language in markup: the names people write ("go", "c++",
// "objective-c", "f#"), and nothing that needs escaping.
func ValidLanguage(lang string) bool {
	if lang == "" || len(lang) > 32 {
		return false
	}
	for i := 0; i < len(lang); i++ {
		c := lang[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '+' || c == '#' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}
