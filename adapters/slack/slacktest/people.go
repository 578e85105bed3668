package slacktest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Post makes u write text in a channel, as a reply in the thread threadTS
// when it is not "" (a reply's ts names its thread), and queues the
// message event. It returns the message's ts. As at Slack, the bot hears
// nothing from a channel it is not in.
func (s *Server) Post(u User, channelID, threadTS, text string) string {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, m := s.personMessage(u, channelID, threadTS)
	m.text = text
	m.blocks = richText(blockID(m.ts, 0), text)
	s.addMessage(c, m)
	s.notify(c, s.messageEvent(c, m))
	return m.ts
}

// PostFile makes u share a file in a channel (in a thread when threadTS is
// not ""): a message with subtype file_share whose files[] point at the
// server; downloading them needs the bot token. It returns the message's
// ts.
func (s *Server) PostFile(u User, channelID, threadTS, name, mimeType string, data []byte) string {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, m := s.personMessage(u, channelID, threadTS)
	f := s.newFile(u.ID, name, name, mimeType)
	f.data = append([]byte(nil), data...)
	f.uploaded = true
	f.shares = append(f.shares, share{channel: c.id, ts: m.ts})
	m.subtype = "file_share"
	m.files = []*file{f}
	s.addMessage(c, m)
	s.notify(c, s.messageEvent(c, m))
	return m.ts
}

// Edit makes u, the author, change the text of their message; the bot gets
// a message_changed event.
func (s *Server) Edit(u User, channelID, ts, text string) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(channelID)
	m := c.msgs[ts]
	if m == nil || m.deleted || m.user != u.ID || m.botID != "" {
		s.tb.Fatalf("slacktest: %s has no message %s in %s to edit", u.ID, ts, channelID)
	}
	prev := s.wireMessage(c, m)
	m.text = text
	m.blocks = richText(blockID(m.ts, 0), text)
	m.edits++
	m.editedAt = s.now()
	m.editTS = s.newTS()
	s.notify(c, s.changedEvent(c, m, prev))
}

// Delete deletes a message as a person does (the author, or an admin for
// someone else's, the bot's included); the bot gets a message_deleted
// event.
func (s *Server) Delete(channelID, ts string) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(channelID)
	m := c.msgs[ts]
	if m == nil || m.deleted {
		s.tb.Fatalf("slacktest: no message %s in %s to delete", ts, channelID)
	}
	prev := s.wireMessage(c, m)
	m.deleted = true
	s.changed()
	s.notify(c, s.deletedEvent(c, m, prev))
}

// Join adds u to a channel, posting the channel_join message Slack shows
// and queueing its event. Joining the bot (User{ID: s.BotUserID}) makes it
// a member, so that it hears the channel from then on.
func (s *Server) Join(u User, channelID string) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(channelID)
	if c.im {
		s.tb.Fatalf("slacktest: cannot join the DM %s", channelID)
	}
	if u.ID == s.BotUserID {
		c.botMember = true
	} else {
		s.mustUser(u.ID)
	}
	c.members[u.ID] = true
	m := &message{ts: s.newTS(), user: u.ID, subtype: "channel_join", text: fmt.Sprintf("<@%s> has joined the channel", u.ID), posted: s.now()}
	s.addMessage(c, m)
	s.notify(c, s.messageEvent(c, m))
}

// Slash makes u run a slash command (e.g. "/parley") with text in a
// channel and queues its slash_commands envelope. Slack sends the channel
// but no thread: a command typed in a thread looks like one typed in the
// channel. It returns the trigger id.
func (s *Server) Slash(u User, channelID, command, text string) string {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(channelID)
	s.mustUser(u.ID)
	trigger := triggerID(s.now().UnixMilli())
	name := c.name
	if c.im {
		name = "directmessage"
	}
	payload, _ := json.Marshal(map[string]string{
		"token": verificationToken, "team_id": s.TeamID, "team_domain": teamDomain, "channel_id": c.id,
		"channel_name": name, "user_id": u.ID, "user_name": u.Name, "command": command, "text": text,
		"api_app_id": appID, "is_enterprise_install": "false", "trigger_id": trigger,
		"response_url": s.newResponseURL(commandsPath, c.id, "", u.ID),
	})
	s.enqueue("slash_commands", payload)
	return trigger
}

