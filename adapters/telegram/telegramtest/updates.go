package telegramtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/go-telegram/bot/models"
)

// maxPollWait bounds a long poll's timeout.
const maxPollWait = 60 * time.Second

type queued struct {
	id   int64
	kind string // "message", "edited_message", "callback_query", ...
	raw  []byte
}

// updateQueue holds the updates the bot has not confirmed yet.
type updateQueue struct {
	items     []queued
	next      int64
	confirmed int64
	allowed   []string // nil: Telegram's default set
	kick      chan struct{}
	waiting   int // long polls waiting for an update
}

func newUpdateQueue() updateQueue {
	// Update ids do not start at 1 on Telegram either.
	return updateQueue{next: 1000, kick: make(chan struct{})}
}

type webhook struct {
	url, secret string
	maxConns    int
	lastErrDate time.Time
	lastErr     string
}

// enqueue adds an update with the next id. Callers hold s.mu.
func (s *Server) enqueue(kind string, u *models.Update) {
	s.updates.next++
	u.ID = s.updates.next
	raw, err := json.Marshal(u)
	if err != nil {
		s.tb.Errorf("telegramtest: encoding update: %v", err)
		return
	}
	s.updates.items = append(s.updates.items, queued{id: u.ID, kind: kind, raw: raw})
	s.changed()
}

// allowed reports whether the bot asked for updates of kind. By default
// Telegram sends everything but chat_member and reactions.
func (s *Server) allowed(kind string) bool {
	if len(s.updates.allowed) == 0 {
		return kind != "chat_member" && kind != "message_reaction" && kind != "message_reaction_count"
	}
	return slices.Contains(s.updates.allowed, kind)
}

// Offset is the highest offset the bot confirmed with getUpdates: every
// update with a lower id is gone.
func (s *Server) Offset() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates.confirmed
}

// Pending is how many queued updates the bot has not confirmed (or, with a
// webhook, not had delivered).
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.updates.items {
		if s.allowed(q.kind) {
			n++
		}
	}
	return n
}

// Polling is how many getUpdates requests are waiting for an update.
func (s *Server) Polling() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates.waiting
}

// confirm applies getUpdates' offset: a positive offset confirms (drops)
// every update before it; a negative one keeps only the last -offset
// updates. Callers hold s.mu.
func (s *Server) confirm(offset int64) {
	q := &s.updates
	switch {
	case offset > 0:
		k := 0
		for k < len(q.items) && q.items[k].id < offset {
			k++
		}
		q.items = q.items[k:]
		q.confirmed = max(q.confirmed, offset)
	case offset < 0:
		if n := int(-offset); len(q.items) > n {
			q.items = q.items[len(q.items)-n:]
		}
		if len(q.items) > 0 {
			q.confirmed = max(q.confirmed, q.items[0].id)
		}
	}
}

