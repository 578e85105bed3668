// Package markdown renders the agent's markdown into each platform's markup
// with one shared goldmark walk, and measures the result the way the
// platform counts it.
//
// The markdown is parsed with goldmark (CommonMark plus GFM tables,
// strikethrough, autolinks and task lists). One walk over the tree decides
// everything the dialects have in common: which links are safe to make
// clickable, where formatting opens and closes (lazily, right before the
// text it formats, so no empty formatting is written), how raw HTML and
// unknown constructs degrade to escaped text, list numbering and bullets,
// table cells and their alignment, and the separators between blocks, which
// follow the source's blank lines. A Dialect supplies what differs: how text
// is escaped, the markers of bold, italic, strike-through, code and links,
// the nesting its platform forbids (Telegram allows no formatting around
// inline code; Slack's formatting ends at a line break and its link text
// takes none), and the shape of each block (headings as bold lines or
// h1–h6, lists as bullet lines or ul/ol, tables as aligned monospace text or
// table elements). The dialects are TelegramHTML, Plain (Telegram's
// fallback and Matrix's body), Slack (mrkdwn) and MatrixHTML
// (org.matrix.custom.html); a platform with another markup adds one by
// implementing Dialect.
//
// Length. Every dialect says how its platform counts a message (Length):
// Telegram the UTF-16 code units of the visible text after entity parsing,
// Slack the bytes of the mrkdwn, Matrix the bytes of body plus
// formatted_body. Lengths are measured after rendering, so a caller that
// must fit a limit measures the rendering (Measure, Fit) instead of the
// source; an adapter offers that to the core as RenderedLength(md) so the
// core can cut its Split and Tail by rendered length. Separately, the walk
// keeps an account that bounds what rendering adds to the visible text
// (Visible, counted in the dialect's Unit): list numbers counted up past
// what the source wrote, continuation lines indented under their bullet,
// padded table columns, a plain-text link's " (url)". The account opens
// with MaxGrowth; each top-level block adds what its rendering saves on its
// source and pays for what it adds; a block that would overdraw it is
// rendered again in a compact form (list numbers as the source wrote them,
// no indentation, unpadded tables, no link URLs, unprefixed quotes) or,
// failing that, shown as its escaped source. Hence, for every md and
// dialect d,
//
//	d.Visible(Render(md, d)) <= delivery.Measure(md, d.Unit()) + MaxGrowth
//
// For Telegram, whose count is the visible text, this makes
// delivery.Split(md, 4096-MaxGrowth, core.UTF16) safe without rendering; Slack
// and Matrix count markup and escapes too, which can multiply the length
// (every '<' becomes "&lt;"), so they must budget by Measure.
//
// Rendering never panics: a panic in the parser or the walk shows the
// source as escaped text instead of losing it. The package holds no state;
// every function is safe for concurrent use.
package markdown
