package matrixtest

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Which requests are which kind, and which count against rc_message.
func TestClassify(t *testing.T) {
	const room = "/_matrix/client/v3/rooms/%21abc:localhost"
	for _, tc := range []struct {
		method, path, body string
		kind               Kind
		limited            bool
	}{
		{"PUT", room + "/send/m.room.message/t1", `{"msgtype":"m.text","body":"hi"}`, KindMessage, true},
		{"PUT", room + "/send/m.room.message/t2", `{"body":"* x","m.new_content":{},"m.relates_to":{"rel_type":"m.replace","event_id":"$e"}}`, KindEdit, true},
		{"PUT", room + "/send/m.room.message/t3", `{"body":"x","m.relates_to":{"m.in_reply_to":{"event_id":"$e"}}}`, KindMessage, true},
		{"PUT", room + "/send/m.reaction/t4", `{"m.relates_to":{"rel_type":"m.annotation","event_id":"$e","key":"1️⃣"}}`, KindMessage, true},
		{"PUT", room + "/send/m.room.redaction/t5", `{"redacts":"$e"}`, KindRedaction, true},
		{"PUT", room + "/redact/%24e/t6", `{}`, KindRedaction, true},
		{"POST", "/_matrix/client/r0/rooms/%21abc:localhost/redact/%24e", `{}`, KindRedaction, true},
		{"PUT", room + "/state/m.room.name", `{"name":"x"}`, KindState, true},
		{"PUT", room + "/state/m.room.power_levels/", `{}`, KindState, true},
		{"PUT", room + "/state/m.room.member/%40bob:localhost", `{"membership":"leave"}`, KindState, false},
		{"PUT", room + "/typing/%40bot:localhost", `{"typing":true,"timeout":30000}`, KindTyping, false},
		{"GET", room + "/state/m.room.power_levels/", ``, KindOther, false},
		{"POST", room + "/join", `{}`, KindOther, false},
		{"POST", room + "/invite", `{"user_id":"@bob:localhost"}`, KindOther, false},
		{"POST", "/_matrix/client/v3/createRoom", `{}`, KindOther, false},
		{"GET", "/_matrix/client/v3/sync?timeout=30000", ``, KindOther, false},
		{"POST", "/_matrix/media/v3/upload", `data`, KindOther, false},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		r.Header.Set("Authorization", "Bearer tok")
		got := classify(r, []byte(tc.body))
		if got.kind != tc.kind || got.limited != tc.limited {
			t.Errorf("%s %s: %s limited=%v, want %s limited=%v", tc.method, tc.path, got.kind, got.limited, tc.kind, tc.limited)
		}
		if got.token != "tok" {
			t.Errorf("%s %s: token %q", tc.method, tc.path, got.token)
		}
	}
	r := httptest.NewRequest(http.MethodPut, room+"/send/m.room.message/t7?access_token=qtok", nil)
	if got := classify(r, nil); got.token != "qtok" || got.room != "!abc:localhost" {
		t.Errorf("query token %q room %q, want qtok !abc:localhost", got.token, got.room)
	}
}
