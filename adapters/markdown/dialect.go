package markdown

import "github.com/parley-chat/parley/core"

// Dialect is a platform's markup: what the shared walk asks of it. The walk
// calls its methods with text it has already rendered (inner, Content,
// Rows) or with unescaped text (text, src, code), never with markdown. A
// Dialect holds no state and must be safe for concurrent use; its methods
// do not block and return "" for nothing to show.
type Dialect interface {
	// Name names the dialect in test output and golden files.
	Name() string
	// Rules are the constraints the walk applies for this dialect.
	Rules() Rules
	// Unit is the unit of the length account: Visible counts in it, and
	// the source it is compared with is measured in it.
	Unit() core.LengthUnit
	// Visible is the length of out's visible text in Unit: the text once
	// markup is removed and escapes decoded, or a close upper bound of it.
	Visible(out string) int
	// Length is the length the platform counts for the message carrying
	// out, the rendering of md: what its message limit applies to.
	Length(md, out string) int
	// AcceptLink reports whether href (already URL-escaped) may be made a
	// link; a link that may not shows its text only.
	AcceptLink(href string) bool

	// Escape escapes text for the platform.
	Escape(text string) string
	// Literal shows source text as it is, escaped, as a block of its own:
	// raw HTML, and what the walk cannot render within the account.
	Literal(src string) string
	// Tags are the opening and closing markup of formatting f; href is a
	// Link's URL.
	Tags(f Format, href string) (open, close string)
	// Code renders inline code, or reports false when the platform cannot
	// show this text as code (it is then shown as text).
	Code(text string) (string, bool)
	// Break is a line break inside a paragraph.
	Break() string

	// Paragraph wraps a paragraph's rendered inline content. tight is true
	// in a tight list item and for a document that is one paragraph.
	Paragraph(inner string, tight bool) string
	// Heading wraps a heading's rendered inline content (which is already
	// bold when the Rules say HeadingBold); level is 1 to 6.
	Heading(level int, inner string) string
	// Rule is a thematic break.
	Rule() string
	// CodeBlock renders a code block; code is not blank, lang is the
	// fence's first word, possibly empty or unusable (see ValidLanguage).
	CodeBlock(lang, code string) string
	// Quote wraps a block quote's rendered content. nested is true for a
	// quote inside a quote; compact asks for the form that adds nothing to
	// the visible text.
	Quote(inner string, nested, compact bool) string
	// List lays out a list whose items the walk has rendered.
	List(l List) string
	// Table renders a table that has some text.
	Table(t Table) string
}

// Rules are the nesting and formatting constraints of a dialect, applied
// by the walk.
type Rules struct {
	// Markup is false for plain text: no formatting is written, and a
	// link shows its URL after its text when they differ.
	Markup bool
	// HeadingBold makes a heading's text bold, for dialects without
	// headings of their own.
	HeadingBold bool
	// CodeAlone forbids formatting around inline code: it is closed before
	// the code and reopened after (Telegram).
	CodeAlone bool
	// LineFormatting ends formatting at a line break: it is closed before
	// the break and reopened after (Slack).
	LineFormatting bool
	// PlainLinkText forbids formatting inside a link's text (Slack's
	// <url|text>); formatting around the whole link stays.
	PlainLinkText bool
}

// Format is an inline formatting.
type Format int

// Inline formattings. A formatting is never nested in itself: the walk
// drops bold inside bold, and a link inside a link.
const (
	Bold Format = iota + 1
	Italic
	Strike
	Link
)

// List is a list whose items are rendered, for Dialect.List.
type List struct {
	Ordered bool
	// Start is the first number of an ordered list.
	Start int
	// Depth is 0 for a list not inside another list.
	Depth int
	// Compact asks for the form that adds nothing to the visible text: no
	// indentation of continuation lines (Marker is then as the source
	// wrote it).
	Compact bool
	Items   []Item
}

// Item is one list item.
type Item struct {
	// Marker is the item's bullet by depth ("• ", "◦ ", "▪ ") or its
	// number ("3. ", "4) "), with a trailing space.
	Marker string
	// Task is true for an item starting with a task check box, which
	// Content shows and which may stand for the bullet.
	Task bool
	// Content is the item's rendered blocks, "" for an empty item.
	Content string
	// Sep separates the item from the one before it, following the
	// source: "\n", or "\n\n" after a blank line; "" for the first item.
	Sep string
}

// Table is a table, for Dialect.Table.
type Table struct {
	// Text is the table laid out as monospace text, unescaped: columns
	// aligned and padded when the account allows it, else cells separated
	// by " | " or "|".
	Text string
	// Rows are the cells rendered with inline formatting, the header row
	// first.
	Rows [][]string
}
