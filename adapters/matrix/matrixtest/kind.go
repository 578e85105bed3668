package matrixtest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"maunium.net/go/mautrix/id"
)

// Kind is what a client-server API request does, as the proxy counts and
// matches it.
type Kind int

// The kinds of request. A reaction is a KindMessage (an m.reaction event
// sent like a message); an edit is a message event with an m.replace
// relation.
const (
	KindOther     Kind = iota // anything else: sync, membership, media, reads
	KindMessage               // PUT /rooms/{id}/send/{type}/{txn}, except edits and redactions
	KindEdit                  // the same with m.relates_to.rel_type m.replace
	KindRedaction             // PUT /rooms/{id}/redact/{event}/{txn}, or an m.room.redaction sent with /send
	KindState                 // PUT /rooms/{id}/state/{type}[/{key}]
	KindTyping                // PUT /rooms/{id}/typing/{user}
	numKinds
)

// AnyKind matches requests of every kind in the fault methods of [Proxy].
const AnyKind Kind = -1

func (k Kind) String() string {
	switch k {
	case KindOther:
		return "other"
	case KindMessage:
		return "message"
	case KindEdit:
		return "edit"
	case KindRedaction:
		return "redaction"
	case KindState:
		return "state"
	case KindTyping:
		return "typing"
	case AnyKind:
		return "any"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// request is what the proxy knows of a client request.
type request struct {
	kind    Kind
	room    id.RoomID // "" outside /rooms/{id}/…
	token   string    // the access token, "" when unauthenticated
	limited bool      // counted by Synapse's rc_message
	// authMedia: under /_matrix/client/v1/media (authenticated media).
	authMedia bool
}

// classify reads a client-server API request. Which requests count
// against rc_message follows Synapse: every event a client creates through
// /send, /state and /redact, except membership events (m.room.member has
// its own limits, rc_joins and rc_invites). Typing notifications, receipts,
// room creation (rc_room_creation), /sync, media and reads do not count.
func classify(r *http.Request, body []byte) request {
	req := request{kind: KindOther, token: accessToken(r)}
	parts := pathSegments(r.URL)
	req.authMedia = len(parts) >= 4 && parts[0] == "_matrix" && parts[1] == "client" && parts[2] == "v1" && parts[3] == "media"
	// _matrix client {version} rooms {roomID} {action} …
	if len(parts) < 6 || parts[0] != "_matrix" || parts[1] != "client" || parts[3] != "rooms" {
		return req
	}
	req.room = id.RoomID(parts[4])
	action, rest := parts[5], parts[6:]
	switch {
	case action == "send" && len(rest) >= 1 && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		req.limited = true
		switch {
		case rest[0] == "m.room.redaction":
			req.kind = KindRedaction
		case relType(body) == "m.replace":
			req.kind = KindEdit
		default:
			req.kind = KindMessage
		}
	case action == "redact" && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		req.kind, req.limited = KindRedaction, true
	case action == "state" && len(rest) >= 1 && r.Method == http.MethodPut:
		req.kind, req.limited = KindState, rest[0] != "m.room.member"
	case action == "typing" && r.Method == http.MethodPut:
		req.kind = KindTyping
	}
	return req
}

func pathSegments(u *url.URL) []string {
	raw := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	out := make([]string, len(raw))
	for i, s := range raw {
		if un, err := url.PathUnescape(s); err == nil {
			s = un
		}
		out[i] = s
	}
	return out
}

func relType(body []byte) string {
	var c struct {
		RelatesTo struct {
			RelType string `json:"rel_type"`
		} `json:"m.relates_to"`
	}
	if json.Unmarshal(body, &c) != nil {
		return ""
	}
	return c.RelatesTo.RelType
}

func accessToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return strings.TrimPrefix(h, "Bearer ")
	}
	return r.URL.Query().Get("access_token")
}
