package slack

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/core"
)

// Streaming (Options.Stream): the live output carried by Slack's streaming
// methods. The output message of a turn is started with chat.startStream
// instead of posted; while the agent's text only grows, each edit appends
// the new part with chat.appendStream; anything else — a rewrite, the tail
// narrowing past the length limit, a final text split into continuations —
// ends the stream (chat.stopStream) and goes through chat.update as in the
// default mode, and so does every edit of a message with no open stream.
// A stream is ended when the turn's other messages follow it (the
// assistant's answer, a question, "done") or the next turn's output starts,
// and Slack ends any stream on its own about five minutes after it
// started; an append refused because of that falls back to chat.update.
//
// Refusals. A workspace or app that Slack does not offer streaming to
// refuses chat.startStream (unknown_method, access_denied, no_permission,
// channel_type_not_supported, not_allowed, …): the output is posted as in
// the default mode and the refusal is remembered for the workspace until
// the daemon restarts, so it costs one call. A refusal of one thread only
// (no recipient known, the thread gone) posts that message without it.
//
// Restarts. What is open lives in memory: after kill -9 mid-stream the
// output message's ts is still the binding's (core saved it when the
// stream started), so the next edit is chat.update of that message; Slack
// answers streaming_state_conflict while its stream is still open, and
// the adapter then stops it and updates — the same message is edited
// further, no second one is posted. Nothing stream-specific needs to be
// kept with the binding.
//
// Pacing. The outbox paces operations by kind, and with streaming on one
// output edit may become any of several methods Slack counts on its own,
// chosen here at call time. So the adapter declares edits at
// chat.appendStream's budget and outside the channel's one post a second
// (adapter.go: streamLimits), and declares besides a limit on each method
// it picks: chat.startStream, chat.appendStream, chat.stopStream and
// chat.update per workspace, chat.postMessage per channel. Before each such
// call it asks the outbox (Options.MethodPacer, pace), which counts the
// calls in its windows with all the others. When the method an operation
// needs has no room, no call is made and the outbox is asked to retry the
// conversation later (spent). A start with no room posts instead (the
// outbox paced the op as a post).

// streamRefusals are the answers of a workspace or app that does not offer
// the streaming methods (Slack documents no dedicated code).
var streamRefusals = map[string]bool{
	"unknown_method": true, "method_deprecated": true, "not_allowed": true, "access_denied": true,
	"accesslimited": true, "no_permission": true, "channel_type_not_supported": true,
	"team_not_allowed": true, "feature_not_enabled": true, "missing_scope": true,
	"not_allowed_token_type": true, "enterprise_is_restricted": true,
}

// Slack's answers about a stream's state.
const (
	codeNotStreaming     = "message_not_in_streaming_state"
	codeStreamConflict   = "streaming_state_conflict"
	codeStoppedByUser    = "stopped_by_user"
	streamRecipientsSize = 4096
)

// streamState is what the adapter knows of its streams.
type streamState struct {
	mu sync.Mutex
	// open are the streams this process started and has not ended, by
	// channel and ts.
	open map[string]*liveStream
	// refused holds, per workspace (team id), Slack's refusal of the
	// streaming methods.
	refused map[string]string
	// recipients are, per thread, the member who last wrote there: a
	// stream in a channel is addressed to a person.
	recipients map[string]string
}

// liveStream is one open stream: the markdown it shows.
type liveStream struct {
	channel, ts, thread string
	shown               string
}

func (s *streamState) init() {
	s.open = map[string]*liveStream{}
	s.refused = map[string]string{}
	s.recipients = map[string]string{}
}

func streamKey(channel, ts string) string { return channel + "/" + ts }

// pace asks the outbox for one call of method at p, by the limits the
// adapter declares on methods (see Pacing): 0 when the call may go now,
// counted; else how long until it may, nothing counted. Without a
// MethodPacer every call goes.
func (a *Adapter) pace(p core.Place, method string) time.Duration {
	if a.opts.MethodPacer == nil {
		return 0
	}
	return a.opts.MethodPacer.TakeMethod(Name, p, method)
}

