package matrixtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"
)

// Texts of the errors the proxy answers, as Synapse words them (clients
// act on the errcode; the text is for people reading logs).
const (
	limitText  = "Too Many Requests"
	redactText = "You don't have permission to redact events"
)

// Proxy is a reverse proxy on loopback in front of a homeserver, for what
// the homeserver does not produce by itself: a Synapse-like per-account
// message rate limit, injected faults, and counts of requests by kind.
// Point the client under test at URL; without limits or faults it passes
// every request through unchanged.
//
// Faults are rules added by LimitNext, SlowNext, HoldNext, ForbidRedactions,
// VanishRoom and WithoutAuthenticatedMedia; a rule for n requests expires
// after n (n < 0: never). A request meets, in this order: the first error rule that matches it
// (answered by the proxy, the homeserver never sees the request), the rate
// limit (likewise), and the first SlowNext or HoldNext rule that matches
// it (the homeserver does the work, the answer comes late; or the request
// reaches it only on ReleaseHeld).
//
// All methods are safe for concurrent use.
type Proxy struct {
	// URL is the base URL to give the client, http://127.0.0.1:PORT.
	URL string

	srv *httptest.Server
	now func() time.Time

	mu        sync.Mutex
	perSecond float64
	burst     int
	buckets   map[string]*Bucket // by access token
	rules     []*rule
	counts    Counts
	held      []*heldRequest
}

// Counts are the requests a [Proxy] saw, for assertions and benchmarks.
type Counts struct {
	// Requests counts every request received, by kind, whatever the
	// answer.
	Requests map[Kind]int
	// Forwarded counts the requests passed to the homeserver, by kind.
	Forwarded map[Kind]int
	// Accepted counts the forwarded requests the homeserver answered with
	// success, by kind: for event-creating kinds, the events stored, plus
	// retries of a transaction id the homeserver answered from its cache.
	// A late answer counts even when the client gave up waiting for it.
	Accepted map[Kind]int
	// Limited counts the M_LIMIT_EXCEEDED answers, by the rate limit and
	// by LimitNext alike.
	Limited int
}

type rule struct {
	kind      Kind
	room      id.RoomID // "" for every room
	authMedia bool      // only authenticated media requests
	remaining int       // < 0: every matching request
	// exactly one of: an error answer, or a delay of the real answer
	status     int
	errcode    string
	text       string
	retryAfter time.Duration // for M_LIMIT_EXCEEDED
	delay      time.Duration
	hold       bool // held before the homeserver until ReleaseHeld
}

// passes reports whether the rule lets the request reach the homeserver
// (late or held) rather than answer it.
func (r *rule) passes() bool { return r.delay > 0 || r.hold }

// heldRequest is a request HoldNext holds before the homeserver.
type heldRequest struct {
	release chan struct{} // closed by ReleaseHeld
	done    chan struct{} // closed when the homeserver answered
	resp    *http.Response
	err     error
}

