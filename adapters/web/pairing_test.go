package web_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/adapters/web/httpguard"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// pairings is a pairing service holding codes in memory, with the
// refusals commands.Service words for people.
type pairings struct {
	mu       sync.Mutex
	waiting  []core.PairingRequest
	admitted []core.Admission
	broken   error // every call fails with it, when set
}

func (p *pairings) Pairings(context.Context) ([]core.PairingRequest, []core.Admission, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting, p.admitted, p.broken
}

func (p *pairings) take(code string) (core.PairingRequest, error) {
	if p.broken != nil {
		return core.PairingRequest{}, p.broken
	}
	for i, r := range p.waiting {
		if r.Code == code {
			p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
			return r, nil
		}
	}
	return core.PairingRequest{}, &core.UserError{Msg: "no pairing code " + code + " is waiting", Err: core.ErrNotFound}
}

func (p *pairings) ApprovePairing(_ context.Context, code string) (core.Admission, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, err := p.take(code)
	if err != nil {
		return core.Admission{}, err
	}
	a := core.Admission{Origin: r.Origin, Actor: r.Actor, Code: r.Code, Approved: r.Created.Add(time.Minute)}
	p.admitted = append(p.admitted, a)
	return a, nil
}

func (p *pairings) DenyPairing(_ context.Context, code string) (core.PairingRequest, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.take(code)
}

// TestPairingAPI: the operator lists the codes, approves one, denies
// another, and is told plainly about a code that is not waiting, through
// the client `parley pairing` uses and behind the token.
func TestPairingAPI(t *testing.T) {
	asked := time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC)
	p := &pairings{waiting: []core.PairingRequest{
		{Code: "ABCD-EFGH", Origin: "telegram", Actor: core.Actor{ID: "666", Name: "Mallory"}, Created: asked},
		{Code: "JKLM-NPQR", Origin: "slack", Actor: core.Actor{ID: "U1"}, Created: asked},
	}}
	a := web.New(web.Options{Pairing: p})
	mux := http.NewServeMux()
	mux.Handle("/api/", httpguard.New(httpguard.Options{Token: "s3cret"}).API(a.Handler()))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	c := web.PairingClient{Base: srv.URL + "/", Token: "s3cret"}

	l, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Waiting) != 2 || l.Waiting[0] != (web.PairingWaiting{Code: "ABCD-EFGH", Platform: "telegram", User: "666", Name: "Mallory", Created: asked}) ||
		l.Admitted == nil || len(l.Admitted) != 0 {
		t.Fatalf("list: %+v", l)
	}
	adm, err := c.Approve(ctx, "ABCD-EFGH")
	if err != nil || adm != (web.PairingAdmitted{Platform: "telegram", User: "666", Name: "Mallory", Code: "ABCD-EFGH", Approved: asked.Add(time.Minute)}) {
		t.Fatalf("approve: %+v, %v", adm, err)
	}
	if w, err := c.Deny(ctx, "JKLM-NPQR"); err != nil || w.User != "U1" || w.Platform != "slack" {
		t.Fatalf("deny: %+v, %v", w, err)
	}
	if _, err := c.Approve(ctx, "ABCD-EFGH"); err == nil || err.Error() != "no pairing code ABCD-EFGH is waiting" {
		t.Fatalf("approving twice: %v", err)
	}
	if l, err := c.List(ctx); err != nil || len(l.Waiting) != 0 || len(l.Admitted) != 1 {
		t.Fatalf("list after: %+v, %v", l, err)
	}
	if _, err := (web.PairingClient{Base: srv.URL, Token: "nope"}).List(ctx); err == nil || !strings.Contains(err.Error(), "missing or wrong bearer token") {
		t.Fatalf("a wrong token: %v", err)
	}
}

// TestPairingAPIStatus: the status and body of each answer, including a
// failure with no words for people, and the routes before SetPairing.
func TestPairingAPIStatus(t *testing.T) {
	p := &pairings{}
	a := web.New(web.Options{})
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	do := func(method, path string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, strings.TrimSpace(string(b)), resp.Header
	}
	if st, body, _ := do("GET", "/api/pairing"); st != http.StatusServiceUnavailable {
		t.Fatalf("before SetPairing: %d %s", st, body)
	}
	a.SetPairing(p)
	tests := []struct {
		method, path string
		broken       error
		status       int
		body         string
	}{
		{"GET", "/api/pairing", nil, http.StatusOK, `{"waiting":[],"admitted":[]}`},
		{"POST", "/api/pairing/XXXX-XXXX/approve", nil, http.StatusNotFound, `{"error":"no pairing code XXXX-XXXX is waiting"}`},
		{"POST", "/api/pairing/XXXX-XXXX/deny", &core.UserError{Msg: "pairing is off: set [access] pairing = true", Err: core.ErrInvalid},
			http.StatusBadRequest, `{"error":"pairing is off: set [access] pairing = true"}`},
		{"GET", "/api/pairing", errors.New("bolt: disk on fire"), http.StatusInternalServerError, `{"error":"` + delivery.GenericUserMessage + `"}`},
		{"GET", "/api/pairing/XXXX-XXXX/approve", nil, http.StatusMethodNotAllowed, "Method Not Allowed"},
		{"GET", "/api/pairing/", nil, http.StatusNotFound, "404 page not found"},
	}
	for _, tt := range tests {
		p.broken = tt.broken
		st, body, h := do(tt.method, tt.path)
		if st != tt.status || body != tt.body {
			t.Errorf("%s %s: %d %s, want %d %s", tt.method, tt.path, st, body, tt.status, tt.body)
		}
		if tt.body[0] == '{' && (h.Get("Content-Type") != "application/json" || h.Get("Cache-Control") != "") {
			t.Errorf("%s %s: headers %v", tt.method, tt.path, h)
		}
	}
}
