package telegramtest

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-telegram/bot/models"
)

// parseHTML turns text in Telegram's HTML parse mode into the visible text
// and its entities, following the parser of tdlib (which the Bot API server
// runs): the same tags, the same attribute rules, the same error texts with
// byte offsets into the source. Offsets of entities are in UTF-16 code
// units, like Telegram's.
func parseHTML(src string) (string, []models.MessageEntity, error) {
	type open struct {
		name, arg string
		off16     int // entity start in UTF-16 units of the visible text
		outStart  int // entity start in bytes of the visible text
	}
	var (
		out   strings.Builder
		off16 int
		stack []open
		ents  []models.MessageEntity
	)
	appendRune := func(r rune) {
		out.WriteRune(r)
		off16 += utf16Len(r)
	}
	n := len(src)
	i := 0
	for i < n {
		c := src[i]
		if c == '&' {
			if r, next, ok := decodeEntity(src, i); ok {
				appendRune(r)
				i = next
				continue
			}
		}
		if c != '<' {
			r, size := utf8.DecodeRuneInString(src[i:])
			appendRune(r)
			i += size
			continue
		}
		begin := i
		i++
		if i < n && src[i] == '/' {
			// An end tag.
			if len(stack) == 0 {
				return "", nil, fmt.Errorf("Unexpected end tag at byte offset %d", begin)
			}
			i++
			start := i
			for i < n && !isSpace(src[i]) && src[i] != '>' {
				i++
			}
			endName := strings.ToLower(src[start:i])
			for i < n && isSpace(src[i]) {
				i++
			}
			if i >= n || src[i] != '>' {
				return "", nil, fmt.Errorf("Unclosed end tag at byte offset %d", begin)
			}
			i++
			top := stack[len(stack)-1]
			if endName != "" && endName != top.name {
				return "", nil, fmt.Errorf("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", begin, top.name, endName)
			}
			stack = stack[:len(stack)-1]
			if off16 == top.off16 {
				continue // empty entities vanish
			}
			e, err := closeEntity(top.name, top.arg, top.off16, off16-top.off16, out.String()[top.outStart:], ents)
			if err != nil {
				return "", nil, err
			}
			ents = e
			continue
		}

		// A start tag.
		for i < n && !isSpace(src[i]) && src[i] != '>' {
			i++
		}
		if i >= n {
			return "", nil, fmt.Errorf("Unclosed start tag at byte offset %d", begin)
		}
		name := strings.ToLower(src[begin+1 : i])
		if !supportedTag(name) {
			return "", nil, fmt.Errorf("Unsupported start tag \"%s\" at byte offset %d", name, begin)
		}
		var arg string
		for {
			for i < n && isSpace(src[i]) {
				i++
			}
			if i >= n {
				return "", nil, fmt.Errorf("Unclosed start tag at byte offset %d", begin)
			}
			if src[i] == '>' {
				break
			}
			attrStart := i
			for i < n && !isSpace(src[i]) && src[i] != '=' && src[i] != '>' {
				i++
			}
			attr := strings.ToLower(src[attrStart:i])
			if attr == "" {
				return "", nil, fmt.Errorf("Empty attribute name in the tag \"%s\" at byte offset %d", name, begin)
			}
			for i < n && isSpace(src[i]) {
				i++
			}
			if i >= n {
				return "", nil, fmt.Errorf("Unclosed start tag \"%s\" at byte offset %d", name, begin)
			}
			if src[i] != '=' {
				if name == "blockquote" && attr == "expandable" {
					arg = "expandable"
					continue
				}
				return "", nil, fmt.Errorf("Expected equal sign in declaration of an attribute of the tag \"%s\" at byte offset %d", name, begin)
			}
			i++
			for i < n && isSpace(src[i]) {
				i++
			}
			if i >= n {
				return "", nil, fmt.Errorf("Unclosed start tag \"%s\" at byte offset %d", name, begin)
			}
			var val string
			if q := src[i]; q != '"' && q != '\'' {
				// A name token: letters, digits, periods, hyphens.
				start := i
				for i < n && (isAlnum(src[i]) || src[i] == '.' || src[i] == '-') {
					i++
				}
				val = strings.ToLower(src[start:i])
				if i < n && !isSpace(src[i]) && src[i] != '>' {
					return "", nil, fmt.Errorf("Unexpected end of name token at byte offset %d", start)
				}
			} else {
				i++
				var b strings.Builder
				for i < n && src[i] != q {
					if src[i] == '&' {
						if r, next, ok := decodeEntity(src, i); ok {
							b.WriteRune(r)
							i = next
							continue
						}
					}
					b.WriteByte(src[i])
					i++
				}
				if i < n {
					i++
				}
				val = b.String()
			}
			if i >= n {
				return "", nil, fmt.Errorf("Unclosed start tag at byte offset %d", begin)
			}
			switch {
			case name == "a" && attr == "href":
				arg = val
			case name == "code" && attr == "class" && strings.HasPrefix(val, "language-"):
				arg = val[len("language-"):]
			case name == "span" && attr == "class" && strings.HasPrefix(val, "tg-"):
				arg = val[len("tg-"):]
			case name == "tg-emoji" && attr == "emoji-id":
				arg = val
			case name == "blockquote" && attr == "expandable":
				arg = "expandable"
			}
		}
		i++ // '>'
		if name == "span" && arg != "spoiler" {
			return "", nil, fmt.Errorf("Tag \"span\" must have class \"tg-spoiler\" at byte offset %d", begin)
		}
		stack = append(stack, open{name: name, arg: arg, off16: off16, outStart: out.Len()})
	}
	if len(stack) > 0 {
		return "", nil, fmt.Errorf("Can't find end tag corresponding to start tag \"%s\"", stack[len(stack)-1].name)
	}
	sortEntities(ents)
	return out.String(), ents, nil
}

