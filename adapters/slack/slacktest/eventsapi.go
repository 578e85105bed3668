package slacktest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The Events API over HTTP, the alternative to Socket Mode. Once
// DeliverEvents names a Request URL, what would go into an envelope is
// POSTed there instead, as Slack does:
//
//   - events as their event_callback JSON (Content-Type application/json);
//   - button clicks form-encoded, the JSON in one field, payload=…;
//   - slash commands form-encoded, one field per value;
//
// each signed with the app's signing secret: X-Slack-Request-Timestamp is
// the Unix time of the attempt and X-Slack-Signature is "v0=" and the hex
// HMAC-SHA256 of "v0:{timestamp}:{body}". The answer is the
// acknowledgement, and a slash command's answer body its reply.
//
// An event not answered with a 2xx within the timeout (3s) is sent again
// with X-Slack-Retry-Num (1, 2, 3) and X-Slack-Retry-Reason: http_timeout
// (Slack does not wait for the late answer: the first attempt may still be
// running when the retry arrives), http_error (a non-2xx answer, unless it
// carries X-Slack-No-Retry: 1) or connection_failed; the first retry
// nearly at once, then after a minute and after five (EventsAPI.
// RetryDelays). Slack gives up after three retries. Slash commands and
// clicks are not retried: the person is told the app did not answer.
//
// Saving a Request URL at Slack sends it a url_verification challenge,
// which must come back as the answer body; DeliverEvents does the same
// and switches to HTTP only when it does.

// Event delivery defaults, as at Slack.
const (
	defaultEventsTimeout = 3 * time.Second
	// maxAnswer bounds what the fake reads of an answer.
	maxAnswer = 1 << 20
)

// defaultRetryDelays are Slack's: nearly at once, after a minute, after
// five minutes.
var defaultRetryDelays = []time.Duration{0, time.Minute, 5 * time.Minute}

// EventsAPI configures delivery over HTTP (see DeliverEvents).
type EventsAPI struct {
	// URL is the app's Request URL, for events, interactivity and slash
	// commands alike.
	URL string
	// SigningSecret signs every request.
	SigningSecret string
	// Timeout is how long an answer is waited for; 0 means 3s, as at Slack.
	Timeout time.Duration
	// RetryDelays are the waits before each retry of an event, after the
	// failed attempt; nil means Slack's 0, 1m, 5m. Its length is how often
	// an event is retried.
	RetryDelays []time.Duration
	// Client sends the requests; nil means a client of its own, without
	// keep-alives and redirects (Slack follows none here).
	Client *http.Client
}

// Request is one HTTP request the server sent to the Request URL.
type Request struct {
	// Type is "url_verification", "events_api", "interactive" or
	// "slash_commands", as envelopes name them.
	Type string
	// EventID is an event's event_id, the same on every retry.
	EventID string
	// RetryNum and RetryReason are the X-Slack-Retry-Num and
	// X-Slack-Retry-Reason headers (0 and "" on a first attempt).
	RetryNum    int
	RetryReason string
	// Forged marks a request Send made: not Slack's, not retried.
	Forged bool
	// Sent is when it left; Answered when the answer came (zero without
	// one), Late when that was after the timeout, when Slack no longer
	// listens.
	Sent, Answered time.Time
	Late           bool
	// Status is the answer's HTTP status (0 without an answer); Lost
	// says the answer was lost on its way back (LoseNextAnswer), so that
	// Slack did not see it; Err is why no answer came.
	// NoRetry says the answer asked Slack not to retry
	// (X-Slack-No-Retry: 1).
	Status  int
	Lost    bool
	Err     string
	NoRetry bool
	// Header holds the request's headers; Body its body, ContentType its
	// type.
	Header      http.Header
	Body        []byte
	ContentType string
	// Answer is the answer's body, AnswerType its Content-Type.
	Answer     []byte
	AnswerType string
}

// Signature is how Send signs a request: with Secret at time At (now when
// zero), or not at all with None.
type Signature struct {
	Secret string
	At     time.Time
	None   bool
}

// httpState is the Events API side of the server. Callers hold s.mu.
type httpState struct {
	cfg     *EventsAPI
	record  []Request
	loseNum int // answers still to lose (LoseNextAnswer)
}

