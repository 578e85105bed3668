package markdown

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Validators of each dialect's output, strict about what the walk writes:
// they accept less than the platforms do.

// validate checks out, a rendering in d, for what d's platform accepts.
func validate(d Dialect, out string) error {
	if !utf8.ValidString(out) {
		return errors.New("invalid UTF-8")
	}
	if strings.ContainsRune(out, '\r') {
		return errors.New("a carriage return")
	}
	switch d {
	case TelegramHTML:
		return validateTelegramHTML(out)
	case MatrixHTML:
		return validateMatrixHTML(out)
	case Slack:
		return validateSlack(out)
	}
	return nil
}

// against the nesting its entities allow, strictly: only b, i, u, s, code,
// pre, a and blockquote; attributes only href on a (quoted) and
// class="language-…" on a code that is the whole content of a pre; no tag
// inside code or pre other than that code; code and pre inside nothing but
// a blockquote; blockquote only at the top; no tag inside itself (so no
// link in a link); every tag closed in order and none empty; text with
// '<', '>' and '&' escaped and only the references Telegram decodes.
func validateTelegramHTML(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("invalid UTF-8")
	}
	type element struct {
		name    string
		content bool // any visible text yet
		code    int  // pre only: 0 no code child, 1 open, 2 closed
	}
	var stack []*element
	markContent := func() error {
		for _, e := range stack {
			e.content = true
		}
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.name == "pre" && top.code > 0 {
				return errors.New("text in a pre beside its code")
			}
		}
		return nil
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			j := strings.IndexByte(s[i:], '>')
			if j < 0 {
				return fmt.Errorf("unclosed tag at %d", i)
			}
			tagText := s[i+1 : i+j]
			at := i
			i += j + 1
			if name, ok := strings.CutPrefix(tagText, "/"); ok {
				if len(stack) == 0 || stack[len(stack)-1].name != name {
					return fmt.Errorf("unmatched </%s> at %d", name, at)
				}
				e := stack[len(stack)-1]
				if !e.content {
					return fmt.Errorf("empty <%s> at %d", name, at)
				}
				stack = stack[:len(stack)-1]
				if name == "code" && len(stack) > 0 && stack[len(stack)-1].name == "pre" {
					stack[len(stack)-1].code = 2
				}
				continue
			}
			name, attrs, _ := strings.Cut(tagText, " ")
			for _, e := range stack {
				if e.name == name {
					return fmt.Errorf("<%s> inside itself at %d", name, at)
				}
			}
			var parent *element
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			inCode := false
			for _, e := range stack {
				if e.name == "code" || e.name == "pre" {
					inCode = true
				}
			}
			switch name {
			case "b", "i", "u", "s", "blockquote", "pre":
				if attrs != "" {
					return fmt.Errorf("<%s> with attributes %q at %d", name, attrs, at)
				}
			case "a":
				v, ok := strings.CutPrefix(attrs, `href="`)
				if !ok || !strings.HasSuffix(v, `"`) || len(v) < 2 {
					return fmt.Errorf("bad link attributes %q at %d", attrs, at)
				}
				if err := validateText(v[:len(v)-1], true); err != nil {
					return fmt.Errorf("href at %d: %v", at, err)
				}
			case "code":
				if attrs != "" {
					lang, ok := strings.CutPrefix(attrs, `class="language-`)
					if !ok || !strings.HasSuffix(lang, `"`) || !ValidLanguage(lang[:len(lang)-1]) {
						return fmt.Errorf("bad code attributes %q at %d", attrs, at)
					}
					if parent == nil || parent.name != "pre" || parent.content || parent.code != 0 {
						return fmt.Errorf("code with a language outside a pre of its own at %d", at)
					}
				}
			default:
				return fmt.Errorf("unsupported tag <%s> at %d", name, at)
			}
			switch {
			case name == "code" && parent != nil && parent.name == "pre":
				if parent.content || parent.code != 0 {
					return fmt.Errorf("code inside a pre with other content at %d", at)
				}
				parent.code = 1
			case inCode:
				return fmt.Errorf("<%s> inside code at %d", name, at)
			case name == "blockquote" && len(stack) > 0:
				return fmt.Errorf("blockquote inside <%s> at %d", parent.name, at)
			case name == "code" || name == "pre":
				for _, e := range stack {
					if e.name != "blockquote" {
						return fmt.Errorf("<%s> inside <%s> at %d", name, e.name, at)
					}
				}
			}
			stack = append(stack, &element{name: name})
		case '&', '>':
			j := strings.IndexByte(s[i:], '<')
			if j < 0 {
				j = len(s) - i
			}
			if err := validateText(s[i:i+j], false); err != nil {
				return fmt.Errorf("text at %d: %v", i, err)
			}
			if err := markContent(); err != nil {
				return err
			}
			i += j
		default:
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			if err := markContent(); err != nil {
				return err
			}
		}
	}
	if len(stack) > 0 {
		return fmt.Errorf("<%s> not closed", stack[len(stack)-1].name)
	}
	return nil
}

