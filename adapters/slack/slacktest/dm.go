package slacktest

import (
	"strings"
)

// Direct messages. A DM ("D…") between a person and the bot exists once
// either side opens it: OpenDM for the person, conversations.open (or
// chat.postMessage to a user id) for the bot. Its messages reach the app
// as message events with channel_type "im" (the message.im subscription),
// whether the bot is mentioned or not, and the bot may post and reply in
// threads there as in a channel. Only one-to-one DMs are modelled:
// conversations.open with several users (a group DM) answers
// not_supported here.

func init() {
	methods["conversations.open"] = method{handle: (*Server).conversationsOpen, scope: "im:write", rate: tier3}
}

// conversationsOpen is conversations.open: the DM with users (one user
// id), created if needed, or the one channel names. With return_im the
// answer carries the whole channel object; opening one already open says
// no_op and already_open, as Slack does.
func (s *Server) conversationsOpen(r *request) (obj, *apiError) {
	var c *channel
	switch {
	case r.p["channel"] != "":
		c = s.channels[r.p["channel"]]
		if c == nil || !c.im {
			return nil, errCode("channel_not_found")
		}
	case r.p["users"] == "":
		return nil, errCode("users_list_not_supplied")
	default:
		ids := strings.Split(r.p["users"], ",")
		if len(ids) > 1 {
			return nil, errCode("not_supported")
		}
		id := strings.TrimSpace(ids[0])
		u := s.users[id]
		switch {
		case u == nil:
			return nil, errCode("user_not_found")
		case u.bot:
			return nil, errCode("cannot_dm_bot")
		}
		_, existed := s.dms[id]
		c = s.openDM(id)
		if !existed {
			return s.openAnswer(r, c, false), nil
		}
	}
	return s.openAnswer(r, c, true), nil
}

// openAnswer is conversations.open's answer for c.
func (s *Server) openAnswer(r *request, c *channel, already bool) obj {
	ch := obj{"id": c.id}
	if flag(r.p, "return_im") {
		ch = obj{"id": c.id, "created": c.created.Unix(), "is_im": true, "is_org_shared": false, "user": c.dmUser,
			"is_user_deleted": false, "priority": 0, "is_open": true, "context_team_id": s.TeamID}
	}
	out := obj{"channel": ch}
	if already {
		out["no_op"] = true
		out["already_open"] = true
	}
	return out
}
