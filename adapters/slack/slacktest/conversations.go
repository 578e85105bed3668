package slacktest

import (
	"slices"
	"strconv"
)

// authTest is auth.test: who the token is. The scopes go in the
// X-OAuth-Scopes header, as on every answer.
func (s *Server) authTest(*request) (obj, *apiError) {
	return obj{
		"url": "https://" + teamDomain + ".slack.com/", "team": "Parley Test", "user": botName,
		"team_id": s.TeamID, "user_id": s.BotUserID, "bot_id": s.BotID, "is_enterprise_install": false,
	}, nil
}

// readScope is the scope reading a channel's info (read) or messages
// (history) needs.
func readScope(c *channel, kind string) string {
	if c.im {
		return "im:" + kind
	}
	return "channels:" + kind
}

// anyScope lists the scopes reading some kind of conversation takes: a
// token with none of them is refused before the channel is looked at.
func anyScope(kind string) string {
	return "channels:" + kind + ",groups:" + kind + ",mpim:" + kind + ",im:" + kind
}

// conversationsInfo is conversations.info.
func (s *Server) conversationsInfo(r *request) (obj, *apiError) {
	if e := s.needScope(anyScope("read"), false); e != nil {
		return nil, e
	}
	c, e := s.resolveChannel(r.p["channel"], false)
	if e != nil {
		return nil, e
	}
	if e := s.needScope(readScope(c, "read"), false); e != nil {
		return nil, e
	}
	info := obj{"id": c.id, "created": c.created.Unix(), "is_archived": c.archived, "is_org_shared": false, "context_team_id": s.TeamID}
	if c.im {
		info["is_im"] = true
		info["user"] = c.dmUser
		info["is_open"] = true
		info["is_user_deleted"] = false
		info["priority"] = 0
	} else {
		info["name"] = c.name
		info["name_normalized"] = c.name
		info["is_channel"] = true
		info["is_group"] = false
		info["is_im"] = false
		info["is_mpim"] = false
		info["is_private"] = false
		info["is_general"] = false
		info["is_shared"] = false
		info["is_ext_shared"] = false
		info["is_member"] = c.botMember
		info["creator"] = ""
		info["topic"] = obj{"value": "", "creator": "", "last_set": 0}
		info["purpose"] = obj{"value": "", "creator": "", "last_set": 0}
		if flag(r.p, "include_num_members") {
			info["num_members"] = len(c.members)
		}
	}
	return obj{"channel": info}, nil
}

// history is where conversations.history and conversations.replies may
// read: the channel, if the bot is in it and has the scope.
func (s *Server) history(r *request) (*channel, *apiError) {
	if e := s.needScope(anyScope("history"), false); e != nil {
		return nil, e
	}
	c, e := s.resolveChannel(r.p["channel"], false)
	if e != nil {
		return nil, e
	}
	if e := s.needScope(readScope(c, "history"), false); e != nil {
		return nil, e
	}
	if !c.botMember {
		return nil, errCode("not_in_channel")
	}
	return c, nil
}

// conversationsHistory is conversations.history: top-level messages,
// newest first, limit (default 100) at a time with a cursor.
func (s *Server) conversationsHistory(r *request) (obj, *apiError) {
	c, e := s.history(r)
	if e != nil {
		return nil, e
	}
	var ms []*message
	for i := len(c.order) - 1; i >= 0; i-- {
		m := c.order[i]
		if m.deleted || m.isReply() || !inRange(m.ts, r.p) {
			continue
		}
		ms = append(ms, m)
	}
	page, next := paginate(ms, r.p)
	out := make([]obj, len(page))
	for i, m := range page {
		out[i] = s.wireMessage(c, m)
	}
	return obj{"messages": out, "has_more": next != "", "pin_count": 0, "response_metadata": obj{"next_cursor": next}}, nil
}

// conversationsReplies is conversations.replies: a thread, root first,
// oldest first. A reply's ts names its thread.
func (s *Server) conversationsReplies(r *request) (obj, *apiError) {
	c, e := s.history(r)
	if e != nil {
		return nil, e
	}
	root := c.msgs[threadRoot(c, r.p["ts"])]
	if root == nil {
		return nil, errCode("thread_not_found")
	}
	var ms []*message
	if !root.deleted {
		ms = append(ms, root)
	}
	for _, m := range root.replies {
		if !m.deleted && inRange(m.ts, r.p) {
			ms = append(ms, m)
		}
	}
	page, next := paginate(ms, r.p)
	out := make([]obj, len(page))
	for i, m := range page {
		out[i] = s.wireMessage(c, m)
	}
	return obj{"messages": out, "has_more": next != "", "response_metadata": obj{"next_cursor": next}}, nil
}

