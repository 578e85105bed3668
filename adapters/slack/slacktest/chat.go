package slacktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxText is the longest message text Slack accepts, in characters.
const maxText = 40000

// resolveChannel finds the channel a call names: an id, a user id (the
// DM with that person, as chat.postMessage allows) or a name. Callers
// hold s.mu.
func (s *Server) resolveChannel(arg string, allowUser bool) (*channel, *apiError) {
	if c := s.channels[arg]; c != nil {
		return c, nil
	}
	if allowUser && strings.HasPrefix(arg, "U") && s.users[arg] != nil && !s.users[arg].bot {
		return s.openDM(arg), nil
	}
	name := strings.TrimPrefix(arg, "#")
	for _, c := range s.channels {
		if !c.im && c.name == name && name != "" {
			return c, nil
		}
	}
	return nil, errCode("channel_not_found")
}

// content is a message's content as a call gives it.
type content struct {
	text, markdown       string
	hasText, hasMarkdown bool
	blocks               json.RawMessage
	hasBlocks            bool
	attachments          json.RawMessage
	hasAttachments       bool
}

// readContent reads and checks text, markdown_text, blocks and
// attachments.
func readContent(p map[string]string) (content, *apiError) {
	var ct content
	ct.text, ct.hasText = p["text"]
	ct.markdown, ct.hasMarkdown = p["markdown_text"]
	if arg, ok := p["blocks"]; ok {
		blocks, e := checkBlocks(arg)
		if e != nil {
			return ct, e
		}
		ct.blocks, ct.hasBlocks = blocks, true
	}
	if arg, ok := p["attachments"]; ok && arg != "" {
		var v []json.RawMessage
		if json.Unmarshal([]byte(arg), &v) != nil {
			return ct, errCode("invalid_attachments")
		}
		ct.attachments, ct.hasAttachments = json.RawMessage(arg), true
		if len(v) > 100 {
			return ct, errCode("too_many_attachments")
		}
	}
	if ct.hasMarkdown && ct.markdown != "" && (ct.text != "" || len(ct.blocks) > 0) {
		return ct, errCode("markdown_text_conflict")
	}
	if utf8.RuneCountInString(ct.text) > maxText || utf8.RuneCountInString(ct.markdown) > maxMarkdownText {
		return ct, errCode("msg_too_long")
	}
	return ct, nil
}

// postMessage is chat.postMessage.
func (s *Server) postMessage(r *request) (obj, *apiError) {
	c, e := s.resolveChannel(r.p["channel"], true)
	if e != nil {
		return nil, e
	}
	if !c.botMember {
		return nil, errCode("not_in_channel")
	}
	if c.archived {
		return nil, errCode("is_archived")
	}
	if e := s.limit(r.now, window{"post:" + c.id, postPerChannel}, window{"method:chat.postMessage", postPerWorkspace}); e != nil {
		return nil, e
	}
	ct, e := readContent(r.p)
	if e != nil {
		return nil, e
	}
	if ct.text == "" && ct.markdown == "" && len(ct.blocks) == 0 && len(ct.attachments) == 0 {
		return nil, errCode("no_text")
	}
	m := s.botMessage(c, r.p["thread_ts"])
	m.text, m.blocks, m.attachments = ct.text, ct.blocks, ct.attachments
	if ct.markdown != "" {
		m.text = ct.markdown
	}
	s.addMessage(c, m)
	s.notify(c, s.messageEvent(c, m))
	return obj{"channel": c.id, "ts": m.ts, "message": s.wireMessage(c, m)}, nil
}

// botMessage starts a message by the bot in c, in the thread threadTS
// names (none when it names no message: Slack then posts to the channel).
// A reply clears the thread's assistant status, as at Slack. Callers hold
// s.mu.
func (s *Server) botMessage(c *channel, threadTS string) *message {
	m := &message{ts: s.newTS(), threadTS: threadRoot(c, threadTS), user: s.BotUserID, botID: s.BotID, posted: s.now()}
	if m.threadTS != "" {
		delete(s.statuses, c.id+"/"+m.threadTS)
	}
	return m
}

// botTarget finds the message a call on one of the bot's messages names:
// channel and ts. Callers hold s.mu.
func (s *Server) botTarget(r *request, ts, notOwn string) (*channel, *message, *apiError) {
	c, e := s.resolveChannel(r.p["channel"], false)
	if e != nil {
		return nil, nil, e
	}
	if c.archived {
		return nil, nil, errCode("is_inactive")
	}
	m := c.msgs[ts]
	if m == nil || m.deleted {
		return nil, nil, errCode("message_not_found")
	}
	if m.botID != s.BotID {
		return nil, nil, errCode(notOwn)
	}
	return c, m, nil
}

// updateMessage is chat.update: only the bot's own messages; arguments
// left out keep what the message had (an empty blocks array clears the
// blocks).
func (s *Server) updateMessage(r *request) (obj, *apiError) {
	c, m, e := s.botTarget(r, r.p["ts"], "cant_update_message")
	if e != nil {
		return nil, e
	}
	s.expireStream(m, r.now)
	if m.streaming {
		return nil, errCode("streaming_state_conflict")
	}
	ct, e := readContent(r.p)
	if e != nil {
		return nil, e
	}
	text, blocks, attachments := m.text, m.blocks, m.attachments
	if ct.hasText {
		text = ct.text
	}
	if ct.markdown != "" {
		text, blocks = ct.markdown, nil
	}
	if ct.hasBlocks {
		blocks = ct.blocks
		if string(blocks) == "[]" {
			blocks = nil
		}
	}
	if ct.hasAttachments {
		attachments = ct.attachments
	}
	if text == "" && len(blocks) == 0 && len(attachments) == 0 && len(m.files) == 0 {
		return nil, errCode("no_text")
	}
	if text == m.text && bytes.Equal(blocks, m.blocks) && bytes.Equal(attachments, m.attachments) {
		m.unchanged++
	}
	prev := s.wireMessage(c, m)
	m.text, m.blocks, m.attachments = text, blocks, attachments
	m.edits++
	m.editedAt = r.now
	m.editTS = s.newTS()
	s.changed()
	s.notify(c, s.changedEvent(c, m, prev))
	w := s.wireMessage(c, m)
	return obj{"channel": c.id, "ts": m.ts, "text": m.text, "message": w}, nil
}

// deleteMessage is chat.delete: only the bot's own messages.
func (s *Server) deleteMessage(r *request) (obj, *apiError) {
	c, m, e := s.botTarget(r, r.p["ts"], "cant_delete_message")
	if e != nil {
		return nil, e
	}
	prev := s.wireMessage(c, m)
	m.deleted = true
	m.streaming = false
	s.changed()
	s.notify(c, s.deletedEvent(c, m, prev))
	return obj{"channel": c.id, "ts": m.ts}, nil
}

// getPermalink is chat.getPermalink.
func (s *Server) getPermalink(r *request) (obj, *apiError) {
	c, e := s.resolveChannel(r.p["channel"], false)
	if e != nil {
		return nil, e
	}
	m := c.msgs[r.p["message_ts"]]
	if m == nil || m.deleted {
		return nil, errCode("message_not_found")
	}
	link := fmt.Sprintf("https://%s.slack.com/archives/%s/p%s", teamDomain, c.id, strings.ReplaceAll(m.ts, ".", ""))
	if m.isReply() {
		link += fmt.Sprintf("?thread_ts=%s&cid=%s", m.threadTS, c.id)
	}
	return obj{"channel": c.id, "permalink": link}, nil
}
