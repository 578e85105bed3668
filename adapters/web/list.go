package web

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/parley-chat/parley/core"
)

// listSessions serves GET /api/sessions?limit=&cursor=&status=: a page of
// sessions, newest first (by creation), and "next", the cursor of the
// following page, when there is one. A page is read from the store alone
// (core.Store.SessionsPage), so its cost does not grow with the number of
// sessions. limit defaults to core.DefaultSessionPage and may be at most
// core.MaxSessionPage; status keeps only sessions with that status.
func (a *Adapter) listSessions(w http.ResponseWriter, r *http.Request, c call) {
	q, problem := sessionQuery(r)
	if problem != "" {
		writeJSON(w, http.StatusBadRequest, errorBody{problem})
		return
	}
	page, next, err := c.back.store.SessionsPage(r.Context(), q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]sessionView, 0, len(page))
	for _, s := range page {
		out = append(out, viewOf(s))
	}
	writeJSON(w, http.StatusOK, sessionList{Sessions: out, Next: next})
}

// sessionList is the answer of GET /api/sessions.
type sessionList struct {
	Sessions []sessionView `json:"sessions"`
	// Next is the cursor of the next page; absent on the last.
	Next core.SessionID `json:"next,omitempty"`
}

// sessionQuery reads the list's query parameters, or says in plain words
// what is wrong with them.
func sessionQuery(r *http.Request) (core.SessionQuery, string) {
	v := r.URL.Query()
	q := core.SessionQuery{Limit: core.DefaultSessionPage}
	for name := range v {
		switch name {
		case "limit", "cursor", "status", "access_token":
		default:
			return q, fmt.Sprintf("unknown query parameter %q (GET /api/sessions takes limit, cursor and status)", name)
		}
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > core.MaxSessionPage {
			return q, fmt.Sprintf("limit %q is not a number from 1 to %d", s, core.MaxSessionPage)
		}
		q.Limit = n
	}
	if s := v.Get("cursor"); s != "" {
		if !core.ValidID(s) {
			return q, fmt.Sprintf("cursor %q is not one this API gave (pass the \"next\" of the previous page)", s)
		}
		q.After = core.SessionID(s)
	}
	if s := v.Get("status"); s != "" {
		if !core.Status(s).Valid() {
			return q, fmt.Sprintf("status %q is not one of idle, working, waiting, closed", s)
		}
		q.Status = core.Status(s)
	}
	return q, ""
}
