package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
)

// startMainWith runs the daemon in-process on a free loopback port with
// the default configuration changed by edit, and returns once its API
// serves (the page attaches a moment after Run starts, and answers 503
// until then).
func startMainWith(t *testing.T, edit func(*config.Config)) *serve.Main {
	t.Helper()
	cfg := testConfig(t)
	if edit != nil {
		edit(&cfg)
	}
	m := servetest.Serve(t, &serve.Main{Config: cfg, Platforms: platforms.All()})
	servetest.WaitHealth(t, m.Addr(), "that parley serves", func(servetest.Health) bool { return true })
	return m
}

// send makes one request to a running parley, with the given Host (empty:
// the address itself) and headers, and returns the status and body. A
// stream (/api/events) is read only as far as its status.
func send(t *testing.T, addr, method, path, host, body string, header map[string]string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, ""
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// sessions lists the ids of the sessions parley has, from its store.
func sessions(t *testing.T, m *serve.Main) []core.SessionID {
	t.Helper()
	list, err := m.Daemon().Store.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []core.SessionID
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestForeignHostReadsNothing: a DNS-rebinding page reaches parley on
// 127.0.0.1 with its own name in Host; no route answers it with data,
// while loopback names still work.
func TestForeignHostReadsNothing(t *testing.T) {
	m := startMain(t)
	addr := m.Addr()
	session := postChat(t, addr, "", "the secret plan")
	_, port, _ := net.SplitHostPort(addr)
	for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1.evil.example:" + port, "localhost.evil.example"} {
		for _, path := range []string{"/api/sessions", "/api/sessions/" + session + "/state", "/", "/app.js", "/api/events", "/api/health", "/metrics", "/mcp"} {
			status, body := send(t, addr, "GET", path, host, "", nil)
			if status != http.StatusForbidden {
				t.Errorf("GET %s with Host %s: status %d, want 403", path, host, status)
			}
			if strings.Contains(body, session) || strings.Contains(body, "secret plan") {
				t.Errorf("GET %s with Host %s answered data: %s", path, host, body)
			}
		}
	}
	for _, host := range []string{"", "localhost:" + port, "LOCALHOST", "[::1]:" + port, "127.0.0.2"} {
		if status, body := send(t, addr, "GET", "/api/sessions", host, "", nil); status != http.StatusOK || !strings.Contains(body, session) {
			t.Errorf("GET /api/sessions with Host %q: %d %s", host, status, body)
		}
	}
}

// TestForeignHostCannotAnswer: a rebinding page cannot answer an agent's
// approval; the page on parley's own address can.
func TestForeignHostCannotAnswer(t *testing.T) {
	m := startMain(t)
	addr := m.Addr()
	a := connectAgent(t, addr)
	session := postChat(t, addr, "", "deploy please")
	answered := askInBackground(t, a, session, "Deploy to production?", 60, "yes", "no")
	var qid string
	deadline := time.Now().Add(30 * time.Second)
	for qid == "" {
		for _, it := range webState(t, addr, session).State.Items {
			if it.Type == uistate.UIItemQuestion && it.Answer == nil {
				qid = it.QuestionID
			}
		}
		if qid == "" && time.Now().After(deadline) {
			t.Fatal("the question did not appear")
		}
	}
	body := `{"question_id":"` + qid + `","option":1}`
	path := "/api/sessions/" + session + "/answer"
	json := map[string]string{"Content-Type": "application/json"}
	if status, msg := send(t, addr, "POST", path, "evil.example", body, json); status != http.StatusForbidden {
		t.Fatalf("answer with a foreign Host: %d %s", status, msg)
	}
	if it := questionItem(t, webState(t, addr, session), "Deploy to production?"); it.Answer != nil {
		t.Fatalf("the forged answer was taken: %+v", it.Answer)
	}
	page := map[string]string{"Content-Type": "application/json", "Origin": "http://" + addr, "Sec-Fetch-Site": "same-origin"}
	if status, msg := send(t, addr, "POST", path, "", body, page); status != http.StatusOK {
		t.Fatalf("the page's answer: %d %s", status, msg)
	}
	if got := awaitText(t, answered); !strings.HasPrefix(got, "answered: ") {
		t.Fatalf("ui.ask returned %q", got)
	}
}

// TestForgedChangesRefused: what a cross-site page can send without a
// preflight (forms, text/plain or no-cors fetches, anything with a foreign
// Origin or Sec-Fetch-Site: cross-site) changes nothing, with or without
// a token; the page's own requests and curl's still do.
func TestForgedChangesRefused(t *testing.T) {
	for _, token := range []string{"", "0123456789abcdef0123"} {
		name := "no token"
		if token != "" {
			name = "token"
		}
		t.Run(name, func(t *testing.T) {
			m := startMainWith(t, func(c *config.Config) { c.HTTP.Token = token })
			addr := m.Addr()
			_, port, _ := net.SplitHostPort(addr)
			headers := func(kv ...string) map[string]string {
				h := map[string]string{}
				if token != "" {
					h["Authorization"] = "Bearer " + token
				}
				for i := 0; i < len(kv); i += 2 {
					h[kv[i]] = kv[i+1]
				}
				return h
			}
			chat := `{"text":"run rm -rf"}`
			forged := []struct {
				name string
				h    map[string]string
				want int
			}{
				{"form text/plain", headers("Content-Type", "text/plain", "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"), http.StatusForbidden},
				{"form urlencoded", headers("Content-Type", "application/x-www-form-urlencoded", "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"), http.StatusForbidden},
				{"text/plain fetch, old browser", headers("Content-Type", "text/plain;charset=UTF-8"), http.StatusUnsupportedMediaType},
				{"urlencoded, old browser", headers("Content-Type", "application/x-www-form-urlencoded"), http.StatusUnsupportedMediaType},
				{"multipart, old browser", headers("Content-Type", "multipart/form-data; boundary=x"), http.StatusUnsupportedMediaType},
				{"no content type", headers(), http.StatusUnsupportedMediaType},
				{"foreign Origin", headers("Content-Type", "application/json", "Origin", "http://evil.example"), http.StatusForbidden},
				{"null Origin", headers("Content-Type", "application/json", "Origin", "null"), http.StatusForbidden},
				{"another local port", headers("Content-Type", "application/json", "Origin", "http://127.0.0.1:1"), http.StatusForbidden},
				{"cross-site", headers("Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"), http.StatusForbidden},
			}
			for _, f := range forged {
				if status, msg := send(t, addr, "POST", "/api/chat", "", chat, f.h); status != f.want {
					t.Errorf("%s: status %d, want %d: %s", f.name, status, f.want, msg)
				}
			}
			if s := sessions(t, m); len(s) != 0 {
				t.Fatalf("forged requests made sessions %v", s)
			}
			ok := []struct {
				name string
				h    map[string]string
			}{
				{"the page", headers("Content-Type", "application/json", "Origin", "http://"+addr, "Sec-Fetch-Site", "same-origin")},
				{"the page at localhost", headers("Content-Type", "application/json", "Origin", "http://localhost:"+port, "Sec-Fetch-Site", "same-origin")},
				{"curl", headers("Content-Type", "application/json; charset=utf-8")},
			}
			for _, o := range ok {
				host := ""
				if strings.Contains(o.h["Origin"], "localhost") {
					host = "localhost:" + port
				}
				if status, msg := send(t, addr, "POST", "/api/chat", host, chat, o.h); status != http.StatusOK {
					t.Errorf("%s: status %d: %s", o.name, status, msg)
				}
			}
			if s := sessions(t, m); len(s) != len(ok) {
				t.Fatalf("%d sessions after %d good requests", len(s), len(ok))
			}
		})
	}
}

// TestAllowedHosts: a configured name is answered (a reverse proxy that
// keeps the Host, or a name on the network), for /mcp too, and a page
// served under it may change things; other names are still refused.
func TestAllowedHosts(t *testing.T) {
	m := startMainWith(t, func(c *config.Config) { c.HTTP.AllowedHosts = []string{"Parley.Example.org"} })
	addr := m.Addr()
	if status, body := send(t, addr, "GET", "/api/sessions", "parley.example.org", "", nil); status != http.StatusOK {
		t.Fatalf("allowed host: %d %s", status, body)
	}
	mcpInit := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if status, body := send(t, addr, "POST", "/mcp", "parley.example.org:443", mcpInit,
		map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}); status != http.StatusOK {
		t.Fatalf("allowed host on /mcp: %d %s", status, body)
	}
	// Behind a proxy that rewrites Host to the loopback address, the
	// page's Origin is the public name.
	page := map[string]string{"Content-Type": "application/json", "Origin": "https://parley.example.org", "Sec-Fetch-Site": "same-origin"}
	if status, body := send(t, addr, "POST", "/api/chat", "", `{"text":"hi"}`, page); status != http.StatusOK {
		t.Fatalf("page under the allowed name: %d %s", status, body)
	}
	if status, _ := send(t, addr, "GET", "/api/sessions", "other.example.org", "", nil); status != http.StatusForbidden {
		t.Fatalf("another host: %d", status)
	}
}