// NewProxy starts a proxy in front of upstream (a homeserver's base URL)
// and stops it when the test ends.
func NewProxy(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		tb.Fatalf("proxy upstream %q: %v", upstream, err)
	}
	p := &Proxy{now: time.Now, buckets: map[string]*Bucket{}}
	p.ResetCounts()
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &proxyTransport{p: p, next: http.DefaultTransport}
	// A client that gives up (a deadline, a stopped sync) is not news.
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) {
		w.WriteHeader(http.StatusBadGateway)
	}
	p.srv = httptest.NewServer(rp)
	p.URL = p.srv.URL
	tb.Cleanup(func() {
		// What is still held reaches the homeserver, as it would have.
		p.ReleaseHeld()
		// Long polls and late answers end with their connections, so that
		// Close does not wait for them.
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	return p
}

// SetMessageLimit limits each account (each access token) to perSecond
// event-creating requests on average, with bursts of burst: Synapse's
// rc_message (defaults 0.2 and 10). The requests counted are those that
// create events — messages, edits and reactions (/send), state events
// other than membership (/state) and redactions — as in Synapse; typing,
// receipts, membership, room creation, /sync and media are not. A request
// over the limit is answered 429 M_LIMIT_EXCEEDED with retry_after_ms, and
// is not counted against the account. perSecond <= 0 removes the limit.
// Changing the limit forgets the accounts' history.
func (p *Proxy) SetMessageLimit(perSecond float64, burst int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.perSecond, p.burst = perSecond, max(burst, 1)
	p.buckets = map[string]*Bucket{}
}

// LimitNext answers the next n requests of the kind 429 M_LIMIT_EXCEEDED
// with retry_after_ms = retryAfter, whatever the rate limit says.
func (p *Proxy) LimitNext(kind Kind, n int, retryAfter time.Duration) {
	p.addRule(&rule{kind: kind, remaining: n, status: http.StatusTooManyRequests,
		errcode: "M_LIMIT_EXCEEDED", text: limitText, retryAfter: retryAfter})
}

// SlowNext passes the next n requests of the kind to the homeserver but
// holds the answer back for delay (or until the client gives up): the
// homeserver did the work, the client learns it late or never. A client
// that retries after its deadline must not post twice.
func (p *Proxy) SlowNext(kind Kind, n int, delay time.Duration) {
	p.addRule(&rule{kind: kind, remaining: n, delay: delay})
}

// HoldNext holds the next n requests of the kind before the homeserver —
// a homeserver still busy with them — until ReleaseHeld, however long the
// client waits: a client that gives up (a deadline, a killed process) has
// still made the request, which the homeserver completes on release.
//
// A held request reaches the homeserver as one that was already being
// processed when a retry of it (the same transaction id) arrived: Dendrite
// looks its transaction cache up when a request starts and fills it only
// when the request finishes, so such a retry is not recognised and makes
// a second event (Synapse shares the first request's result instead). To
// reproduce that whatever the timing, the released request is forwarded
// under the r0 path of the client API, which Dendrite serves alike but
// whose transactions it caches apart from v3's: the event is made under
// the same transaction id and device, and a retry through v3 is not
// answered from it, in whichever order they come.
func (p *Proxy) HoldNext(kind Kind, n int) {
	p.addRule(&rule{kind: kind, remaining: n, hold: true})
}

// Held reports how many requests HoldNext holds now.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

// ReleaseHeld passes the held requests to the homeserver, one after the
// other in the order they came, and returns once it answered them all.
func (p *Proxy) ReleaseHeld() {
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for _, h := range held {
		close(h.release)
		<-h.done
	}
}

// ForbidRedactions answers the next n redactions 403 M_FORBIDDEN, as a
// homeserver refuses a redaction of someone else's event by an account
// below the room's redact power level.
func (p *Proxy) ForbidRedactions(n int) {
	p.addRule(&rule{kind: KindRedaction, remaining: n, status: http.StatusForbidden,
		errcode: "M_FORBIDDEN", text: redactText})
}

// VanishRoom makes every request on the room (/rooms/{roomID}/…) fail from
// now on as it does for an account that is no longer in the room: 403
// M_FORBIDDEN. Only requests through the proxy see it; the account's
// membership and /sync are unchanged (kick the account with a [Person] for
// the real thing).
func (p *Proxy) VanishRoom(roomID id.RoomID) {
	p.addRule(&rule{kind: AnyKind, room: roomID, remaining: -1, status: http.StatusForbidden,
		errcode: "M_FORBIDDEN", text: "User not in room " + roomID.String()})
}

// WithoutAuthenticatedMedia makes the proxy a homeserver from before
// Matrix 1.11: every request under /_matrix/client/v1/media is answered
// 404 M_UNRECOGNIZED, as such a server answers an endpoint it does not
// know; the unauthenticated /_matrix/media/v3 still works.
func (p *Proxy) WithoutAuthenticatedMedia() {
	p.addRule(&rule{kind: AnyKind, authMedia: true, remaining: -1, status: http.StatusNotFound,
		errcode: "M_UNRECOGNIZED", text: "Unrecognized request"})
}

// ClearFaults removes every fault rule; the rate limit stays.
func (p *Proxy) ClearFaults() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

func (p *Proxy) addRule(r *rule) {
	if r.remaining == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, r)
}

// Counts returns a copy of the counts since the start or the last
// ResetCounts.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Counts{
		Requests:  maps.Clone(p.counts.Requests),
		Forwarded: maps.Clone(p.counts.Forwarded),
		Accepted:  maps.Clone(p.counts.Accepted),
		Limited:   p.counts.Limited,
	}
}

// ResetCounts sets every count to zero.
func (p *Proxy) ResetCounts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts = Counts{Requests: map[Kind]int{}, Forwarded: map[Kind]int{}, Accepted: map[Kind]int{}}
}

