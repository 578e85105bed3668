package slacktest

import (
	"encoding/json"
	"io"
	"net/http"
	"path"
	"strconv"
)

// Where response URLs point: slash commands and interactions.
const (
	commandsPath = "/commands/"
	actionsPath  = "/actions/"
	// maxResponses is how often a response URL may be used.
	maxResponses = 5
)

// responseURL is what a response URL answers for.
type responseURL struct {
	kind      string // commandsPath or actionsPath
	channel   string
	messageTS string // the message clicked, for actions
	user      string
	uses      int
}

// newResponseURL returns a new response URL. Callers hold s.mu.
func (s *Server) newResponseURL(kind, channelID, messageTS, userID string) string {
	token := newUUID()
	s.responses[token] = &responseURL{kind: kind, channel: channelID, messageTS: messageTS, user: userID}
	return s.base + kind + s.TeamID + "/" + strconv.Itoa(len(s.responses)) + "/" + token
}

// serveResponseURL answers a POST to a response URL, as slack-go's
// MsgOptionResponseURL, MsgOptionReplaceOriginal and
// MsgOptionDeleteOriginal send it: replace_original updates the message
// whose button was clicked, delete_original deletes it, response_type
// "in_channel" posts a message of the bot, and anything else is an
// ephemeral answer only the person sees (recorded as a call, shown
// nowhere). A URL takes maxResponses uses.
func (s *Server) serveResponseURL(w http.ResponseWriter, hr *http.Request) {
	var body struct {
		Text            string          `json:"text"`
		Blocks          json.RawMessage `json:"blocks"`
		ResponseType    string          `json:"response_type"`
		ReplaceOriginal bool            `json:"replace_original"`
		DeleteOriginal  bool            `json:"delete_original"`
		ThreadTS        string          `json:"thread_ts"`
	}
	data, err := io.ReadAll(io.LimitReader(hr.Body, 1<<20))
	if err != nil || json.Unmarshal(data, &body) != nil {
		writeJSON(w, http.StatusBadRequest, obj{"ok": false, "error": "invalid_payload"})
		return
	}
	s.mu.Lock()
	r := &request{method: "response_url", http: hr, now: s.now()}
	e := s.respond(r, path.Base(hr.URL.Path), body.Text, body.Blocks, body.ResponseType, body.ThreadTS, body.ReplaceOriginal, body.DeleteOriginal)
	code := ""
	if e != nil {
		code = e.code
	}
	s.record(r, code, 0, 0)
	s.mu.Unlock()
	if e != nil {
		writeJSON(w, e.status, obj{"ok": false, "error": e.code})
		return
	}
	writeJSON(w, http.StatusOK, obj{"ok": true})
}

// respond acts on a response URL's post. Callers hold s.mu.
func (s *Server) respond(r *request, token, text string, blocksRaw json.RawMessage, responseType, threadTS string, replace, del bool) *apiError {
	ru := s.responses[token]
	if ru == nil {
		return &apiError{code: "no_service", status: http.StatusNotFound}
	}
	if ru.uses >= maxResponses {
		return &apiError{code: "used_url", status: http.StatusNotFound}
	}
	ru.uses++
	r.channel = ru.channel
	blocks, e := checkBlocks(string(blocksRaw))
	if len(blocksRaw) == 0 || string(blocksRaw) == "null" {
		blocks, e = nil, nil
	}
	if e != nil {
		e.status = http.StatusBadRequest
		return e
	}
	c := s.channels[ru.channel]
	var m *message
	if ru.kind == actionsPath {
		m = c.msgs[ru.messageTS]
	}
	switch {
	case (replace || del) && (m == nil || m.deleted || m.botID != s.BotID):
		return &apiError{code: "message_not_found", status: http.StatusNotFound}
	case del:
		prev := s.wireMessage(c, m)
		m.deleted = true
		s.notify(c, s.deletedEvent(c, m, prev))
	case replace:
		prev := s.wireMessage(c, m)
		m.text, m.blocks = text, blocks
		m.edits++
		m.editedAt = r.now
		m.editTS = s.newTS()
		s.notify(c, s.changedEvent(c, m, prev))
	case responseType == "in_channel":
		if text == "" && len(blocks) == 0 {
			return &apiError{code: "no_text", status: http.StatusBadRequest}
		}
		nm := s.botMessage(c, threadTS)
		nm.text, nm.blocks = text, blocks
		s.addMessage(c, nm)
		s.notify(c, s.messageEvent(c, nm))
	}
	s.changed()
	return nil
}
