package telegramtest

import (
	"strconv"
	"strings"
	"time"
)

// draftLife is how long a streamed draft stays visible after its last
// update: Telegram shows it as a temporary 30-second preview.
const draftLife = 30 * time.Second

type draft struct {
	chat     int64
	thread   int
	id       string
	content  content
	updates  int
	last     time.Time
	finished bool
}

// Draft is a message draft the bot streamed into a private chat
// (sendMessageDraft, sendRichMessageDraft).
type Draft struct {
	Chat     int64
	Thread   int
	ID       string
	Text     string // visible text ("" shows a "Thinking…" placeholder)
	HTML     string
	Markdown string
	Rich     bool
	Updates  int
	Updated  time.Time
	// Active reports whether the draft still shows: updated within the
	// last 30 seconds and not replaced by a sent message.
	Active bool
}

// Drafts returns the drafts streamed into a chat, oldest first.
func (s *Server) Drafts(chatID int64) []Draft {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []Draft
	for _, d := range s.drafts {
		if d.chat != chatID {
			continue
		}
		x := Draft{Chat: d.chat, Thread: d.thread, ID: d.id, Text: d.content.text, Updates: d.updates, Updated: d.last,
			Rich: d.content.rich != nil, Active: !d.finished && now.Sub(d.last) < draftLife}
		switch {
		case d.content.rich != nil:
			x.HTML, x.Markdown = d.content.rich.HTML, d.content.rich.Markdown
		case d.content.parseMode == "html":
			x.HTML = d.content.source
		case d.content.parseMode != "":
			x.Markdown = d.content.source
		}
		out = append(out, x)
	}
	return out
}

// endDrafts retires the drafts of a chat's thread once a message is sent
// there. Callers hold s.mu.
func (s *Server) endDrafts(c *chat, thread int) {
	for _, d := range s.drafts {
		if d.chat == c.id && d.thread == thread {
			d.finished = true
		}
	}
}

func (s *Server) sendMessageDraft(r *request) (any, *Error) {
	return s.streamDraft(r, func() (content, *Error) {
		return parseContent(r.p.str("text"), r.p.str("parse_mode"), r.p.str("entities"), maxText, "message is too long", true)
	})
}

func (s *Server) sendRichMessageDraft(r *request) (any, *Error) {
	return s.streamDraft(r, func() (content, *Error) { return parseRich(r.p.str("rich_message"), "message is too long") })
}

// streamDraft shows or updates a draft; drafts exist in private chats only.
func (s *Server) streamDraft(r *request, parse func() (content, *Error)) (any, *Error) {
	c, thread, e := s.target(r)
	if e != nil {
		return nil, e
	}
	if c.kind != kindPrivate {
		return nil, badRequest("TEXTDRAFT_PEER_INVALID")
	}
	if e := s.limit(r, c, thread); e != nil {
		return nil, e
	}
	if e := s.writable(c, thread); e != nil {
		return nil, e
	}
	id := strings.TrimSpace(r.p.str("draft_id"))
	if n, err := strconv.ParseInt(id, 10, 64); err != nil || n == 0 {
		return nil, badRequest("draft_id must be non-zero")
	}
	ct, e := parse()
	if e != nil {
		return nil, e
	}
	var d *draft
	for _, x := range s.drafts {
		if x.chat == c.id && x.thread == thread && x.id == id && !x.finished {
			d = x
		}
	}
	if d == nil {
		d = &draft{chat: c.id, thread: thread, id: id}
		s.drafts = append(s.drafts, d)
	}
	d.content = ct
	d.updates++
	d.last = r.now
	return true, nil
}
