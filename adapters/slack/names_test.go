package slack

import (
	"context"
	"fmt"
	"net/url"
	"testing"
)

// TestPeopleNames: a person's name is asked of users.info once and then
// remembered: the profile's display name, else the real name, else the
// member's name. When Slack does not answer, the input still goes on,
// without a name, and the name is asked again next time.
func TestPeopleNames(t *testing.T) {
	api := newFakeAPI(t)
	users := map[string]map[string]any{
		"U3": {"id": "U3", "name": "cleo", "real_name": "Cleo Real", "profile": map[string]any{"display_name": "Cleo"}},
		"U4": {"id": "U4", "name": "dan", "real_name": "Dan Real", "profile": map[string]any{"display_name": ""}},
		"U5": {"id": "U5", "name": "eve", "profile": map[string]any{}},
	}
	api.on("users.info", func(f url.Values) answer {
		if u, ok := users[f.Get("user")]; ok {
			return okAnswer(map[string]any{"user": u})
		}
		return failAnswer("user_not_found")
	})
	h := newRecorder("U3", "U4", "U5", "U6")
	a := newTestAdapter(t, api, withAuthorizer(h))
	reply := func(user, ts string) {
		t.Helper()
		ev := event(t, `{"type":"message","channel":"C1","user":"`+user+`","text":"more","ts":"`+ts+`","thread_ts":"100.1"}`)
		if err := a.onEvent(context.Background(), h, ev); err != nil {
			t.Fatalf("onEvent: %v", err)
		}
	}
	for i, user := range []string{"U3", "U4", "U5", "U6", "U3", "U6"} {
		reply(user, fmt.Sprintf("20%d.0", i))
	}
	var got []string
	for _, c := range h.commands() {
		got = append(got, c.Actor.ID+"="+c.Actor.Name)
	}
	sameList(t, got, []string{"U3=Cleo", "U4=Dan Real", "U5=eve", "U6=", "U3=Cleo", "U6="})
	asked := map[string]int{}
	for _, c := range api.called("users.info") {
		asked[c.Form.Get("user")]++
	}
	if asked["U3"] != 1 || asked["U6"] != 2 {
		t.Errorf("users.info asked %v; want U3 once (remembered) and U6 twice (never answered)", asked)
	}
}