// DeliverEvents switches the server to the Events API over HTTP: it
// sends cfg.URL the url_verification challenge, as Slack does when a
// Request URL is saved, and when the answer is the challenge, sends there
// everything queued since (people may act before the app is listening)
// and everything after. It returns an error, and changes nothing, when
// the URL does not answer the challenge.
func (s *Server) DeliverEvents(cfg EventsAPI) error {
	s.tb.Helper()
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultEventsTimeout
	}
	if cfg.RetryDelays == nil {
		cfg.RetryDelays = defaultRetryDelays
	}
	challenge := newUUID()
	body, _ := json.Marshal(obj{"token": verificationToken, "challenge": challenge, "type": "url_verification"})
	req := s.attempt(&cfg, "url_verification", "", body, "application/json", 0, "", Signature{Secret: cfg.SigningSecret}, false)
	if req.Status != http.StatusOK || challengeOf(req) != challenge {
		return fmt.Errorf("slacktest: %s did not answer the url_verification challenge (status %d, %q, %s)", cfg.URL, req.Status, req.Answer, req.Err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events.cfg = &cfg
	queued := s.sock.queue
	s.sock.queue = nil
	for _, d := range queued {
		s.deliverHTTP(d.typ, d.payload)
	}
	return nil
}

// challengeOf reads the challenge back from an answer, in any of the
// shapes Slack accepts: plain text, JSON or a form.
func challengeOf(r Request) string {
	switch {
	case strings.HasPrefix(r.AnswerType, "application/json"):
		var c struct {
			Challenge string `json:"challenge"`
		}
		_ = json.Unmarshal(r.Answer, &c)
		return c.Challenge
	case strings.HasPrefix(r.AnswerType, "application/x-www-form-urlencoded"):
		v, _ := url.ParseQuery(string(r.Answer))
		return v.Get("challenge")
	}
	return strings.TrimSpace(string(r.Answer))
}

// Requests returns every request sent to the Request URL so far, in the
// order sent, each with its answer once it came.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.events.record)
	for i := range out {
		out[i].Header = out[i].Header.Clone()
		out[i].Body = slices.Clone(out[i].Body)
		out[i].Answer = slices.Clone(out[i].Answer)
	}
	return out
}

// LoseNextAnswer makes the answer to the next event request get lost on
// its way back: the request reaches the app, which acts on it and
// answers, but Slack sees no answer, and retries it with reason
// http_timeout once the timeout passed.
func (s *Server) LoseNextAnswer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events.loseNum++
}

// Send sends the Request URL a request Slack did not make (a forgery, or
// a replay of Request.Body), signed as sig says, and returns it with its
// answer. It is recorded, Forged, and never retried; what it claims
// happened is not stored.
func (s *Server) Send(typ string, body []byte, contentType string, sig Signature) Request {
	s.tb.Helper()
	s.mu.Lock()
	cfg := s.events.cfg
	s.mu.Unlock()
	if cfg == nil {
		s.tb.Fatal("slacktest: Send before DeliverEvents")
	}
	return s.attempt(cfg, typ, "", body, contentType, 0, "", sig, true)
}

// ForgedMessage is the event_callback body of u writing text in a
// channel (in the thread threadTS when not ""), a message that nobody
// posted: what a forger would send. It is neither stored nor delivered.
func (s *Server) ForgedMessage(u User, channelID, threadTS, text string) []byte {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(channelID)
	m := &message{ts: s.newTS(), user: u.ID, text: text, clientMsgID: newUUID(), posted: s.now(), threadTS: threadTS}
	m.blocks = richText(blockID(m.ts, 0), text)
	return s.eventCallback(s.messageEvent(c, m))
}

// deliverHTTP sends an envelope's payload to the Request URL instead, in
// the background, when DeliverEvents switched to HTTP; it reports whether
// it did. Callers hold s.mu.
func (s *Server) deliverHTTP(typ string, payload json.RawMessage) bool {
	cfg := s.events.cfg
	if cfg == nil || s.closed() {
		return cfg != nil
	}
	body, contentType, eventID, err := httpBody(typ, payload)
	if err != nil {
		s.tb.Errorf("slacktest: encoding a %s request: %v", typ, err)
		return true
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.send(cfg, typ, eventID, body, contentType)
	}()
	return true
}

// httpBody is how an envelope's payload travels over HTTP.
func httpBody(typ string, payload json.RawMessage) (body []byte, contentType, eventID string, err error) {
	switch typ {
	case "events_api":
		var head struct {
			EventID string `json:"event_id"`
		}
		err = json.Unmarshal(payload, &head)
		return payload, "application/json", head.EventID, err
	case "interactive":
		return []byte(url.Values{"payload": {string(payload)}}.Encode()), "application/x-www-form-urlencoded", "", nil
	case "slash_commands":
		var fields map[string]string
		if err := json.Unmarshal(payload, &fields); err != nil {
			return nil, "", "", err
		}
		form := url.Values{}
		for k, v := range fields {
			form.Set(k, v)
		}
		return []byte(form.Encode()), "application/x-www-form-urlencoded", "", nil
	}
	return nil, "", "", fmt.Errorf("unknown envelope type %q", typ)
}

