package slacktest

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// ThreadStatus is the assistant status ("is working…") the bot set on a
// thread with assistant.threads.setStatus; "" when none. Slack clears it
// when the bot replies in the thread.
func (s *Server) ThreadStatus(channelID, threadTS string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statuses[channelID+"/"+threadTS]
}

// streamText reads the text a streaming call appends: markdown_text and
// the markdown_text chunks.
func streamText(p map[string]string) (string, *apiError) {
	text := p["markdown_text"]
	if arg := p["chunks"]; arg != "" {
		var chunks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal([]byte(arg), &chunks) != nil {
			return "", errCode("invalid_chunks")
		}
		for _, ch := range chunks {
			if ch.Type == "markdown_text" {
				text += ch.Text
			}
		}
	}
	if utf8.RuneCountInString(text) > maxMarkdownText {
		return "", errCode("msg_too_long")
	}
	return text, nil
}

// startStream is chat.startStream: a new message of the bot in a thread
// that appendStream grows until stopStream. In channels (not DMs) it needs
// the recipient's team and user.
func (s *Server) startStream(r *request) (obj, *apiError) {
	c, e := s.resolveChannel(r.p["channel"], false)
	if e != nil {
		return nil, e
	}
	if !c.botMember {
		return nil, errCode("not_in_channel")
	}
	if c.archived {
		return nil, errCode("is_archived")
	}
	if r.p["thread_ts"] == "" {
		return nil, errCode("invalid_arguments")
	}
	if threadRoot(c, r.p["thread_ts"]) == "" {
		return nil, errCode("thread_not_found")
	}
	if !c.im {
		switch {
		case r.p["recipient_team_id"] == "":
			return nil, errCode("missing_recipient_team_id")
		case r.p["recipient_user_id"] == "":
			return nil, errCode("missing_recipient_user_id")
		case s.users[r.p["recipient_user_id"]] == nil:
			return nil, errCode("user_not_found")
		}
	}
	text, e := streamText(r.p)
	if e != nil {
		return nil, e
	}
	m := s.botMessage(c, r.p["thread_ts"])
	m.text, m.streaming, m.streamEnds = text, true, r.now.Add(s.opts.StreamLifetime)
	s.addMessage(c, m)
	s.notify(c, s.messageEvent(c, m))
	return obj{"channel": c.id, "ts": m.ts}, nil
}

// streaming finds the streaming message a call names.
func (s *Server) streaming(r *request) (*channel, *message, *apiError) {
	c, e := s.resolveChannel(r.p["channel"], false)
	if e != nil {
		return nil, nil, e
	}
	m := c.msgs[r.p["ts"]]
	if m != nil {
		s.expireStream(m, r.now)
	}
	switch {
	case m == nil || m.deleted:
		return nil, nil, errCode("message_not_found")
	case m.botID != s.BotID:
		return nil, nil, errCode("message_not_owned_by_app")
	case !m.streaming:
		return nil, nil, errCode("message_not_in_streaming_state")
	}
	return c, m, nil
}

// expireStream ends m's stream when its lifetime is over: Slack ends a
// stream about five minutes after it started, whether or not text keeps
// coming, and the message keeps what it showed. Callers hold s.mu.
func (s *Server) expireStream(m *message, now time.Time) {
	if m.streaming && !now.Before(m.streamEnds) {
		m.streaming = false
	}
}

// appendStream is chat.appendStream: it only appends.
func (s *Server) appendStream(r *request) (obj, *apiError) {
	c, m, e := s.streaming(r)
	if e != nil {
		return nil, e
	}
	text, e := streamText(r.p)
	if e != nil {
		return nil, e
	}
	if text == "" {
		return nil, errCode("no_text")
	}
	m.text += text
	s.changed()
	return obj{"channel": c.id, "ts": m.ts}, nil
}

// stopStream is chat.stopStream: the last text, optional blocks, and the
// end of streaming.
func (s *Server) stopStream(r *request) (obj, *apiError) {
	c, m, e := s.streaming(r)
	if e != nil {
		return nil, e
	}
	text, e := streamText(r.p)
	if e != nil {
		return nil, e
	}
	blocks, e := checkBlocks(r.p["blocks"])
	if e != nil {
		return nil, e
	}
	prev := s.wireMessage(c, m)
	m.text += text
	if blocks != nil {
		m.blocks = blocks
	}
	m.streaming = false
	s.changed()
	s.notify(c, s.changedEvent(c, m, prev))
	return obj{"channel": c.id, "ts": m.ts, "message": s.wireMessage(c, m)}, nil
}

// setStatus is assistant.threads.setStatus; an empty status clears it.
func (s *Server) setStatus(r *request) (obj, *apiError) {
	c, e := s.resolveChannel(r.p["channel_id"], false)
	if e != nil {
		return nil, e
	}
	if r.p["thread_ts"] == "" {
		return nil, errCode("invalid_arguments")
	}
	key := c.id + "/" + r.p["thread_ts"]
	if st := r.p["status"]; st != "" {
		s.statuses[key] = st
	} else {
		delete(s.statuses, key)
	}
	s.changed()
	return obj{}, nil
}

// EndStream ends the stream of the message at ts in channelID now, as
// Slack does on its own some minutes after a stream started (see
// Options.StreamLifetime), so a test need not wait for it.
func (s *Server) EndStream(channelID, ts string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.mustChannel(channelID).msgs[ts]; m != nil && m.streaming {
		m.streamEnds = s.now()
	}
}
