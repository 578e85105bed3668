package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/parley-chat/parley/core"
)

// Managing a session from the page: renaming it and archiving it.
//
// Archiving is what a person does with a conversation that is over: it is
// closed — the agent reads a close in its inbox, as after /close on a
// platform, and input is refused from then on — and the page's list shows
// only open sessions unless "Show archived" is ticked. Closed and archived
// are therefore one state: a session closed on any platform is archived on
// the page too, and nothing new is stored to hide it. Archiving a session
// that is closed already succeeds without doing anything, so a retried
// request or a second tab is harmless.

// rename serves POST /api/sessions/{id}/title {title}: the person renames
// the session (core.Rename, origin web); platforms show the new title.
func (a *Adapter) rename(w http.ResponseWriter, r *http.Request, c call) {
	var req struct {
		Title string `json:"title"`
	}
	if !a.decode(w, r, &req, false) {
		return
	}
	if strings.TrimSpace(req.Title) == "" {
		writeJSON(w, http.StatusBadRequest, errorBody{"title is empty"})
		return
	}
	id := core.SessionID(r.PathValue("id"))
	if _, err := c.handler.Handle(r.Context(), core.Command{Kind: core.Rename, Session: id,
		Origin: core.Origin(Name), Actor: Actor, Place: place(id), Title: req.Title}); err != nil {
		a.fail(w, r, err)
		return
	}
	a.writeSession(w, r, c, id)
}

// archive serves POST /api/sessions/{id}/archive with no body: the person
// closes the session (core.Close, origin web), which hides it from the
// page's list.
func (a *Adapter) archive(w http.ResponseWriter, r *http.Request, c call) {
	if !a.decode(w, r, &struct{}{}, true) {
		return
	}
	id := core.SessionID(r.PathValue("id"))
	s, err := c.back.store.Session(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if s.Status != core.StatusClosed {
		_, err := c.handler.Handle(r.Context(), core.Command{Kind: core.Close, Session: id,
			Origin: core.Origin(Name), Actor: Actor, Place: place(id)})
		// Closed meanwhile (another tab, a platform): archived all the same.
		if err != nil && !errors.Is(err, core.ErrSessionClosed) {
			a.fail(w, r, err)
			return
		}
	}
	a.writeSession(w, r, c, id)
}

// writeSession answers with the session as it is now.
func (a *Adapter) writeSession(w http.ResponseWriter, r *http.Request, c call, id core.SessionID) {
	s, err := c.back.store.Session(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(s))
}
