package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/parley-chat/parley/core"
)

// Events mode: Slack posts events (JSON), button clicks (a form with a
// JSON payload) and slash commands (a form) to one Request URL, which cmd
// mounts at [slack] events_path on parley's listener. Every request must
// carry Slack's signature of its body with the app's signing secret,
// made within the last five minutes (a replayed request is refused). The
// answer is the acknowledgement: 200 only once the envelope is durable,
// with a slash command's reply as its body. Slack retries an event not
// answered with a 2xx within 3 seconds (X-Slack-Retry-Num, up to three
// times), without waiting for a late answer, so a retry may arrive while
// the first request is still being handled: it queues behind it in the
// conversation's lane and is then recognised by the message's channel and
// ts (Adapter.handled in this process, the handler's dedup key across
// restarts) and acknowledged without being appended again. Slash commands
// and clicks are not retried; a person sees that the app did not answer.
// A request Slack did not sign with the app's signing secret, or signed
// more than five minutes from now (a replay), is refused with 401 before
// anything is read from it.

// maxBody bounds a request's body; Slack's are a few kilobytes.
const maxBody = 1 << 20

// startWait is how long a request waits for Run to start before it is
// answered 503: well within the 3 s Slack waits for an answer.
const startWait = 2 * time.Second

// EventsHandler receives Slack's requests in events mode. It answers 503
// when Run is not running within startWait, so Slack retries them later.
func (a *Adapter) EventsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if err := verify(r.Header, body, a.opts.SigningSecret); err != nil {
			a.log.Warn("refusing a request not signed by Slack", "remote", r.RemoteAddr, "err", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		e, challenge, err := parseRequest(r.Header.Get("Content-Type"), body)
		switch {
		case challenge != "":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, challenge)
			return
		case err != nil:
			// Redelivering a request parley cannot read would not help.
			a.log.Warn("skipping a request parley cannot read", "err", err)
			w.WriteHeader(http.StatusOK)
			return
		}
		e.retry, _ = strconv.Atoi(r.Header.Get("X-Slack-Retry-Num"))
		if e.retry > 0 {
			a.log.Debug("Slack retried a request", "retry", e.retry, "reason", r.Header.Get("X-Slack-Retry-Reason"))
		}
		done := make(chan any, 1)
		e.ack = func(reply any) { done <- reply }
		ctx, ok := a.recv.enterWait(r.Context().Done(), a.startWait, func(ctx context.Context, h core.Handler) { a.accept(ctx, h, e) })
		if !ok {
			// Before Run, after it, or between a Run that failed and
			// the next, for longer than startWait: Slack sends an
			// event again (a slash command or a click it does not).
			http.Error(w, "parley is not receiving", http.StatusServiceUnavailable)
			return
		}
		select {
		case reply := <-done:
			if reply == nil {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(reply)
		case <-ctx.Done():
			// Run is stopping before the request was made durable: not
			// acknowledged, so Slack sends it again, to this process if it
			// is back by then (a retry of what was stored after all is
			// recognised) or to the next one. Answering at once keeps the
			// listener's graceful shutdown from waiting on Slack's timeout.
			http.Error(w, "parley is stopping", http.StatusServiceUnavailable)
		case <-r.Context().Done():
			// Slack stopped waiting (it retries an event, and the work
			// goes on in its lane), or the listener is shutting down.
			// Either way not acknowledged: returning without an answer
			// would make net/http send 200 for an envelope that may
			// never be made durable.
			http.Error(w, "not handled yet", http.StatusServiceUnavailable)
		}
	})
}

// verify checks Slack's signature of body (X-Slack-Signature, v0) and
// that it was made within the last five minutes
// (X-Slack-Request-Timestamp), so a captured request cannot be replayed
// later.
func verify(h http.Header, body []byte, secret string) error {
	v, err := slack.NewSecretsVerifier(h, secret)
	if err != nil {
		return err
	}
	if _, err := v.Write(body); err != nil {
		return err
	}
	return v.Ensure()
}

// parseRequest reads a verified request: an event (or the URL
// verification's challenge), an interaction, or a slash command.
func parseRequest(contentType string, body []byte) (e envelope, challenge string, err error) {
	if strings.HasPrefix(contentType, "application/json") {
		var head struct {
			Type      string `json:"type"`
			Challenge string `json:"challenge"`
		}
		if err := json.Unmarshal(body, &head); err != nil {
			return e, "", err
		}
		if head.Type == slackevents.URLVerification {
			if head.Challenge == "" {
				return e, "", errors.New("url_verification without a challenge")
			}
			return e, head.Challenge, nil
		}
		ev, err := slackevents.ParseEvent(json.RawMessage(body), slackevents.OptionNoVerifyToken())
		if err != nil {
			return e, "", err
		}
		e.event = &ev
		return e, "", nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return e, "", err
	}
	switch {
	case form.Has("payload"):
		var ic slack.InteractionCallback
		if err := json.Unmarshal([]byte(form.Get("payload")), &ic); err != nil {
			return e, "", err
		}
		e.action = &ic
	case form.Has("command"):
		req, _ := http.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		c, err := slack.SlashCommandParse(req)
		if err != nil {
			return e, "", err
		}
		e.slash = &c
	default:
		return e, "", errors.New("neither an event, an interaction nor a slash command")
	}
	return e, "", nil
}
