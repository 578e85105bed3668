package telegram

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/parley-chat/parley/core"
)

// pollFailuresDown is how many getUpdates in a row may fail (the backoff
// between them doubling from a second to 30) before Run gives Telegram up
// as down: about a minute.
const pollFailuresDown = 6

// allowedUpdates are the update kinds parley handles.
var allowedUpdates = []string{"message", "edited_message", "callback_query"}

// Run implements core.Adapter: it receives updates by long polling (or from
// WebhookHandler in webhook mode) and hands each to h in order.
//
// Long polling does not use the library's poller: that one asks Telegram for
// the next batch — which confirms the previous one — while the last update
// may still be being handled, so a crash there would lose it. Here the
// offset moves, durably, only after an update was dealt with; a crash before
// that makes Telegram deliver it again and the command's dedup key drops
// the repeat.
//
// Telegram allows one long poll per bot (a second getUpdates ends the first
// with 409), so among instances sharing the store only the holder of the
// lease "telegram/<bot id>" polls (core.Lead): the others wait for it. The
// holder reads the offset once it holds the lease (the previous holder's
// last write is then final) and writes it fenced by the lease, so a holder
// that lost the lease moves nothing. A 409 all the same (a process outside
// the cluster, or a holder that has not stopped yet) gives the lease up
// for a while (core.ErrLeaseConflict). Webhook mode needs no lease: any
// instance answers Telegram's request after its commit.
func (a *Adapter) Run(ctx context.Context, h core.Handler) error {
	if a.me.Load() == nil {
		if err := a.Check(ctx); err != nil {
			return err
		}
	}
	if a.opts.Webhook {
		if _, err := a.bot.SetWebhook(ctx, &bot.SetWebhookParams{URL: a.opts.WebhookURL, SecretToken: a.opts.WebhookSecret,
			AllowedUpdates: allowedUpdates}); err != nil {
			return fmt.Errorf("telegram: set webhook %s: %w", a.opts.WebhookURL, err)
		}
		for {
			select {
			case <-ctx.Done():
				return nil
			case u := <-a.hooks:
				u.done <- a.handle(ctx, h, u.update)
			}
		}
	}
	return core.Lead(ctx, a.opts.Leases, LeaseName(a.me.Load().ID), core.HoldOptions{Logger: a.log}, func(held *core.Held) error {
		return a.poll(held, h)
	})
}

// LeaseName is the lease whose holder long-polls for the bot with the id
// bot (getMe's; the token never appears in a lease's name, which doctor
// and metrics show).
func LeaseName(bot int64) string { return "telegram/" + strconv.FormatInt(bot, 10) }