// decide counts the request and returns the rule that applies to it, or
// nil to forward it untouched. Injected errors come first; then the rate
// limit, as on a homeserver; a late answer is for a request that passed.
func (p *Proxy) decide(req request) *rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts.Requests[req.kind]++
	if r := p.takeRule(req, false); r != nil {
		if r.errcode == "M_LIMIT_EXCEEDED" {
			p.counts.Limited++
		}
		return r
	}
	if req.limited && p.perSecond > 0 && req.token != "" {
		b := p.buckets[req.token]
		if b == nil {
			b = &Bucket{Rate: p.perSecond, Burst: p.burst}
			p.buckets[req.token] = b
		}
		if ok, wait := b.Take(p.now()); !ok {
			p.counts.Limited++
			return &rule{status: http.StatusTooManyRequests, errcode: "M_LIMIT_EXCEEDED",
				text: limitText, retryAfter: wait}
		}
	}
	p.counts.Forwarded[req.kind]++
	return p.takeRule(req, true)
}

// takeRule returns the first error rule (or delay rule, with late) that
// matches the request, and uses up one of its requests.
func (p *Proxy) takeRule(req request, late bool) *rule {
	for i, r := range p.rules {
		if r.passes() != late ||
			(r.kind != AnyKind && r.kind != req.kind) || (r.room != "" && r.room != req.room) || (r.authMedia && !req.authMedia) {
			continue
		}
		if r.remaining > 0 {
			r.remaining--
			if r.remaining == 0 {
				p.rules = append(p.rules[:i:i], p.rules[i+1:]...)
			}
		}
		return r
	}
	return nil
}

// proxyTransport applies the proxy's rules between the reverse proxy and
// the homeserver.
type proxyTransport struct {
	p    *Proxy
	next http.RoundTripper
}

func (t *proxyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	req := classify(r, body)
	rl := t.p.decide(req)
	switch {
	case rl == nil:
		resp, err := t.next.RoundTrip(r)
		t.p.answered(req, resp)
		return resp, err
	case rl.hold:
		return t.hold(r, req, body)
	case rl.delay > 0:
		return t.late(r, req, body, rl.delay)
	default:
		return errorResponse(r, rl), nil
	}
}

// answered counts a homeserver's successful answer.
func (p *Proxy) answered(req request, resp *http.Response) {
	if resp == nil || resp.StatusCode/100 != 2 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts.Accepted[req.kind]++
}

// late forwards the request without the client's cancellation, so that the
// homeserver completes it, and answers after delay unless the client gave
// up first.
func (t *proxyTransport) late(r *http.Request, req request, body []byte, delay time.Duration) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), callTimeout)
	defer cancel()
	out := r.Clone(ctx)
	out.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	t.p.answered(req, resp)
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return resp, nil
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

// hold keeps the request until ReleaseHeld, then forwards it without the
// client's cancellation under the r0 path (see HoldNext); the client gets
// the answer if it still waits.
func (t *proxyTransport) hold(r *http.Request, req request, body []byte) (*http.Response, error) {
	h := &heldRequest{release: make(chan struct{}), done: make(chan struct{})}
	t.p.mu.Lock()
	t.p.held = append(t.p.held, h)
	t.p.mu.Unlock()
	go func() {
		defer close(h.done)
		<-h.release
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), callTimeout)
		defer cancel()
		out := r.Clone(ctx)
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.URL.Path = strings.Replace(out.URL.Path, "/_matrix/client/v3/", "/_matrix/client/r0/", 1)
		out.URL.RawPath = strings.Replace(out.URL.RawPath, "/_matrix/client/v3/", "/_matrix/client/r0/", 1)
		resp, err := t.next.RoundTrip(out)
		if err != nil {
			h.err = err
			return
		}
		t.p.answered(req, resp)
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			h.err = err
			return
		}
		resp.Body = io.NopCloser(bytes.NewReader(data))
		h.resp = resp
	}()
	select {
	case <-h.done:
		return h.resp, h.err
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

// errorResponse is a homeserver's error answer: the errcode and error
// text, and for M_LIMIT_EXCEEDED retry_after_ms (rounded up to a whole
// millisecond, so that it is never 0 while a wait remains) and the
// Retry-After header that Synapse sends along.
func errorResponse(r *http.Request, rl *rule) *http.Response {
	body := map[string]any{"errcode": rl.errcode, "error": rl.text}
	h := http.Header{"Content-Type": {"application/json"}}
	if rl.errcode == "M_LIMIT_EXCEEDED" {
		ms := (rl.retryAfter + time.Millisecond - 1) / time.Millisecond
		body["retry_after_ms"] = int64(ms)
		h.Set("Retry-After", strconv.FormatInt(int64((rl.retryAfter+time.Second-1)/time.Second), 10))
	}
	data, err := json.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("matrixtest: %v", err)) // a map of strings and ints always marshals
	}
	return &http.Response{
		StatusCode:    rl.status,
		Status:        fmt.Sprintf("%d %s", rl.status, http.StatusText(rl.status)),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(data)),
		ContentLength: int64(len(data)),
		Request:       r,
	}
}
