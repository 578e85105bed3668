package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Pairing for the operator (commands/pairing.go has the design): the
// running daemon serves the codes at /api/pairing, with the token like the
// rest of /api, and `parley pairing` is its client (PairingClient), so the
// data directory, which the daemon holds locked, is never opened twice.
//
//	GET  /api/pairing                → PairingList
//	POST /api/pairing/{code}/approve → PairingAdmitted
//	POST /api/pairing/{code}/deny    → PairingWaiting
//
// An unknown code is 404, another refusal the service words for people is
// 400, both as {"error": "…"}.

// Pairings is what the pairing API asks; commands.Service is one. With
// pairing off it lists nothing and knows no code.
type Pairings interface {
	Pairings(ctx context.Context) ([]core.PairingRequest, []core.Admission, error)
	ApprovePairing(ctx context.Context, code string) (core.Admission, error)
	DenyPairing(ctx context.Context, code string) (core.PairingRequest, error)
}

// PairingWaiting is a code waiting for the operator, as the API shows it.
type PairingWaiting struct {
	Code     string      `json:"code"`
	Platform core.Origin `json:"platform"`
	User     string      `json:"user"`
	Name     string      `json:"name,omitempty"`
	Created  time.Time   `json:"created"`
}

// PairingAdmitted is a person admitted by a pairing, as the API shows it.
type PairingAdmitted struct {
	Platform core.Origin `json:"platform"`
	User     string      `json:"user"`
	Name     string      `json:"name,omitempty"`
	Code     string      `json:"code"`
	Approved time.Time   `json:"approved"`
}

// PairingList is the body of GET /api/pairing: never null lists.
type PairingList struct {
	Waiting  []PairingWaiting  `json:"waiting"`
	Admitted []PairingAdmitted `json:"admitted"`
}

type pairingBox struct{ p Pairings }

// SetPairing gives the adapter the pairings /api/pairing serves. cmd calls
// it once the commands service exists, before serving; until then the
// routes answer 503.
func (a *Adapter) SetPairing(p Pairings) { a.pairing.Store(&pairingBox{p}) }

// pairingRoutes serves /api/pairing and below with its own mux, so that a
// path or method it does not know is answered as before the API moved here
// (the mux's plain 404 or 405), not as the rest of /api.
func (a *Adapter) pairingRoutes() http.Handler {
	mux := http.NewServeMux()
	with := func(fn func(http.ResponseWriter, *http.Request, Pairings)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b := a.pairing.Load()
			if b == nil {
				writeJSON(w, http.StatusServiceUnavailable, errorBody{"parley is starting or stopping; try again"})
				return
			}
			fn(w, r, b.p)
		}
	}
	mux.HandleFunc("GET /api/pairing", with(func(w http.ResponseWriter, r *http.Request, p Pairings) {
		reqs, adm, err := p.Pairings(r.Context())
		if err != nil {
			pairingFail(w, err)
			return
		}
		out := PairingList{Waiting: []PairingWaiting{}, Admitted: []PairingAdmitted{}}
		for _, q := range reqs {
			out.Waiting = append(out.Waiting, waitingOf(q))
		}
		for _, ad := range adm {
			out.Admitted = append(out.Admitted, admittedOf(ad))
		}
		pairingJSON(w, http.StatusOK, out)
	}))
	mux.HandleFunc("POST /api/pairing/{code}/approve", with(func(w http.ResponseWriter, r *http.Request, p Pairings) {
		ad, err := p.ApprovePairing(r.Context(), r.PathValue("code"))
		if err != nil {
			pairingFail(w, err)
			return
		}
		pairingJSON(w, http.StatusOK, admittedOf(ad))
	}))
	mux.HandleFunc("POST /api/pairing/{code}/deny", with(func(w http.ResponseWriter, r *http.Request, p Pairings) {
		q, err := p.DenyPairing(r.Context(), r.PathValue("code"))
		if err != nil {
			pairingFail(w, err)
			return
		}
		pairingJSON(w, http.StatusOK, waitingOf(q))
	}))
	return mux
}

func waitingOf(p core.PairingRequest) PairingWaiting {
	return PairingWaiting{Code: p.Code, Platform: p.Origin, User: p.Actor.ID, Name: p.Actor.Name, Created: p.Created}
}

func admittedOf(a core.Admission) PairingAdmitted {
	return PairingAdmitted{Platform: a.Origin, User: a.Actor.ID, Name: a.Actor.Name, Code: a.Code, Approved: a.Approved}
}

// pairingFail answers an error: the service's words for people with 404 or
// 400, anything else as a bare 500 (its text may name internals).
func pairingFail(w http.ResponseWriter, err error) {
	msg, ok := delivery.UserMessage(err)
	status := http.StatusInternalServerError
	switch {
	case !ok:
	case errors.Is(err, core.ErrNotFound):
		status = http.StatusNotFound
	default:
		status = http.StatusBadRequest
	}
	pairingJSON(w, status, errorBody{msg})
}

// pairingJSON writes a pairing answer. Unlike writeJSON it sets no
// Cache-Control: the routes answer as they did when cmd served them.
func pairingJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// PairingClient calls a running daemon's pairing API; `parley pairing` is
// built on it.
type PairingClient struct {
	// Base is the daemon's URL without a trailing slash, such as
	// http://127.0.0.1:8765.
	Base string
	// Token is [http] token; empty sends none.
	Token string
}

// List returns the codes waiting and the people admitted.
func (c PairingClient) List(ctx context.Context) (PairingList, error) {
	var l PairingList
	err := c.do(ctx, http.MethodGet, "/api/pairing", &l)
	return l, err
}

// Approve admits the person who was given code.
func (c PairingClient) Approve(ctx context.Context, code string) (PairingAdmitted, error) {
	var a PairingAdmitted
	err := c.do(ctx, http.MethodPost, "/api/pairing/"+url.PathEscape(code)+"/approve", &a)
	return a, err
}

// Deny drops code; its person is not told.
func (c PairingClient) Deny(ctx context.Context, code string) (PairingWaiting, error) {
	var p PairingWaiting
	err := c.do(ctx, http.MethodPost, "/api/pairing/"+url.PathEscape(code)+"/deny", &p)
	return p, err
}

// do makes one call. A refusal comes back as the error the daemon gave,
// which is worded for the operator.
func (c PairingClient) do(ctx context.Context, method, path string, out any) error {
	base := strings.TrimSuffix(c.Base, "/")
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if method != http.MethodGet {
		// The daemon takes changes only as JSON (httpguard); these carry
		// no body.
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("is parley running at %s? %w", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return json.Unmarshal(body, out)
}