// poll long-polls while held is held. It returns nil when held's context
// ends, an error wrapping core.ErrLeaseConflict on a 409, one wrapping
// core.ErrLeaseLost when a fenced offset write was refused, and what ends
// Run otherwise (a refused token, a Bot API down).
func (a *Adapter) poll(held *core.Held, h core.Handler) error {
	ctx := held.Context()
	if _, err := a.bot.DeleteWebhook(ctx, &bot.DeleteWebhookParams{}); err != nil {
		a.log.Warn("delete webhook", "err", err)
	}
	offset, err := a.loadOffset(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	backoff, failures := time.Duration(0), 0
	for ctx.Err() == nil {
		if backoff > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
		}
		raws, err := a.getUpdates(ctx, offset)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, core.ErrLeaseConflict) {
				return err
			}
			// A token refused now (revoked), or a Bot API that has not
			// answered for about a minute, ends Run: the daemon then
			// says Telegram is down, holds its deliveries, and starts
			// it again (Check first) with its own backoff.
			if core.IsPermanent(err) {
				return err
			}
			if failures++; failures >= pollFailuresDown {
				return core.WithFix(fmt.Errorf("telegram: the Bot API at %s has not answered for %d attempts: %w", a.apiURL(), failures, err),
					"check that this machine reaches "+a.apiURL()+"; parley serves without Telegram meanwhile and tries again")
			}
			var rl *core.RateLimitError
			if errors.As(classify("get updates", err), &rl) {
				backoff = rl.RetryAfter
			} else {
				backoff = min(max(2*backoff, time.Second), 30*time.Second)
			}
			a.log.Warn("get updates", "err", err, "retry_in", backoff)
			continue
		}
		backoff, failures = 0, 0
		for _, raw := range raws {
			var u models.Update
			if err := json.Unmarshal(raw, &u); err != nil || u.ID == 0 {
				// A malformed update is logged and skipped, never fatal.
				var head struct {
					ID int64 `json:"update_id"`
				}
				_ = json.Unmarshal(raw, &head)
				a.log.Warn("skipping an update parley cannot read", "update_id", head.ID, "err", err)
				if head.ID >= offset {
					offset = head.ID + 1
					if err := a.saveOffset(ctx, held, offset); err != nil {
						return err
					}
				}
				continue
			}
			if u.ID < offset {
				continue
			}
			if err := a.handle(ctx, h, &u); err != nil {
				return nil // ctx ended while retrying; the update comes again
			}
			offset = u.ID + 1
			// The update is dealt with: its offset is stored even when a
			// stop came meanwhile (the lease is kept until poll returns),
			// or the next holder hands it again.
			save, cancel := context.WithTimeout(context.WithoutCancel(ctx), offsetSaveTimeout)
			err := a.saveOffset(save, held, offset)
			cancel()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// offsetSaveTimeout bounds the storing of a handled update's offset once
// the poll is stopping.
const offsetSaveTimeout = 5 * time.Second

func (a *Adapter) loadOffset(ctx context.Context) (int64, error) {
	v, err := a.opts.Cursors.Cursor(ctx, cursorOffset)
	if err != nil || v == "" {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// saveOffset stores the offset under held's lease, retrying every second
// while the store fails, until ctx ends. It returns an error wrapping
// core.ErrLeaseLost when the store refused the write: another instance
// holds the lease now and reads the offset itself.
func (a *Adapter) saveOffset(ctx context.Context, held *core.Held, offset int64) error {
	for ctx.Err() == nil {
		err := a.opts.Leases.SetCursorFenced(ctx, cursorOffset, strconv.FormatInt(offset, 10), held.Lease())
		if err == nil {
			return nil
		}
		if errors.Is(err, core.ErrLeaseLost) {
			return fmt.Errorf("telegram: save update offset: %w", err)
		}
		a.log.Error("save update offset", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// getUpdates long-polls Telegram for updates from offset on.
func (a *Adapter) getUpdates(ctx context.Context, offset int64) ([]json.RawMessage, error) {
	body, _ := json.Marshal(map[string]any{"offset": offset, "timeout": int(a.opts.PollTimeout / time.Second), "allowed_updates": allowedUpdates})
	base := a.opts.APIURL
	if base == "" {
		base = "https://api.telegram.org"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/bot"+a.opts.Token+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		var uerr interface{ Unwrap() error }
		if errors.As(err, &uerr) {
			err = uerr.Unwrap() // the URL holds the token: keep it out of logs
		}
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	var r struct {
		OK          bool              `json:"ok"`
		Result      []json.RawMessage `json:"result"`
		ErrorCode   int               `json:"error_code"`
		Description string            `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("getUpdates: HTTP %d: unreadable answer", resp.StatusCode)
	}
	if !r.OK {
		if r.ErrorCode == http.StatusTooManyRequests {
			return nil, &bot.TooManyRequestsError{Message: r.Description, RetryAfter: r.Parameters.RetryAfter}
		}
		err := fmt.Errorf("getUpdates: %d %s", r.ErrorCode, r.Description)
		if r.ErrorCode == http.StatusConflict {
			// Another getUpdates ended this one, or a webhook is set:
			// another consumer of the bot's updates is active.
			return nil, fmt.Errorf("telegram: %w: %w", core.ErrLeaseConflict, err)
		}
		if r.ErrorCode == http.StatusUnauthorized || r.ErrorCode == http.StatusNotFound {
			err = core.Permanent(fmt.Errorf("telegram: the token was refused: check [telegram] token (PARLEY_TELEGRAM_TOKEN) against @BotFather: %w", err))
		}
		return nil, err
	}
	return r.Result, nil
}

// hookUpdate is an update received on the webhook, waiting to be handled.
type hookUpdate struct {
	update *models.Update
	done   chan error
}

// WebhookHandler receives updates in webhook mode. It answers 200 only once
// the update was dealt with, so Telegram delivers it again otherwise. A
// request whose secret token header is missing or wrong is refused before
// its body is read: user ids are not secret, so without that check anyone
// who can reach the URL could write as an allowed user. Without a
// configured secret every request is refused (New does not allow webhook
// mode without one).
func (a *Adapter) WebhookHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.webhookAuthentic(r) {
			a.log.Warn("refused a webhook request without the right secret token", "remote", r.RemoteAddr)
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		var u models.Update
		if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&u); err != nil || u.ID == 0 {
			a.log.Warn("skipping a webhook update parley cannot read", "err", err)
			w.WriteHeader(http.StatusOK) // redelivering it would not help
			return
		}
		hu := hookUpdate{update: &u, done: make(chan error, 1)}
		select {
		case a.hooks <- hu:
		case <-r.Context().Done():
			// Run is not taking updates (not started yet, stopped, or
			// between a failed Run and the next) and Telegram gave up or
			// the listener is shutting down. Returning without an answer
			// would make net/http send 200 and Telegram drop the update.
			http.Error(w, "not handled", http.StatusServiceUnavailable)
			return
		}
		if err := <-hu.done; err != nil {
			http.Error(w, "not handled", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// secretHeader carries setWebhook's secret_token on every webhook request.
const secretHeader = "X-Telegram-Bot-Api-Secret-Token"

// webhookAuthentic reports whether r carries the configured secret token,
// compared in constant time so that response times do not reveal how much
// of a guess was right.
func (a *Adapter) webhookAuthentic(r *http.Request) bool {
	want := a.opts.WebhookSecret
	got := r.Header.Get(secretHeader)
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