// spent is the answer when method has no room for wait: a rate limit of
// the operation's conversation only (all its kinds: the operation that
// wanted the method may be of any), for as long as the method's windows
// need, with no call made. The outbox holds the operation back and retries
// it with the newest content.
func spent(method string, wait time.Duration) error {
	wait = max(wait, 100*time.Millisecond)
	return &core.RateLimitError{RetryAfter: wait, Scope: core.ScopeConversation,
		Err: fmt.Errorf("slack: %s: the workspace's budget for it is spent for %s (counted by parley; Slack was not called)", method, wait.Round(time.Millisecond))}
}

// heard records that member wrote in the thread at p, the recipient of
// the thread's next stream.
func (a *Adapter) heard(p core.Place, member string) {
	if !a.opts.Stream || member == "" {
		return
	}
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	if len(a.streams.recipients) >= streamRecipientsSize {
		clear(a.streams.recipients) // a bound, not a cache policy: recipients are re-learnt
	}
	a.streams.recipients[streamKey(p.Chat, p.Thread)] = member
}

// recipient is whom a stream in the thread at p is addressed to: the
// member who last wrote there, else the first allowed member; "" when
// none is known. A direct message needs none.
func (a *Adapter) recipient(p core.Place) string {
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	if id := a.streams.recipients[streamKey(p.Chat, p.Thread)]; id != "" {
		return id
	}
	if len(a.opts.Recipients) > 0 {
		return a.opts.Recipients[0]
	}
	return ""
}

// StreamRefused reports Slack's refusal of the streaming methods in the
// workspace, "" when none was seen.
func (a *Adapter) StreamRefused() string {
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	return a.streams.refused[a.me().TeamID]
}

func (a *Adapter) refuse(code string) {
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	team := a.me().TeamID
	if _, seen := a.streams.refused[team]; !seen {
		a.log.Warn("Slack refused its streaming methods in this workspace; the live output goes through chat.update",
			"code", code, "fix", "give the app the Agents & AI Apps feature, or set [slack] stream = false")
	}
	a.streams.refused[team] = code
}

// startStream starts the turn's output message as a stream at p, when
// streaming is on, offered and has budget. ok false means "post it as
// usual"; an error is the call's failure.
func (a *Adapter) startStream(ctx context.Context, p core.Place, m core.OutMessage) (ts string, ok bool, err error) {
	if !a.opts.Stream || m.Kind != core.KindOutput || p.Thread == "" || len(m.Text) > maxMarkdown || a.StreamRefused() != "" {
		return "", false, nil
	}
	a.endStreams(ctx, p) // the previous turn's stream, if still open
	opts := []slack.MsgOption{slack.MsgOptionTS(p.Thread), slack.MsgOptionMarkdownText(m.Text)}
	if !strings.HasPrefix(p.Chat, "D") {
		who := a.recipient(p)
		if who == "" {
			return "", false, nil
		}
		opts = append(opts, slack.MsgOptionRecipientTeamID(a.me().TeamID), slack.MsgOptionRecipientUserID(who))
	}
	if a.pace(p, "chat.startStream") > 0 {
		return "", false, nil // paced as a post: post it
	}
	_, ts, err = a.api.StartStreamContext(ctx, p.Chat, opts...)
	switch code := errorCode(err); {
	case err == nil:
	case streamRefusals[code]:
		a.refuse(code)
		return "", false, nil
	case code != "" && code != codeRateLimited && !transientCodes[code]:
		// This thread only (a recipient Slack does not know, the
		// thread gone, …): posted as usual, which says what is wrong.
		a.log.Info("Slack refused to stream in this thread; posting", "channel", p.Chat, "thread", p.Thread, "code", code)
		return "", false, nil
	default:
		return "", false, classify("chat.startStream", err)
	}
	a.streams.mu.Lock()
	a.streams.open[streamKey(p.Chat, ts)] = &liveStream{channel: p.Chat, ts: ts, thread: p.Thread, shown: m.Text}
	a.streams.mu.Unlock()
	return ts, true, nil
}

// openStream is the open stream of the message r, or nil.
func (a *Adapter) openStream(r core.MessageRef) *liveStream {
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	return a.streams.open[streamKey(r.Place.Chat, r.ID)]
}