// validateText checks escaped text: no raw '<' or '>', '&' only in the
// references Telegram decodes, and in attributes no raw '"'.
func validateText(s string, attr bool) error {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<', '>':
			return fmt.Errorf("raw %q", s[i])
		case '"':
			if attr {
				return errors.New(`raw '"' in an attribute`)
			}
		case '&':
			ok := false
			for _, e := range []string{"&lt;", "&gt;", "&amp;", "&quot;"} {
				if strings.HasPrefix(s[i:], e) {
					ok = true
				}
			}
			if !ok {
				return fmt.Errorf("unescaped '&' in %q", clip(s[i:]))
			}
		}
	}
	return nil
}

// Matrix HTML elements by what they may hold.
var (
	matrixInline = set("strong", "em", "del", "code", "a", "br")
	matrixBlock  = set("p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "ul", "ol", "table", "hr")
	matrixVoid   = set("br", "hr")
	// matrixChildren lists what an element may hold; elements missing
	// hold flow content: blocks and inline content.
	matrixChildren = map[string]map[string]bool{
		"p": matrixInline, "h1": matrixInline, "h2": matrixInline, "h3": matrixInline, "h4": matrixInline,
		"h5": matrixInline, "h6": matrixInline, "strong": matrixInline, "em": matrixInline,
		"del": matrixInline, "a": matrixInline, "code": {},
		"ul": set("li"), "ol": set("li"), "table": set("thead", "tbody"), "thead": set("tr"),
		"tbody": set("tr"), "tr": set("th", "td"), "pre": set("code"),
	}
	// matrixNoText are the elements that hold no text but white space.
	matrixNoText = set("ul", "ol", "table", "thead", "tbody", "tr", "pre")
	matrixStart  = regexp.MustCompile(`^start="[0-9]{1,9}"$`)
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// matrixAllows reports whether parent ("" for the document) may hold child.
func matrixAllows(parent, child string) bool {
	if only, ok := matrixChildren[parent]; ok {
		return only[child]
	}
	return matrixInline[child] || matrixBlock[child]
}

// validateMatrixHTML checks s against the org.matrix.custom.html subset
// the walk writes, strictly: only the elements MatrixHTML documents, each
// where HTML allows it (inline elements, p and headings hold only inline
// content, lists only li, tables only their rows and cells, pre one code,
// code only text), attributes only href on a, start on ol and a language
// class on the code of a pre; no link in a link, no empty inline element,
// every element closed in order; text escaped.
func validateMatrixHTML(s string) error {
	type element struct {
		name    string
		content bool
	}
	stack := []*element{{name: ""}}
	for i := 0; i < len(s); {
		top := stack[len(stack)-1]
		if s[i] != '<' {
			j := strings.IndexByte(s[i:], '<')
			if j < 0 {
				j = len(s) - i
			}
			text := s[i : i+j]
			if err := validateText(text, false); err != nil {
				return fmt.Errorf("text at %d: %v", i, err)
			}
			if matrixNoText[top.name] && strings.TrimSpace(text) != "" {
				return fmt.Errorf("text %q in <%s> at %d", clip(text), top.name, i)
			}
			for _, e := range stack {
				e.content = true
			}
			i += j
			continue
		}
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			return fmt.Errorf("unclosed tag at %d", i)
		}
		tagText := s[i+1 : i+j]
		at := i
		i += j + 1
		if name, ok := strings.CutPrefix(tagText, "/"); ok {
			if top.name != name {
				return fmt.Errorf("</%s> closes <%s> at %d", name, top.name, at)
			}
			if matrixInline[name] && !top.content {
				return fmt.Errorf("empty <%s> at %d", name, at)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		name, attrs, _ := strings.Cut(tagText, " ")
		if !matrixAllows(top.name, name) {
			return fmt.Errorf("<%s> in <%s> at %d", name, top.name, at)
		}
		switch {
		case attrs == "":
		case name == "a":
			v, ok := strings.CutPrefix(attrs, `href="`)
			if !ok || !strings.HasSuffix(v, `"`) || len(v) < 2 {
				return fmt.Errorf("bad link attributes %q at %d", attrs, at)
			}
			if err := validateText(v[:len(v)-1], true); err != nil {
				return fmt.Errorf("href at %d: %v", at, err)
			}
		case name == "ol" && matrixStart.MatchString(attrs):
		case name == "code" && top.name == "pre":
			lang, ok := strings.CutPrefix(attrs, `class="language-`)
			if !ok || !strings.HasSuffix(lang, `"`) || !ValidLanguage(lang[:len(lang)-1]) {
				return fmt.Errorf("bad code attributes %q at %d", attrs, at)
			}
		default:
			return fmt.Errorf("<%s> with attributes %q at %d", name, attrs, at)
		}
		for _, e := range stack {
			if name == "a" && e.name == "a" {
				return fmt.Errorf("link in a link at %d", at)
			}
		}
		if matrixVoid[name] {
			for _, e := range stack {
				e.content = true
			}
			continue
		}
		stack = append(stack, &element{name: name})
	}
	if len(stack) > 1 {
		return fmt.Errorf("<%s> not closed", stack[len(stack)-1].name)
	}
	return nil
}

var (
	slackLink = regexp.MustCompile(`^<(https?://|mailto:)[^\s|<>]+\|[^<>\n]+>`)
	slackAmp  = regexp.MustCompile(`^&(amp|lt|gt);`)
)

// validateSlack checks mrkdwn: '<' only opening a link <url|text> to an
// http, https or mailto URL, '>' only closing one or marking a quote at
// the start of a line, '&' only in &amp; &lt; &gt;, and ``` only as a line
// of its own (after a quote's marker), opening and closing blocks in pairs.
func validateSlack(s string) error {
	fences := 0
	for n, line := range strings.Split(s, "\n") {
		body := line
		for strings.HasPrefix(body, ">") {
			body = strings.TrimPrefix(strings.TrimPrefix(body, ">"), " ")
		}
		if body == "```" {
			fences++
			continue
		}
		if strings.Contains(body, "```") {
			return fmt.Errorf("line %d: ``` inside a line: %q", n+1, clip(line))
		}
		for i := len(line) - len(body); i < len(line); i++ {
			rest := line[i:]
			switch line[i] {
			case '<':
				m := slackLink.FindString(rest)
				if m == "" {
					return fmt.Errorf("line %d: raw '<' in %q", n+1, clip(rest))
				}
				i += len(m) - 1
			case '>':
				return fmt.Errorf("line %d: raw '>' in %q", n+1, clip(rest))
			case '&':
				if !slackAmp.MatchString(rest) {
					return fmt.Errorf("line %d: unescaped '&' in %q", n+1, clip(rest))
				}
			}
		}
	}
	if fences%2 != 0 {
		return errors.New("a ``` block is not closed")
	}
	return nil
}