// send delivers one request, retrying an event as Slack does until it is
// answered with a 2xx, the retries are spent or the server closes.
func (s *Server) send(cfg *EventsAPI, typ, eventID string, body []byte, contentType string) {
	var delays []time.Duration // the retries, as configured when it was first sent
	if typ == "events_api" {
		delays = cfg.RetryDelays
	}
	reason := ""
	for n := 0; ; n++ {
		r := s.attempt(cfg, typ, eventID, body, contentType, n, reason, Signature{Secret: cfg.SigningSecret}, false)
		switch {
		case r.Lost, r.Status == 0 && r.Err == "":
			reason = "http_timeout"
		case r.Err != "":
			reason = "connection_failed"
		case r.Status < 200 || r.Status > 299:
			if r.NoRetry {
				return
			}
			reason = "http_error"
		default:
			return
		}
		if n >= len(delays) {
			return
		}
		select {
		case <-s.done:
			return
		case <-time.After(delays[n]):
		}
		// A retry goes where the app's Request URL points now, as at
		// Slack: a URL saved again meanwhile (DeliverEvents) gets it.
		s.mu.Lock()
		cfg = s.events.cfg
		s.mu.Unlock()
	}
}

// attempt sends one request and waits for its answer until cfg.Timeout;
// an answer that comes later is recorded as Late. It returns the request
// as it stood at the timeout (or the answer).
func (s *Server) attempt(cfg *EventsAPI, typ, eventID string, body []byte, contentType string, retry int, reason string, sig Signature, forged bool) Request {
	ctx, cancel := context.WithCancel(context.Background())
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
	if err != nil {
		cancel()
		s.tb.Errorf("slacktest: request to %q: %v", cfg.URL, err)
		return Request{Type: typ, Err: err.Error()}
	}
	hr.Header.Set("Content-Type", contentType)
	hr.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	if !sig.None {
		at := sig.At
		if at.IsZero() {
			at = s.now()
		}
		stamp := strconv.FormatInt(at.Unix(), 10)
		hr.Header.Set("X-Slack-Request-Timestamp", stamp)
		hr.Header.Set("X-Slack-Signature", Sign(sig.Secret, stamp, body))
	}
	if retry > 0 {
		hr.Header.Set("X-Slack-Retry-Num", strconv.Itoa(retry))
		hr.Header.Set("X-Slack-Retry-Reason", reason)
	}

	s.mu.Lock()
	if s.closed() {
		s.mu.Unlock()
		cancel()
		return Request{Type: typ, Err: "server closed"}
	}
	lose := false
	if typ == "events_api" && !forged && s.events.loseNum > 0 {
		s.events.loseNum--
		lose = true
	}
	i := len(s.events.record)
	s.events.record = append(s.events.record, Request{
		Type: typ, EventID: eventID, RetryNum: retry, RetryReason: reason, Forged: forged, Sent: s.now(),
		Header: hr.Header.Clone(), Body: slices.Clone(body), ContentType: contentType,
	})
	s.changed()
	s.wg.Add(1)
	s.mu.Unlock()

	go func() {
		// An exchange still waiting when the server closes ends with it,
		// even after Slack stopped listening (a late answer).
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	answered := make(chan struct{})
	go func() {
		defer s.wg.Done()
		defer close(answered)
		defer cancel()
		s.exchange(cfg, hr, i, lose)
	}()
	timeout := time.NewTimer(cfg.Timeout)
	defer timeout.Stop()
	select {
	case <-answered:
		if lose {
			// Slack saw no answer: it finds out when the timeout passes.
			select {
			case <-timeout.C:
			case <-s.done:
			}
		}
	case <-timeout.C:
	case <-s.done:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.events.record[i]
	if r.Late {
		// Answered after the timeout but before this read: as Slack saw it.
		r.Status, r.Answer, r.AnswerType = 0, nil, ""
	}
	return r
}

// exchange does the HTTP exchange of record i and records its answer.
func (s *Server) exchange(cfg *EventsAPI, hr *http.Request, i int, lose bool) {
	client := cfg.Client
	if client == nil {
		// A transport of its own: no connection outlives the request.
		client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
	}
	sent := time.Now()
	resp, err := client.Do(hr)
	var answer []byte
	if err == nil {
		answer, _ = io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		_ = resp.Body.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.events.record[i]
	switch {
	case err != nil && errors.Is(err, context.Canceled):
		r.Err = "canceled"
	case err != nil:
		r.Err = err.Error()
	default:
		r.Answered = s.now()
		r.Late = time.Since(sent) > cfg.Timeout
		r.Status, r.Answer, r.AnswerType = resp.StatusCode, answer, resp.Header.Get("Content-Type")
		r.Lost = lose
		r.NoRetry = resp.Header.Get("X-Slack-No-Retry") == "1"
	}
	s.changed()
}

// Sign is Slack's request signature of body at the Unix time stamp:
// "v0=" and the hex HMAC-SHA256 of "v0:{stamp}:{body}" keyed with the
// signing secret.
func Sign(secret, stamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	_, _ = io.WriteString(mac, "v0:"+stamp+":")
	_, _ = mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}
