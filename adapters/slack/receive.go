package slack

import (
	"context"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/parley-chat/parley/adapters/inbound"
	"github.com/parley-chat/parley/core"
)

// envelope is one delivery from Slack, from Socket Mode or from the Events
// API over HTTP: an event, a slash command or an interaction. Exactly one
// of event, slash and action is set.
type envelope struct {
	// id is Socket Mode's envelope id, for logs ("" over HTTP); retry is
	// Slack's retry_attempt (or X-Slack-Retry-Num).
	id     string
	retry  int
	event  *slackevents.EventsAPIEvent
	slash  *slack.SlashCommand
	action *slack.InteractionCallback
	// ack acknowledges the envelope, with a reply for a slash command
	// (nil for none).
	ack func(reply any)
}

// Run implements core.Adapter: it receives over Socket Mode (or, in events
// mode, from EventsHandler) until ctx ends, handing each envelope to h in
// order per conversation and acknowledging it only after h returned: after
// the durable append. It checks the configuration first if Check has not
// run. It returns an error only when Slack refuses the app-level token.
func (a *Adapter) Run(ctx context.Context, h core.Handler) error {
	if a.self.Load() == nil {
		if err := a.Check(ctx); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	a.bgCtx.Store(&ctx)
	a.recv.open(ctx, h)
	defer func() {
		// Closed first: no request enters a lane once the lanes are
		// waited for (see receiver).
		a.recv.close()
		cancel()
		a.lanes.wait()
		a.bg.Wait()
	}()
	if a.opts.Events {
		<-ctx.Done()
		return nil
	}
	return a.runSocket(ctx, h)
}

// receiver lets the requests EventsHandler serves into the lanes of a
// running Run. The HTTP server that calls EventsHandler is not Run's: it
// serves before Run starts, while Run stops, after it returned and between
// a Run that failed and the next. Checking that Run runs and queueing the
// request in its lane are therefore one step under mu, and Run closes the
// receiver under mu before it waits for the lanes: a request either is in
// its lane before that wait starts (lanes' WaitGroup gets its Add before
// the Wait, as sync.WaitGroup requires) or finds Run stopped and is
// answered 503. Without it a request that saw Run running could queue
// after Run had waited for the lanes: work handed to the Handler after
// Run returned, and a WaitGroup Add racing its Wait.
type receiver struct {
	mu  sync.Mutex
	h   core.Handler    // nil while Run is not running
	ctx context.Context // the running Run's; ends when it stops
	// opened is closed by the next open, for requests that wait for Run
	// (enterWait); nil until one waits.
	opened chan struct{}
}

// open lets requests in, to be handled by h within ctx, until close.
func (r *receiver) open(ctx context.Context, h core.Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h, r.ctx = h, ctx
	if r.opened != nil {
		close(r.opened)
		r.opened = nil
	}
}

// close stops letting requests in. When it returns, every request let in
// is queued in its lane.
func (r *receiver) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h, r.ctx = nil, nil
}

// enterWait calls queue with the running Run's context and Handler and
// returns that context. queue must only queue (Adapter.accept): it runs
// under the receiver's lock. When Run is not running it waits up to wait
// (or until done ends) for Run to open the receiver, and reports false
// without calling queue if it does not. Slack retries events
// answered 503 but not slash commands and clicks: one that arrives in the
// moment between parley starting to listen and the adapter's Run starting
// (or between a failed Run and the next) would be lost with an error shown
// to the person, where a short wait within Slack's 3 s lets it through.
func (r *receiver) enterWait(done <-chan struct{}, wait time.Duration, queue func(ctx context.Context, h core.Handler)) (context.Context, bool) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		r.mu.Lock()
		if r.h != nil {
			queue(r.ctx, r.h)
			ctx := r.ctx
			r.mu.Unlock()
			return ctx, true
		}
		if r.opened == nil {
			r.opened = make(chan struct{})
		}
		opened := r.opened
		r.mu.Unlock()
		select {
		case <-opened:
		case <-timer.C:
			return nil, false
		case <-done:
			return nil, false
		}
	}
}

// accept queues e in its conversation's lane. There it is handled, retried
// while the handler fails for a reason other than the input, and then
// acknowledged; a redelivery of a message this process already made
// durable is acknowledged at once. When ctx ends first, e is not
// acknowledged, and Slack delivers it again.
func (a *Adapter) accept(ctx context.Context, h core.Handler, e envelope) {
	lane, done := route(e)
	a.lanes.submit(lane, func() {
		if done != "" && a.handled.has(done) {
			a.log.Debug("acknowledging a redelivery of what is stored already", "envelope", e.id, "retry", e.retry)
			e.ack(nil)
			return
		}
		reply, err := a.work(ctx, h, e)
		if err != nil {
			return
		}
		if done != "" {
			a.handled.add(done)
		}
		e.ack(reply)
	})
}

// route is e's lane (its conversation: the channel and thread root, or
// the channel for slash commands) and its dedup key ("" if none).
func route(e envelope) (lane, done string) {
	switch {
	case e.event != nil:
		if m, ok := e.event.InnerEvent.Data.(*slackevents.MessageEvent); ok {
			root := m.ThreadTimeStamp
			if root == "" {
				root = m.TimeStamp
			}
			if m.SubType != "" && !people[m.SubType] {
				return m.Channel, ""
			}
			return m.Channel + ":" + root, messageID(m.Channel, m.TimeStamp)
		}
		return "event", ""
	case e.slash != nil:
		return "slash:" + e.slash.ChannelID, "slash:" + e.slash.TriggerID
	case e.action != nil:
		ic := e.action
		channel := first(ic.Container.ChannelID, ic.Channel.ID)
		msg := first(ic.Container.MessageTs, ic.Message.Timestamp)
		return channel + ":" + first(ic.Container.ThreadTs, ic.Message.ThreadTimestamp, msg), ""
	}
	return "", ""
}

// work handles e until it is dealt with; it fails only when ctx ends.
func (a *Adapter) work(ctx context.Context, h core.Handler, e envelope) (any, error) {
	var reply any
	retry := inbound.Retry{Log: a.log, What: "envelope"}
	err := retry.Do(ctx, func(ctx context.Context) error {
		var err error
		reply, err = a.handleOnce(ctx, h, e)
		return err
	}, "envelope", e.id)
	if err != nil {
		return nil, err
	}
	return reply, nil
}

// handleOnce handles e once; its error means "try again".
func (a *Adapter) handleOnce(ctx context.Context, h core.Handler, e envelope) (any, error) {
	switch {
	case e.event != nil:
		return nil, a.onEvent(ctx, h, *e.event)
	case e.slash != nil:
		reply, err := a.onSlash(ctx, h, *e.slash)
		if reply == nil || err != nil {
			return nil, err
		}
		return reply, nil
	case e.action != nil:
		return nil, a.onAction(ctx, h, e.action)
	}
	return nil, nil
}
