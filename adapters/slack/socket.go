package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/parley-chat/parley/core"
)

// Socket Mode. slack-go's socketmode client opens the connection
// (apps.connections.open with the app-level token, then the websocket),
// answers pings, and on Slack's "disconnect" (refresh_requested,
// link_disabled, …), a dropped connection or a missing ping opens a new
// one, backing off while that fails. Nothing is lost or repeated across a
// reconnection: an envelope is acknowledged only after it is durable, so
// Slack delivers an unacknowledged one again, on the new connection, and
// the redelivery is recognised (Adapter.handled, the handler's dedup
// key). Acknowledgements are queued by the client and written by whichever
// connection is open.

// runSocket receives over Socket Mode until ctx ends.
func (a *Adapter) runSocket(ctx context.Context, h core.Handler) error {
	opts := []socketmode.Option{socketmode.OptionPingInterval(a.opts.PingInterval), socketmode.OptionLog(discardLog{})}
	if a.opts.Dial != nil {
		// slack-go's own dialer but for how it connects.
		opts = append(opts, socketmode.OptionDialer(&websocket.Dialer{NetDialContext: a.opts.Dial, HandshakeTimeout: 45 * time.Second, WriteBufferSize: 32 << 10}))
	}
	client := socketmode.New(a.api, opts...)
	errc := make(chan error, 1)
	go func() { errc <- client.RunContext(ctx) }()
	for {
		select {
		case <-ctx.Done():
			<-errc
			return nil
		case err := <-errc:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack: Socket Mode: %w: check [slack] app_token, an app-level token with the connections:write scope (Basic Information → App-Level Tokens)", err)
		case evt := <-client.Events:
			a.onSocketEvent(ctx, h, client, evt)
		}
	}
}

// onSocketEvent handles one event of the socketmode client.
func (a *Adapter) onSocketEvent(ctx context.Context, h core.Handler, client *socketmode.Client, evt socketmode.Event) {
	ack := func(req *socketmode.Request) func(any) {
		return func(reply any) {
			if err := client.AckCtx(ctx, req.EnvelopeID, reply); err != nil {
				a.log.Warn("acknowledge an envelope", "envelope", req.EnvelopeID, "err", err)
			}
		}
	}
	switch evt.Type {
	case socketmode.EventTypeConnecting:
		a.log.Debug("Socket Mode connecting")
	case socketmode.EventTypeConnected:
		a.log.Info("Socket Mode connected")
	case socketmode.EventTypeConnectionError:
		a.log.Warn("Socket Mode connection failed; retrying", "err", evt.Data)
	case socketmode.EventTypeInvalidAuth:
		a.log.Error("Socket Mode: Slack refused the app-level token")
	case socketmode.EventTypeIncomingError, socketmode.EventTypeErrorWriteFailed:
		a.log.Warn("Socket Mode", "event", evt.Type, "err", evt.Data)
	case socketmode.EventTypeErrorBadMessage:
		a.skipMalformed(ctx, client, evt)
	case socketmode.EventTypeEventsAPI:
		ev, ok := evt.Data.(slackevents.EventsAPIEvent)
		if ok && evt.Request != nil {
			a.accept(ctx, h, envelope{id: evt.Request.EnvelopeID, retry: evt.Request.RetryAttempt, event: &ev, ack: ack(evt.Request)})
		}
	case socketmode.EventTypeSlashCommand:
		c, ok := evt.Data.(slack.SlashCommand)
		if ok && evt.Request != nil {
			a.accept(ctx, h, envelope{id: evt.Request.EnvelopeID, retry: evt.Request.RetryAttempt, slash: &c, ack: ack(evt.Request)})
		}
	case socketmode.EventTypeInteractive:
		ic, ok := evt.Data.(slack.InteractionCallback)
		if ok && evt.Request != nil {
			a.accept(ctx, h, envelope{id: evt.Request.EnvelopeID, retry: evt.Request.RetryAttempt, action: &ic, ack: ack(evt.Request)})
		}
	}
}

// skipMalformed logs an envelope slack-go could not read (an event type it
// does not know, a broken payload) and acknowledges it, so that Slack does
// not deliver it again: a malformed update is skipped, never fatal.
func (a *Adapter) skipMalformed(ctx context.Context, client *socketmode.Client, evt socketmode.Event) {
	bad, ok := evt.Data.(*socketmode.ErrorBadMessage)
	if !ok {
		return
	}
	var head struct {
		EnvelopeID string `json:"envelope_id"`
		Type       string `json:"type"`
	}
	_ = json.Unmarshal(bad.Message, &head)
	a.log.Warn("skipping an envelope parley cannot read", "envelope", head.EnvelopeID, "type", head.Type, "err", bad.Cause)
	if head.EnvelopeID != "" {
		if err := client.AckCtx(ctx, head.EnvelopeID, nil); err != nil {
			a.log.Warn("acknowledge an envelope", "envelope", head.EnvelopeID, "err", err)
		}
	}
}
