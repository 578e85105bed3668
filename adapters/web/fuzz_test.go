package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// FuzzAPIBodies sends arbitrary bodies to every endpoint that decodes one
// ($S stands for a real session's id). Whatever the body, the answer is
// never a server error, a refusal is {"error": …}, and text that is not
// valid Unicode is refused.
func FuzzAPIBodies(f *testing.F) {
	paths := []string{"/api/sessions", "/api/chat", "/api/sessions/$S/messages", "/api/sessions/$S/answer",
		"/api/sessions/$S/title"}
	for _, seed := range []struct {
		path uint8
		body string
	}{
		{0, `{"title":"t"}`},
		{0, ``},
		{1, `{"session_id":"$S","text":"hi","client_id":"c1"}`},
		{1, `{"text":"a\ud800"}`},
		{2, `{"text":"hello"}`},
		{2, `{"text":"x","txet":1}`},
		{3, `{"question_id":"q1","option":1}`},
		{3, `{"question_id":"q1","option":1e99}`},
		{2, "{\"text\":\"\xff\"}"},
		{1, `{"text":"x"} trailing`},
		{4, `{"title":"renamed"}`},
		{4, `{"title":"\udc00"}`},
	} {
		f.Add(seed.path, []byte(seed.body))
	}
	s := newStack(f)
	id := s.newSession("fuzz")
	client := s.srv.Client()
	client.Timeout = 10 * time.Second
	f.Fuzz(func(t *testing.T, path uint8, body []byte) {
		body = bytes.ReplaceAll(body, []byte("$S"), []byte(id))
		p := string(bytes.ReplaceAll([]byte(paths[int(path)%len(paths)]), []byte("$S"), []byte(id)))
		resp, err := client.Post(s.srv.URL+p, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		status := resp.StatusCode
		if status >= 500 {
			t.Fatalf("POST %s %q: %d %s", p, body, status, answer)
		}
		if status >= 400 {
			var e struct{ Error string }
			if err := json.Unmarshal(answer, &e); err != nil || e.Error == "" {
				t.Fatalf("POST %s %q: %d with body %s, not {\"error\": …}", p, body, status, answer)
			}
		}
		if core.CheckJSONText(body) != nil && status < 400 {
			t.Fatalf("POST %s %q took text that is not valid Unicode: %d %s", p, body, status, answer)
		}
	})
}