func supportedTag(name string) bool {
	switch name {
	case "a", "b", "strong", "i", "em", "s", "strike", "del", "u", "ins",
		"tg-spoiler", "tg-emoji", "span", "pre", "code", "blockquote":
		return true
	}
	return false
}

// closeEntity appends the entity a closed tag makes. inner is the visible
// text the tag enclosed.
func closeEntity(name, arg string, off, length int, inner string, ents []models.MessageEntity) ([]models.MessageEntity, error) {
	add := func(t models.MessageEntityType) {
		ents = append(ents, models.MessageEntity{Type: t, Offset: off, Length: length})
	}
	last := func() *models.MessageEntity {
		if len(ents) == 0 {
			return nil
		}
		e := &ents[len(ents)-1]
		if e.Offset != off || e.Length != length {
			return nil
		}
		return e
	}
	switch name {
	case "b", "strong":
		add(models.MessageEntityTypeBold)
	case "i", "em":
		add(models.MessageEntityTypeItalic)
	case "u", "ins":
		add(models.MessageEntityTypeUnderline)
	case "s", "strike", "del":
		add(models.MessageEntityTypeStrikethrough)
	case "tg-spoiler", "span":
		add(models.MessageEntityTypeSpoiler)
	case "a":
		link := arg
		if link == "" {
			link = inner
		}
		if id, ok := strings.CutPrefix(link, "tg://user?id="); ok {
			uid, err := strconv.ParseInt(id, 10, 64)
			if err == nil && uid > 0 {
				ents = append(ents, models.MessageEntity{Type: models.MessageEntityTypeTextMention, Offset: off, Length: length, User: &models.User{ID: uid}})
			}
			break
		}
		if u, ok := linkURL(link); ok {
			ents = append(ents, models.MessageEntity{Type: models.MessageEntityTypeTextLink, Offset: off, Length: length, URL: u})
		}
		// An unusable link is dropped silently, as Telegram does.
	case "code":
		if e := last(); e != nil && e.Type == models.MessageEntityTypePre {
			e.Language = arg
			break
		}
		ents = append(ents, models.MessageEntity{Type: models.MessageEntityTypeCode, Offset: off, Length: length, Language: arg})
	case "pre":
		if e := last(); e != nil && e.Type == models.MessageEntityTypeCode {
			e.Type = models.MessageEntityTypePre
			break
		}
		add(models.MessageEntityTypePre)
	case "blockquote":
		if arg != "" {
			add(models.MessageEntityTypeExpandableBlockquote)
		} else {
			add(models.MessageEntityTypeBlockquote)
		}
	case "tg-emoji":
		id, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("Invalid custom emoji identifier specified")
		}
		ents = append(ents, models.MessageEntity{Type: models.MessageEntityTypeCustomEmoji, Offset: off, Length: length, CustomEmojiID: arg})
	}
	return ents, nil
}