// inRange applies the oldest, latest and inclusive arguments to ts.
func inRange(ts string, p map[string]string) bool {
	t, _ := strconv.ParseFloat(ts, 64)
	incl := flag(p, "inclusive")
	if v := p["oldest"]; v != "" {
		if o, err := strconv.ParseFloat(v, 64); err == nil && (t < o || t == o && !incl) {
			return false
		}
	}
	if v := p["latest"]; v != "" {
		if l, err := strconv.ParseFloat(v, 64); err == nil && (t > l || t == l && !incl) {
			return false
		}
	}
	return true
}

// paginate cuts a page of ms by the limit and cursor arguments; the cursor
// is the offset of the next page.
func paginate(ms []*message, p map[string]string) ([]*message, string) {
	limit, err := strconv.Atoi(p["limit"])
	if err != nil || limit <= 0 {
		limit = 100
	}
	limit = min(limit, 999)
	from, _ := strconv.Atoi(p["cursor"])
	from = max(0, min(from, len(ms)))
	to := min(from+limit, len(ms))
	next := ""
	if to < len(ms) {
		next = strconv.Itoa(to)
	}
	return ms[from:to], next
}

// usersInfo is users.info.
func (s *Server) usersInfo(r *request) (obj, *apiError) {
	u := s.users[r.p["user"]]
	if u == nil {
		return nil, errCode("user_not_found")
	}
	info := obj{
		"id": u.id, "team_id": s.TeamID, "name": u.name, "real_name": u.name, "deleted": false, "is_bot": u.bot,
		"is_app_user": false, "tz": "Europe/Berlin", "tz_label": "Central European Time", "tz_offset": 3600,
		"profile": obj{"real_name": u.name, "real_name_normalized": u.name, "display_name": u.name, "display_name_normalized": u.name, "team": s.TeamID},
	}
	if u.bot {
		info["profile"].(obj)["bot_id"] = s.BotID
		info["profile"].(obj)["api_app_id"] = appID
	}
	return obj{"user": info}, nil
}

// reactionTarget finds the message a reactions call names.
func (s *Server) reactionTarget(r *request) (*channel, *message, string, *apiError) {
	name := r.p["name"]
	if r.p["channel"] == "" || r.p["timestamp"] == "" {
		return nil, nil, "", errCode("no_item_specified")
	}
	if name == "" {
		return nil, nil, "", errCode("invalid_name")
	}
	c, e := s.resolveChannel(r.p["channel"], false)
	if e != nil {
		return nil, nil, "", e
	}
	if !c.botMember {
		return nil, nil, "", errCode("not_in_channel")
	}
	if c.archived {
		return nil, nil, "", errCode("is_archived")
	}
	m := c.msgs[r.p["timestamp"]]
	if m == nil || m.deleted {
		return nil, nil, "", errCode("message_not_found")
	}
	return c, m, name, nil
}

// addReaction is reactions.add, as the bot.
func (s *Server) addReaction(r *request) (obj, *apiError) {
	_, m, name, e := s.reactionTarget(r)
	if e != nil {
		return nil, e
	}
	if slices.Contains(m.reactedBy[name], s.BotUserID) {
		return nil, errCode("already_reacted")
	}
	if m.reactedBy == nil {
		m.reactedBy = map[string][]string{}
	}
	if len(m.reactedBy[name]) == 0 {
		m.reactions = append(m.reactions, name)
	}
	m.reactedBy[name] = append(m.reactedBy[name], s.BotUserID)
	s.changed()
	return obj{}, nil
}

// removeReaction is reactions.remove, as the bot.
func (s *Server) removeReaction(r *request) (obj, *apiError) {
	_, m, name, e := s.reactionTarget(r)
	if e != nil {
		return nil, e
	}
	i := slices.Index(m.reactedBy[name], s.BotUserID)
	if i < 0 {
		return nil, errCode("no_reaction")
	}
	m.reactedBy[name] = slices.Delete(m.reactedBy[name], i, i+1)
	if len(m.reactedBy[name]) == 0 {
		delete(m.reactedBy, name)
		m.reactions = slices.DeleteFunc(m.reactions, func(n string) bool { return n == name })
	}
	s.changed()
	return obj{}, nil
}