func (a *Adapter) forget(st *liveStream) {
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	delete(a.streams.open, streamKey(st.channel, st.ts))
}

// editStream edits the output message of st while its stream is open: growth
// is appended; anything else ends the stream and returns handled false
// for chat.update to show m.
func (a *Adapter) editStream(ctx context.Context, st *liveStream, m core.OutMessage) (handled bool, err error) {
	a.streams.mu.Lock()
	shown := st.shown
	a.streams.mu.Unlock()
	if m.Text == shown {
		return true, nil // nothing new
	}
	if grown, ok := strings.CutPrefix(m.Text, shown); ok && len(m.Buttons) == 0 {
		if wait := a.pace(core.Place{Chat: st.channel, Thread: st.thread}, "chat.appendStream"); wait > 0 {
			return true, spent("chat.appendStream", wait)
		}
		_, _, err := a.api.AppendStreamContext(ctx, st.channel, st.ts, slack.MsgOptionMarkdownText(grown))
		switch code := errorCode(err); {
		case err == nil:
			a.streams.mu.Lock()
			st.shown = m.Text
			a.streams.mu.Unlock()
			return true, nil
		case code == codeNotStreaming || code == codeStoppedByUser:
			a.forget(st) // Slack ended it: the message takes chat.update now
			return false, nil
		case code == codeMessageNotFound:
			a.forget(st)
			return true, classify("chat.appendStream", err)
		case streamRefusals[code]:
			a.refuse(code)
			return false, a.stopStream(ctx, st)
		default:
			// Not known whether the text was appended (a lost answer
			// would append it twice on a retry): the stream ends and
			// chat.update shows the whole text, whatever happened.
			if serr := a.stopStream(ctx, st); serr != nil {
				return true, serr
			}
			return false, nil
		}
	}
	return false, a.stopStream(ctx, st)
}

// stopStream ends st; the message then shows what was appended, until
// chat.update replaces it. A stream Slack already ended counts as ended.
func (a *Adapter) stopStream(ctx context.Context, st *liveStream) error {
	if wait := a.pace(core.Place{Chat: st.channel, Thread: st.thread}, "chat.stopStream"); wait > 0 {
		return spent("chat.stopStream", wait)
	}
	_, _, err := a.api.StopStreamContext(ctx, st.channel, st.ts)
	if err != nil && !hasCode(err, codeNotStreaming, codeStoppedByUser, codeMessageNotFound) {
		return classify("chat.stopStream", err)
	}
	a.forget(st)
	return nil
}

// endStreams ends, best effort, the streams open in the thread at p: the
// turn's other messages follow there, or the next turn's output starts.
// With no stop budget left, a stream is left to Slack, which ends it
// within minutes, and to the next edit of its message.
func (a *Adapter) endStreams(ctx context.Context, p core.Place) {
	if !a.opts.Stream || p.Thread == "" {
		return
	}
	a.streams.mu.Lock()
	var open []*liveStream
	for _, st := range a.streams.open {
		if st.channel == p.Chat && st.thread == p.Thread {
			open = append(open, st)
		}
	}
	a.streams.mu.Unlock()
	for _, st := range open {
		if err := a.stopStream(ctx, st); err != nil {
			a.log.Debug("stream not ended", "channel", st.channel, "ts", st.ts, "err", err)
		}
	}
}

// updateStreamed is chat.update of a message that may still be streaming
// without this process knowing (a stream from before a restart): Slack
// answers streaming_state_conflict, and the stream is stopped and the
// update made again.
func (a *Adapter) updateStreamed(ctx context.Context, channel, ts string, opts []slack.MsgOption) error {
	err := a.update(ctx, channel, ts, opts)
	if !hasCode(err, codeStreamConflict) {
		return err
	}
	a.log.Info("the output message is still streaming (from before a restart): stopping it", "channel", channel, "ts", ts)
	if err := a.stopStream(ctx, &liveStream{channel: channel, ts: ts}); err != nil {
		return err
	}
	return a.update(ctx, channel, ts, opts)
}