// linkURL reports whether Telegram would make a text link of s, and the URL.
func linkURL(s string) (string, bool) {
	if s == "" || strings.ContainsAny(s, " \n\t") {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "tg", "ton", "tonsite", "ftp", "mailto":
		return s, u.Opaque != "" || u.Host != "" || u.Path != "" || u.RawQuery != ""
	case "":
		if strings.Contains(s, ".") {
			return "http://" + s, true
		}
	}
	return "", false
}

// decodeEntity decodes the HTML entity at s[pos] ('&') as tdlib does: &lt;
// &gt; &amp; &quot; and numeric references, the semicolon optional. ok is
// false for anything else, which Telegram then keeps as a literal '&'.
func decodeEntity(s string, pos int) (rune, int, bool) {
	end := pos + 1
	var res int64
	if end < len(s) && s[end] == '#' {
		end++
		if end < len(s) && s[end] == 'x' {
			end++
			for end < len(s) && isHex(s[end]) {
				if res < 0x110000 {
					res = res*16 + int64(hexVal(s[end]))
				}
				end++
			}
		} else {
			for end < len(s) && s[end] >= '0' && s[end] <= '9' {
				if res < 0x110000 {
					res = res*10 + int64(s[end]-'0')
				}
				end++
			}
		}
		if res == 0 || res >= 0x10ffff || end-pos >= 10 {
			return 0, pos, false
		}
	} else {
		for end < len(s) && isAlpha(s[end]) {
			end++
		}
		switch s[pos+1 : end] {
		case "lt":
			res = '<'
		case "gt":
			res = '>'
		case "amp":
			res = '&'
		case "quot":
			res = '"'
		default:
			return 0, pos, false
		}
	}
	if end < len(s) && s[end] == ';' {
		end++
	}
	return rune(res), end, true
}

func sortEntities(ents []models.MessageEntity) {
	sort.SliceStable(ents, func(a, b int) bool {
		if ents[a].Offset != ents[b].Offset {
			return ents[a].Offset < ents[b].Offset
		}
		return ents[a].Length > ents[b].Length
	})
}

// trimText strips leading and trailing white space from visible text, as
// Telegram does before measuring it, and moves the entities along; entities
// left empty are dropped.
func trimText(text string, ents []models.MessageEntity) (string, []models.MessageEntity) {
	trimmedLeft := strings.TrimLeftFunc(text, unicode.IsSpace)
	shift := utf16Count(text[:len(text)-len(trimmedLeft)])
	out := strings.TrimRightFunc(trimmedLeft, unicode.IsSpace)
	total := utf16Count(out)
	var kept []models.MessageEntity
	for _, e := range ents {
		start, end := e.Offset-shift, e.Offset+e.Length-shift
		start, end = max(start, 0), min(end, total)
		if end <= start {
			continue
		}
		e.Offset, e.Length = start, end-start
		kept = append(kept, e)
	}
	return out, kept
}

func utf16Len(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}

// utf16Count is the length of s in UTF-16 code units, the unit of
// Telegram's length limits and entity offsets.
func utf16Count(s string) int {
	n := 0
	for _, r := range s {
		n += utf16Len(r)
	}
	return n
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isAlnum(c byte) bool { return isAlpha(c) || c >= '0' && c <= '9' }

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	default:
		return int(c-'A') + 10
	}
}
