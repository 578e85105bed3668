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
// had to name a topic or thread before the session existed (which says so
// with core.Command.Placeholder). The session keeps it as a value
// (core.Session.Placeholder). The first person's message with text then
// replaces the placeholder with its first line (see titleFrom), so lists,
// topics and threads say what the session is about. A title a person or an
// agent chose is never replaced, whatever it looks like: only a title that
// still is the session's placeholder is. Sessions stored before the
// placeholder was kept as a value were given theirs by the store (see
// store/bolt's markPlaceholders).
const (
	placeholderPrefix = "Session "
	placeholderLayout = "Jan 2 15:04"
	// maxAutoTitle is how many characters of the first line are kept, like
	// a mail subject: enough to tell sessions apart in a list or a topic
	// name, short enough for every platform's title limit.
	maxAutoTitle = 60
)

// placeholderTitle is the title of a session created at now without one.
func placeholderTitle(now time.Time) string {
	return placeholderPrefix + now.UTC().Format(placeholderLayout)
}

// placeholderOf is the placeholder a session created by cmd with title
// keeps: title when cmd named none (title is then this Service's
// placeholder) or said its title is one, else "".
func placeholderOf(cmd core.Command, title string) string {
	if cmd.Placeholder || strings.TrimSpace(cmd.Title) == "" {
		return title
	}
	return ""
}

// isPlaceholder reports whether sess still has the placeholder title it was
// given.
func isPlaceholder(sess core.Session) bool {
	return sess.Placeholder != "" && sess.Title == sess.Placeholder
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
	if !isPlaceholder(sess) {
		return "", false
	}
	t := titleFrom(text)
	return t, t != "" && t != sess.Title
}
