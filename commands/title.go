package commands

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

// A session started without a title gets a placeholder naming the minute it
// began ("Session Nov 23 21:04"), from this Service or from the adapter that
// had to name a topic or thread before the session existed. The first
// person's message with text then replaces the placeholder with its first
// line (see titleFrom), so lists, topics and threads say what the session is
// about. A title a person or an agent chose is never replaced: only the
// placeholder is, recognised by its exact shape and a minute within
// placeholderSkew of the session's creation, so a person who happens to type
// "Session Jan 2 15:04" in another minute keeps that title.
const (
	placeholderPrefix = "Session "
	placeholderLayout = "Jan 2 15:04"
	placeholderSkew   = 2 * time.Minute
	// maxAutoTitle is how many characters of the first line are kept, like
	// a mail subject: enough to tell sessions apart in a list or a topic
	// name, short enough for every platform's title limit.
	maxAutoTitle = 60
)

// placeholderTitle is the title of a session created at now without one.
func placeholderTitle(now time.Time) string {
	return placeholderPrefix + now.UTC().Format(placeholderLayout)
}

// isPlaceholder reports whether title is the placeholder given to a session
// created at created, here or by an adapter (whose clock read the minute
// just before or after).
func isPlaceholder(title string, created time.Time) bool {
	rest, ok := strings.CutPrefix(title, placeholderPrefix)
	if !ok {
		return false
	}
	t, err := time.Parse(placeholderLayout, rest)
	if err != nil || t.Format(placeholderLayout) != rest {
		return false
	}
	c := created.UTC()
	// The placeholder has no year: put it in the creation's year, or the
	// neighbouring one across New Year's Eve.
	for _, y := range []int{c.Year(), c.Year() - 1, c.Year() + 1} {
		at := time.Date(y, t.Month(), t.Day(), t.Hour(), t.Minute(), 0, 0, time.UTC)
		if d := at.Sub(c.Truncate(time.Minute)); d >= -placeholderSkew && d <= placeholderSkew {
			return true
		}
	}
	return false
}

// titleFrom is the title a message's text gives a session: its first line
// with text, without markdown heading or quote marks, spaces collapsed,
// cut at a word boundary to maxAutoTitle characters with "…". It is ""
// when the text has none.
func titleFrom(text string) string {
	var line string
	for l := range strings.Lines(text) {
		l = strings.TrimLeft(strings.TrimSpace(l), "#> \t")
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			line = l
			break
		}
	}
	if utf8.RuneCountInString(line) <= maxAutoTitle {
		return line
	}
	runes := []rune(line)
	cut := maxAutoTitle - 1 // room for the ellipsis
	// Back up to the last space, unless that throws most of it away (one
	// very long word): then cut inside the word.
	for i := cut; i > maxAutoTitle/2; i-- {
		if unicode.IsSpace(runes[i]) {
			cut = i
			break
		}
	}
	return strings.TrimRightFunc(string(runes[:cut]), func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsPunct(r)
	}) + "…"
}

// autoTitle returns the title sess takes from a person's message with text,
// and whether it changes: only while sess still has its placeholder.
func autoTitle(sess core.Session, text string) (string, bool) {
	if !isPlaceholder(sess.Title, sess.Created) {
		return "", false
	}
	t := titleFrom(text)
	return t, t != "" && t != sess.Title
}
