package slacktest

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
)

// wireMessage is a message as conversations.history and the Events API
// show it. Callers hold s.mu.
func (s *Server) wireMessage(c *channel, m *message) obj {
	w := obj{"type": "message", "ts": m.ts, "text": m.text}
	if m.user != "" {
		w["user"] = m.user
	}
	if m.subtype != "" {
		w["subtype"] = m.subtype
	}
	if m.botID != "" {
		w["bot_id"] = m.botID
		w["app_id"] = appID
		w["bot_profile"] = s.botProfile()
	} else if m.clientMsgID != "" {
		w["client_msg_id"] = m.clientMsgID
	}
	if m.subtype == "" || m.subtype == "file_share" {
		w["team"] = s.TeamID
	}
	if len(m.blocks) > 0 {
		w["blocks"] = m.blocks
	}
	if len(m.attachments) > 0 {
		w["attachments"] = m.attachments
	}
	if m.editTS != "" {
		w["edited"] = obj{"user": m.user, "ts": m.editTS}
	}
	if len(m.files) > 0 {
		fs := make([]obj, len(m.files))
		for i, f := range m.files {
			fs[i] = s.wireFile(f)
		}
		w["files"] = fs
		w["upload"] = true
		w["display_as_bot"] = false
	}
	if m.isReply() {
		w["thread_ts"] = m.threadTS
		if root := c.msgs[m.threadTS]; root != nil {
			w["parent_user_id"] = root.user
		}
	} else if len(m.replies) > 0 {
		var users []string
		latest := ""
		count := 0
		for _, r := range m.replies {
			if r.deleted {
				continue
			}
			count++
			latest = r.ts
			if !slices.Contains(users, r.user) {
				users = append(users, r.user)
			}
		}
		w["thread_ts"] = m.ts
		w["reply_count"] = count
		w["reply_users_count"] = len(users)
		w["reply_users"] = users
		w["latest_reply"] = latest
		w["is_locked"] = false
		w["subscribed"] = false
	}
	if len(m.reactions) > 0 {
		rs := make([]obj, 0, len(m.reactions))
		for _, name := range m.reactions {
			users := m.reactedBy[name]
			rs = append(rs, obj{"name": name, "users": users, "count": len(users)})
		}
		w["reactions"] = rs
	}
	return w
}

// botProfile is the bot_profile of the bot's messages.
func (s *Server) botProfile() obj {
	return obj{
		"id": s.BotID, "app_id": appID, "name": botName, "deleted": false, "team_id": s.TeamID, "updated": 1700000000,
		"icons": obj{"image_36": s.base + "/avatars/bot_36.png", "image_48": s.base + "/avatars/bot_48.png", "image_72": s.base + "/avatars/bot_72.png"},
	}
}

// wireFile is a file object as messages, events and files.info carry it.
// Callers hold s.mu.
func (s *Server) wireFile(f *file) obj {
	ext := strings.TrimPrefix(path.Ext(f.name), ".")
	filetype := strings.ToLower(ext)
	if filetype == "" {
		filetype = "binary"
	}
	w := obj{
		"id": f.id, "created": f.created.Unix(), "timestamp": f.created.Unix(), "name": f.name, "title": f.title,
		"mimetype": f.mime, "filetype": filetype, "pretty_type": strings.ToUpper(filetype), "user": f.user,
		"user_team": s.TeamID, "editable": false, "size": len(f.data), "mode": "hosted", "is_external": false,
		"external_type": "", "is_public": f.public(s), "public_url_shared": false, "display_as_bot": false, "username": "",
		"url_private": s.base + f.privatePath(), "url_private_download": s.base + f.downloadPath(),
		"permalink":        fmt.Sprintf("https://%s.slack.com/files/%s/%s/%s", teamDomain, f.user, f.id, f.name),
		"permalink_public": fmt.Sprintf("https://slack-files.com/%s-%s-0000000000", s.TeamID, f.id),
		"file_access":      "visible", "has_rich_preview": false, "media_display_type": "unknown",
	}
	if !f.uploaded {
		w["file_access"] = "check_file_info"
	}
	return w
}

// channelType is a channel's channel_type in events.
func channelType(c *channel) string {
	if c.im {
		return "im"
	}
	return "channel"
}

// messageEvent is the Events API event of a new message. Callers hold s.mu.
func (s *Server) messageEvent(c *channel, m *message) obj {
	ev := s.wireMessage(c, m)
	ev["channel"] = c.id
	ev["event_ts"] = m.ts
	ev["channel_type"] = channelType(c)
	return ev
}

// changedEvent is the message_changed event of an edit; prev is the
// message before it. Callers hold s.mu.
func (s *Server) changedEvent(c *channel, m *message, prev obj) obj {
	ts := s.newTS()
	return obj{
		"type": "message", "subtype": "message_changed", "hidden": true, "message": s.wireMessage(c, m),
		"previous_message": prev, "channel": c.id, "ts": ts, "event_ts": ts, "channel_type": channelType(c),
	}
}

// deletedEvent is the message_deleted event of a deletion; prev is the
// message before it. Callers hold s.mu.
func (s *Server) deletedEvent(c *channel, m *message, prev obj) obj {
	ts := s.newTS()
	ev := obj{
		"type": "message", "subtype": "message_deleted", "hidden": true, "deleted_ts": m.ts,
		"previous_message": prev, "channel": c.id, "ts": ts, "event_ts": ts, "channel_type": channelType(c),
	}
	if m.isReply() {
		ev["thread_ts"] = m.threadTS
	}
	return ev
}

// eventCallback wraps an event as the payload of an events_api envelope.
// Callers hold s.mu.
func (s *Server) eventCallback(event obj) json.RawMessage {
	s.seq['E']++
	body := obj{
		"token": verificationToken, "team_id": s.TeamID, "context_team_id": s.TeamID, "context_enterprise_id": nil,
		"api_app_id": appID, "event": event, "type": "event_callback",
		"event_id": fmt.Sprintf("Ev%010d", s.seq['E']), "event_time": s.now().Unix(),
		"authorizations": []obj{{
			"enterprise_id": nil, "team_id": s.TeamID, "user_id": s.BotUserID, "is_bot": true, "is_enterprise_install": false,
		}},
		"is_ext_shared_channel": false, "event_context": fmt.Sprintf("4-eyJldCI6Im1lc3NhZ2UiLCJ0aWQiOiIlcyJ9-%d", s.seq['E']),
	}
	data, _ := json.Marshal(body) // maps of strings, numbers and raw JSON
	return data
}

// richText is the rich_text block Slack's clients send along with a
// person's plain text.
func richText(blockID, text string) json.RawMessage {
	data, _ := json.Marshal([]obj{{
		"type": "rich_text", "block_id": blockID,
		"elements": []obj{{"type": "rich_text_section", "elements": []obj{{"type": "text", "text": text}}}},
	}})
	return data
}
