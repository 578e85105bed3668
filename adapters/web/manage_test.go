package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
)

// Renaming from the page sets the title (origin web), shows in the list and
// in the session's UiState, and stays a person's choice: a later first
// message does not replace it.
func TestRenameFromPage(t *testing.T) {
	s := newStack(t)
	id := must[sessionJSON](t, http.StatusCreated)(s.post("/api/sessions", ``)).ID
	got := must[sessionJSON](t, http.StatusOK)(s.post("/api/sessions/"+string(id)+"/title", `{"title":"  Deploy review  "}`))
	if got.ID != id || got.Title != "Deploy review" {
		t.Fatalf("renamed: %+v", got)
	}
	s.chat(id, "first words of the person")
	list := must[struct{ Sessions []sessionJSON }](t, http.StatusOK)(s.get("/api/sessions"))
	if len(list.Sessions) != 1 || list.Sessions[0].Title != "Deploy review" {
		t.Fatalf("list after rename and a message: %+v", list.Sessions)
	}
	st := must[struct {
		State struct{ Title string } `json:"state"`
	}](t, http.StatusOK)(s.get("/api/sessions/" + string(id) + "/state"))
	if st.State.Title != "Deploy review" {
		t.Fatalf("UiState title %q", st.State.Title)
	}
}

// An untitled session created through the API is named by the first
// message the page or a tool sends to it.
func TestUntitledSessionNamedByFirstMessage(t *testing.T) {
	s := newStack(t)
	created := must[sessionJSON](t, http.StatusCreated)(s.post("/api/sessions", `{}`))
	must[postedJSON](t, http.StatusOK)(s.post("/api/sessions/"+string(created.ID)+"/messages",
		`{"text":"Why is the nightly build red?\nSee the log."}`))
	list := must[struct{ Sessions []sessionJSON }](t, http.StatusOK)(s.get("/api/sessions"))
	if len(list.Sessions) != 1 || list.Sessions[0].Title != "Why is the nightly build red?" {
		t.Fatalf("list: %+v (created as %q)", list.Sessions, created.Title)
	}
}

// Archiving closes an open session — the agent reads a close from the
// page — and is harmless to repeat.
func TestArchive(t *testing.T) {
	s := newStack(t)
	id := s.newSession("done with this")
	got := must[sessionJSON](t, http.StatusOK)(s.post("/api/sessions/"+string(id)+"/archive", ``))
	if got.ID != id || got.Status != core.StatusClosed || got.Title != "done with this" {
		t.Fatalf("archived: %+v", got)
	}
	msgs, err := s.store.Inbox(context.Background(), id, "", 0)
	if err != nil || len(msgs) != 1 || msgs[0].Mime != core.MimeControl || msgs[0].Content != "close" || msgs[0].Origin != "web" {
		t.Fatalf("inbox after archive = %+v, %v", msgs, err)
	}
	before, _ := s.store.LastEventSeq(context.Background())
	again := must[sessionJSON](t, http.StatusOK)(s.post("/api/sessions/"+string(id)+"/archive", `{}`))
	if again.Status != core.StatusClosed {
		t.Fatalf("archived again: %+v", again)
	}
	if after, _ := s.store.LastEventSeq(context.Background()); after != before {
		t.Fatalf("archiving a closed session stored events: seq %d → %d", before, after)
	}
	if msgs, _ := s.store.Inbox(context.Background(), id, "", 0); len(msgs) != 1 {
		t.Fatalf("archiving twice told the agent twice: %+v", msgs)
	}
}

func TestManageRefusals(t *testing.T) {
	s := newStack(t)
	open := s.newSession("open")
	closed := s.newSession("closed")
	s.handle(core.Command{Kind: core.Close, Session: closed, Origin: core.OriginAPI})
	tests := []struct {
		name, path, body string
		want             int
		msg              string
	}{
		{"empty title", "/api/sessions/" + string(open) + "/title", `{"title":"  "}`, http.StatusBadRequest, "title is empty"},
		{"no body", "/api/sessions/" + string(open) + "/title", ``, http.StatusBadRequest, "empty"},
		{"title too long", "/api/sessions/" + string(open) + "/title", `{"title":"` + strings.Repeat("t", 300) + `"}`, http.StatusBadRequest, "longer than 256"},
		{"unknown field", "/api/sessions/" + string(open) + "/title", `{"titel":"x"}`, http.StatusBadRequest, `unknown field "titel"`},
		{"lone surrogate", "/api/sessions/" + string(open) + "/title", `{"title":"\ud800"}`, http.StatusBadRequest, "surrogate"},
		{"rename unknown session", "/api/sessions/nope/title", `{"title":"x"}`, http.StatusNotFound, "unknown session nope (GET /api/sessions lists them)"},
		{"rename closed session", "/api/sessions/" + string(closed) + "/title", `{"title":"x"}`, http.StatusConflict, "closed"},
		{"archive unknown session", "/api/sessions/nope/archive", ``, http.StatusNotFound, "unknown session nope (GET /api/sessions lists them)"},
		{"archive with a field", "/api/sessions/" + string(open) + "/archive", `{"really":true}`, http.StatusBadRequest, `unknown field "really"`},
	}
	before, _ := s.store.LastEventSeq(context.Background())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := must[struct{ Error string }](t, tt.want)(s.post(tt.path, tt.body))
			if !strings.Contains(e.Error, tt.msg) {
				t.Fatalf("error %q does not say %q", e.Error, tt.msg)
			}
		})
	}
	if after, _ := s.store.LastEventSeq(context.Background()); after != before {
		t.Errorf("refused requests stored events: seq %d → %d", before, after)
	}
	if got := must[sessionJSON](t, http.StatusOK)(s.post("/api/sessions/"+string(open)+"/archive", ``)); got.Status != core.StatusClosed {
		t.Fatalf("the open session was not archived after the refusals: %+v", got)
	}
}