// getUpdates answers a long poll: at once when updates are queued, else
// when one arrives or the timeout ends. A newer getUpdates ends a waiting
// one with 409, as on Telegram when two instances poll.
func (s *Server) getUpdates(r *request) (any, *Error) {
	offset, e := r.p.int("offset")
	if e != nil {
		return nil, e
	}
	limit, e := r.p.int("limit")
	if e != nil {
		return nil, e
	}
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, e := r.p.int("timeout")
	if e != nil {
		return nil, e
	}
	wait := min(time.Duration(max(timeout, 0))*time.Second, maxPollWait)

	s.mu.Lock()
	if s.webhook.url != "" {
		s.mu.Unlock()
		return nil, &Error{Code: 409, Description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
	}
	var allowed []string
	if r.p.json("allowed_updates", &allowed) {
		s.updates.allowed = allowed
	}
	s.confirm(offset)
	close(s.updates.kick)
	s.updates.kick = make(chan struct{})
	kick := s.updates.kick
	s.changed()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		batch := make([]json.RawMessage, 0)
		for _, q := range s.updates.items {
			if len(batch) == int(limit) {
				break
			}
			if s.allowed(q.kind) {
				batch = append(batch, q.raw)
			}
		}
		if len(batch) > 0 || wait == 0 {
			s.mu.Unlock()
			return batch, nil
		}
		s.updates.waiting++
		s.changed()
		wake := s.signal.Wait()
		s.mu.Unlock()
		var e *Error
		stop := true
		select {
		case <-wake:
			stop = false
		case <-kick:
			e = &Error{Code: 409, Description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
		case <-timer.C:
		case <-r.http.Context().Done():
		case <-s.done:
		}
		s.mu.Lock()
		s.updates.waiting--
		if stop {
			s.changed()
			s.mu.Unlock()
			return batch, e
		}
	}
}

func (s *Server) setWebhook(r *request) (any, *Error) {
	raw := r.p.str("url")
	if raw == "" {
		return s.deleteWebhook(r)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return nil, badRequest("bad webhook: An HTTPS URL must be provided for webhook")
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, badRequest("bad webhook: this test server delivers to loopback addresses only")
	}
	secret := r.p.str("secret_token")
	if len(secret) > 256 {
		return nil, badRequest("secret token is too long")
	}
	for i := 0; i < len(secret); i++ {
		if c := secret[i]; !isAlnum(c) && c != '_' && c != '-' {
			return nil, badRequest("secret token contains unallowed characters")
		}
	}
	if r.p.bool("drop_pending_updates") {
		s.updates.items = nil
	}
	var allowed []string
	if r.p.json("allowed_updates", &allowed) {
		s.updates.allowed = allowed
	}
	conns, _ := r.p.int("max_connections")
	r.description = "Webhook was set"
	if s.webhook.url == raw {
		r.description = "Webhook is already set"
	}
	s.webhook = webhook{url: raw, secret: secret, maxConns: int(max(conns, 40))}
	// A waiting long poll ends.
	close(s.updates.kick)
	s.updates.kick = make(chan struct{})
	return true, nil
}

func (s *Server) deleteWebhook(r *request) (any, *Error) {
	if r.p.bool("drop_pending_updates") {
		s.updates.items = nil
	}
	r.description = "Webhook was deleted"
	if s.webhook.url == "" {
		r.description = "Webhook is already deleted"
	}
	s.webhook = webhook{}
	return true, nil
}

func (s *Server) getWebhookInfo(*request) (any, *Error) {
	info := &models.WebhookInfo{URL: s.webhook.url, AllowedUpdates: s.updates.allowed}
	for _, q := range s.updates.items {
		if s.allowed(q.kind) {
			info.PendingUpdateCount++
		}
	}
	if s.webhook.url != "" {
		info.MaxConnections = s.webhook.maxConns
		info.IPAddress = "127.0.0.1"
	}
	if s.webhook.lastErr != "" {
		info.LastErrorDate = int(s.webhook.lastErrDate.Unix())
		info.LastErrorMessage = s.webhook.lastErr
	}
	return info, nil
}

// deliverWebhooks posts queued updates to the webhook one at a time, in
// order, with the secret token header, until one is answered with 2xx;
// failed deliveries are retried with a growing pause.
func (s *Server) deliverWebhooks() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.done
		cancel()
	}()
	backoff := time.Duration(0)
	for {
		s.mu.Lock()
		hook := s.webhook
		var next *queued
		for len(s.updates.items) > 0 && hook.url != "" {
			if q := s.updates.items[0]; s.allowed(q.kind) {
				next = &q
				break
			}
			s.updates.items = s.updates.items[1:] // not asked for: never sent
		}
		wake := s.signal.Wait()
		s.mu.Unlock()
		if next == nil {
			select {
			case <-wake:
				continue
			case <-s.done:
				return
			}
		}
		errMsg := s.post(ctx, hook, next.raw)
		s.mu.Lock()
		if errMsg == "" {
			if len(s.updates.items) > 0 && s.updates.items[0].id == next.id {
				s.updates.items = s.updates.items[1:]
			}
			s.webhook.lastErr = ""
			backoff = 0
		} else if s.webhook.url == hook.url {
			s.webhook.lastErr, s.webhook.lastErrDate = errMsg, s.now()
			backoff = min(max(2*backoff, 100*time.Millisecond), 2*time.Second)
		}
		s.changed()
		s.mu.Unlock()
		if backoff > 0 {
			select {
			case <-time.After(backoff):
			case <-s.done:
				return
			}
		}
	}
}

// post delivers one update, returning "" on 2xx or the error Telegram
// would show in getWebhookInfo.
func (s *Server) post(ctx context.Context, hook webhook, body []byte) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.url, bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	if hook.secret != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", hook.secret)
	}
	resp, err := s.opts.WebhookClient.Do(req)
	if err != nil {
		return "Connection refused"
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Sprintf("Wrong response from the webhook: %s", resp.Status)
	}
	return ""
}