// Click makes u press the button actionID with value on a message and
// queues the interactive block_actions envelope. The button need not be
// there any more: a person can press a button just before the message
// loses it; then block_id is "" and the button has no text.
func (s *Server) Click(u User, channelID, messageTS, actionID, value string) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(channelID)
	s.mustUser(u.ID)
	m := c.msgs[messageTS]
	if m == nil || m.deleted {
		s.tb.Fatalf("slacktest: no message %s in %s to click", messageTS, channelID)
	}
	now := s.now()
	action := obj{"action_id": actionID, "block_id": "", "value": value, "type": "button", "action_ts": formatTS(now)}
	if a := findAction(m.blocks, m.ts, actionID); a != nil {
		action["block_id"] = a.blockID
		action["type"] = a.kind
		if a.text != nil {
			action["text"] = a.text
		}
	}
	container := obj{"type": "message", "message_ts": m.ts, "channel_id": c.id, "is_ephemeral": false}
	if m.isReply() {
		container["thread_ts"] = m.threadTS
	}
	payload, _ := json.Marshal(obj{
		"type": "block_actions", "token": verificationToken, "api_app_id": appID,
		"user":      obj{"id": u.ID, "username": u.Name, "name": u.Name, "team_id": s.TeamID},
		"container": container, "trigger_id": triggerID(now.UnixMilli()),
		"team": obj{"id": s.TeamID, "domain": teamDomain}, "enterprise": nil, "is_enterprise_install": false,
		"channel": obj{"id": c.id, "name": c.name}, "message": s.wireMessage(c, m), "state": obj{"values": obj{}},
		"response_url": s.newResponseURL(actionsPath, c.id, m.ts, u.ID), "actions": []obj{action},
	})
	s.enqueue("interactive", payload)
}

// personMessage starts a message by u in a channel, in a thread when
// threadTS is not "". Callers hold s.mu.
func (s *Server) personMessage(u User, channelID, threadTS string) (*channel, *message) {
	s.tb.Helper()
	c := s.mustChannel(channelID)
	s.mustUser(u.ID)
	m := &message{ts: s.newTS(), user: u.ID, clientMsgID: newUUID(), posted: s.now()}
	if threadTS != "" {
		m.threadTS = threadRoot(c, threadTS)
		if m.threadTS == "" {
			s.tb.Fatalf("slacktest: no thread %s in %s", threadTS, channelID)
		}
	}
	if !c.im {
		c.members[u.ID] = true
	}
	return c, m
}

// notify queues the events_api envelope of an event in c, when the bot is
// in c. Callers hold s.mu.
func (s *Server) notify(c *channel, event obj) {
	if c.botMember {
		s.enqueue("events_api", s.eventCallback(event))
	}
}

// action is a button (or other element) found in a message's blocks.
type action struct {
	blockID, kind string
	text          any
}

// findAction finds the element actionID in blocks (actions blocks and
// section accessories), with the block_id Slack gives it: its own, or one
// Slack generated.
func findAction(blocks json.RawMessage, ts, actionID string) *action {
	var bs []struct {
		Type      string            `json:"type"`
		BlockID   string            `json:"block_id"`
		Elements  []json.RawMessage `json:"elements"`
		Accessory json.RawMessage   `json:"accessory"`
	}
	if json.Unmarshal(blocks, &bs) != nil {
		return nil
	}
	for i, b := range bs {
		els := b.Elements
		if len(b.Accessory) > 0 {
			els = append(els, b.Accessory)
		}
		for _, raw := range els {
			var el struct {
				Type     string `json:"type"`
				ActionID string `json:"action_id"`
				Text     any    `json:"text"`
			}
			if json.Unmarshal(raw, &el) != nil || el.ActionID != actionID {
				continue
			}
			id := b.BlockID
			if id == "" {
				id = blockID(ts, i)
			}
			return &action{blockID: id, kind: el.Type, text: el.Text}
		}
	}
	return nil
}

// blockID is the block_id Slack generates for block i of message ts when
// it has none: short and stable.
func blockID(ts string, i int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	h := uint32(2166136261)
	for _, b := range []byte(fmt.Sprintf("%s/%d", ts, i)) {
		h = (h ^ uint32(b)) * 16777619
	}
	id := make([]byte, 4)
	for k := range id {
		id[k] = alphabet[h%uint32(len(alphabet))]
		h /= uint32(len(alphabet))
	}
	return string(id)
}

// triggerID returns a new trigger id in Slack's shape.
func triggerID(ms int64) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%d.%d.%s", ms, 1000000001, hex.EncodeToString(b[:]))
}
