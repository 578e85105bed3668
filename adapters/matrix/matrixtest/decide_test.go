package matrixtest

import (
	"net/http"
	"testing"
	"time"
)

// The proxy's decisions on a fake clock, without a homeserver: per-account
// buckets, which kinds count, and the order of error rules, the limit and
// late answers.
func TestProxyDecide(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	p := &Proxy{now: func() time.Time { return now }}
	p.ResetCounts()
	p.SetMessageLimit(0.2, 2)
	msg := func(token string) request {
		return request{kind: KindMessage, token: token, limited: true, room: "!r:x"}
	}
	answer := func(req request) string {
		switch r := p.decide(req); {
		case r == nil:
			return "forward"
		case r.delay > 0:
			return "late " + r.delay.String()
		case r.errcode == "M_LIMIT_EXCEEDED":
			return "429 " + r.retryAfter.String()
		default:
			return r.errcode
		}
	}
	steps := []struct {
		what string
		req  request
		want string
	}{
		{"a's burst", msg("a"), "forward"},
		{"a's burst", msg("a"), "forward"},
		{"a over", msg("a"), "429 5s"},
		{"b has its own bucket", msg("b"), "forward"},
		{"typing is not limited", request{kind: KindTyping, token: "a", room: "!r:x"}, "forward"},
		{"membership is not limited", request{kind: KindState, token: "a", room: "!r:x"}, "forward"},
		{"unauthenticated is not limited", msg(""), "forward"},
	}
	for _, s := range steps {
		if got := answer(s.req); got != s.want {
			t.Fatalf("%s: %s, want %s", s.what, got, s.want)
		}
	}
	now = now.Add(2 * time.Second)
	if got := answer(msg("a")); got != "429 3s" {
		t.Fatalf("a 2s later: %s, want 429 3s", got)
	}

	// Error rules come before the limit and do not use up the bucket; a
	// late answer applies only to a request the limit lets through.
	now = now.Add(3 * time.Second)
	p.ForbidRedactions(1)
	p.SlowNext(KindMessage, 1, time.Minute)
	if got := answer(request{kind: KindRedaction, token: "a", limited: true}); got != "M_FORBIDDEN" {
		t.Fatalf("forbidden redaction: %s", got)
	}
	if got := answer(msg("a")); got != "late 1m0s" {
		t.Fatalf("slow message within the limit: %s", got)
	}
	if got := answer(msg("a")); got != "429 5s" {
		t.Fatalf("message over the limit: %s, want 429 5s (the slow rule is used up)", got)
	}
	p.VanishRoom("!r:x")
	p.LimitNext(AnyKind, 1, time.Second)
	if got := answer(msg("b")); got != "M_FORBIDDEN" {
		t.Fatalf("vanished room: %s (the first rule added wins)", got)
	}
	if got := answer(request{kind: KindTyping, token: "b", room: "!other:x"}); got != "429 1s" {
		t.Fatalf("LimitNext(AnyKind) elsewhere: %s", got)
	}
	if got := answer(request{kind: KindTyping, token: "b", room: "!other:x"}); got != "forward" {
		t.Fatalf("after LimitNext is used up: %s", got)
	}
	p.ClearFaults()
	p.SetMessageLimit(0, 0)
	if got := answer(msg("a")); got != "forward" {
		t.Fatalf("without faults or limit: %s", got)
	}

	c := p.Counts()
	if c.Requests[KindMessage] != 10 || c.Forwarded[KindMessage] != 6 || c.Limited != 4 {
		t.Fatalf("counts %+v, want 10 messages, 6 forwarded, 4 limited", c)
	}
	if c.Forwarded[KindTyping] != 2 || c.Requests[KindRedaction] != 1 || c.Forwarded[KindRedaction] != 0 {
		t.Fatalf("counts %+v", c)
	}
}

// A 429 body as Synapse writes it, with retry_after_ms rounded up and the
// Retry-After header in whole seconds.
func TestErrorResponseShape(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPut, "http://x/", nil)
	resp := errorResponse(r, &rule{status: 429, errcode: "M_LIMIT_EXCEEDED", text: limitText, retryAfter: 4200*time.Millisecond + 1})
	body := make([]byte, resp.ContentLength)
	if _, err := resp.Body.Read(body); err != nil {
		t.Fatal(err)
	}
	want := `{"errcode":"M_LIMIT_EXCEEDED","error":"Too Many Requests","retry_after_ms":4201}`
	if string(body) != want || resp.Header.Get("Retry-After") != "5" || resp.StatusCode != 429 {
		t.Fatalf("%d Retry-After %q %s, want 429 Retry-After 5 %s", resp.StatusCode, resp.Header.Get("Retry-After"), body, want)
	}
}
