package channel

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	parleymcp "github.com/parley-chat/parley/mcp"
)

// Claude Code's channel notifications (see the package doc).
const (
	// MethodChannel pushes one event into the Claude Code session.
	MethodChannel = "notifications/claude/channel"
	// MethodPermissionRequest is Claude Code asking the channel's people
	// to decide on a tool call.
	MethodPermissionRequest = "notifications/claude/channel/permission_request"
	// MethodPermission is the channel's verdict on a permission request.
	MethodPermission = "notifications/claude/channel/permission"
)

// StateKey is the agent.state key under which the channel keeps its
// watermark with the session.
const StateKey = "channel"

// state is the value kept under StateKey. A JSON object, so that "no state
// yet" (the empty value) differs from "nothing delivered yet".
type state struct {
	Watermark core.MessageID `json:"watermark"`
}

// message and page are the inbox as chat_read_since returns it.
type (
	message = parleymcp.InboxMessage
	page    = parleymcp.InboxPage
)

// pageSize is how many messages one chat_read_since reads.
const pageSize = 100

// pump delivers the session's human messages to Claude Code, each once, in
// order: read after the watermark, write the event, save the watermark.
type pump struct {
	d      *daemon
	io     *stdio
	log    *slog.Logger
	resync time.Duration
	fresh  bool // the channel created the session: all of it is new
	wm     core.MessageID
}

// run delivers until ctx ends (nil) or the channel cannot go on: stdout
// failed, or the daemon refused (the session is gone).
func (p *pump) run(ctx context.Context) error {
	if err := p.load(ctx); err != nil {
		return err
	}
	select {
	case <-p.io.ready:
	case <-ctx.Done():
		return nil
	}
	tick := time.NewTicker(p.resync)
	defer tick.Stop()
	for {
		if err := p.drain(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		// Notifications are hints; the periodic read also notices a
		// daemon that restarted while nothing was said.
		select {
		case <-p.d.hints:
		case <-tick.C:
		case <-ctx.Done():
			return nil
		}
	}
}

// load reads the watermark kept with the session. Without one (a first
// run), it starts after the last message the agent side wrote, so that an
// old session's history is not pushed as new (at the start of a session the
// channel created), and keeps that at once.
func (p *pump) load(ctx context.Context) error {
	var res struct {
		Value string `json:"value"`
	}
	if err := retry(ctx, func() error {
		return p.d.call(ctx, "agent.state", map[string]any{"key": StateKey}, &res)
	}); err != nil {
		return fmt.Errorf("channel: reading the watermark: %w", err)
	}
	if res.Value != "" {
		var st state
		if err := json.Unmarshal([]byte(res.Value), &st); err != nil {
			return fmt.Errorf("channel: the kept state %q is not the channel's: %w", res.Value, err)
		}
		p.wm = st.Watermark
		p.log.Info("resuming after the kept watermark", "watermark", p.wm)
		return nil
	}
	if p.fresh {
		return p.save(ctx, "")
	}
	var after core.MessageID
	for {
		var pg page
		if err := retry(ctx, func() error {
			return p.d.call(ctx, "chat_read_since", map[string]any{"after_id": string(after), "limit": 1000}, &pg)
		}); err != nil {
			return fmt.Errorf("channel: finding where to start: %w", err)
		}
		for _, m := range pg.Messages {
			if m.Author != core.RoleUser {
				p.wm = m.ID
			}
		}
		if len(pg.Messages) < 1000 {
			break
		}
		after = pg.LastID
	}
	p.log.Info("first run on this session: starting after the agent side's last message", "watermark", p.wm)
	return p.save(ctx, p.wm)
}

// drain delivers everything after the watermark.
func (p *pump) drain(ctx context.Context) error {
	for {
		var pg page
		err := retry(ctx, func() error {
			return p.d.call(ctx, "chat_read_since", map[string]any{"after_id": string(p.wm), "limit": pageSize, "author": string(core.RoleUser)}, &pg)
		})
		if err != nil {
			return fmt.Errorf("channel: reading the inbox: %w", err)
		}
		for _, m := range pg.Messages {
			if params, ok := event(m); ok {
				// Written first, saved after: a crash in between pushes
				// this message again on restart rather than never.
				if err := p.io.notify(MethodChannel, params); err != nil {
					return err
				}
				if err := p.save(ctx, m.ID); err != nil {
					return err
				}
			}
		}
		if pg.LastID != "" && pg.LastID != p.wm {
			// Past messages the channel does not push (answers to its
			// approvals): keep it, so they are not read again.
			if err := p.save(ctx, pg.LastID); err != nil {
				return err
			}
		}
		if len(pg.Messages) < pageSize {
			return nil
		}
	}
}

// save keeps id as the watermark, durably, before returning.
func (p *pump) save(ctx context.Context, id core.MessageID) error {
	b, err := json.Marshal(state{Watermark: id})
	if err != nil {
		return fmt.Errorf("channel: %w", err)
	}
	if err := retry(ctx, func() error {
		return p.d.call(ctx, "agent.state", map[string]any{"key": StateKey, "value": string(b)}, nil)
	}); err != nil {
		return fmt.Errorf("channel: keeping the watermark %s: %w", id, err)
	}
	p.wm = id
	return nil
}

// channelEvent is the params of notifications/claude/channel.
type channelEvent struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta,omitempty"`
}

// event is the channel event of a person's inbox message, or false for
// one the channel does not push: the answer to an approval it asked
// (relayed as a verdict instead).
func event(m message) (channelEvent, bool) {
	if m.Author != core.RoleUser {
		return channelEvent{}, false
	}
	// Answers have core.MimeAnswer; parley stored them as text/plain
	// before.
	if _, ok := delivery.DecisionOf(delivery.ApprovalOptionsFor(false), m.Content); ok && (m.Mime == core.MimeAnswer || m.Mime == "text/plain") {
		return channelEvent{}, false
	}
	meta := map[string]string{
		"session_id": string(m.SessionID),
		"message_id": string(m.ID),
	}
	if m.Origin != "" {
		meta["origin"] = string(m.Origin)
	}
	if m.Actor != "" {
		meta["author"] = m.Actor
	}
	if !m.TS.IsZero() {
		meta["ts"] = m.TS.UTC().Format(time.RFC3339)
	}
	content := m.Content
	switch m.Mime {
	case core.MimeControl:
		meta["kind"] = "control"
		content = "/" + m.Content
	case core.MimeAnswer:
		meta["kind"] = "answer"
	default:
		meta["kind"] = "message"
	}
	if len(m.Attachments) > 0 {
		var b strings.Builder
		b.WriteString(content)
		if content != "" {
			b.WriteString("\n\n")
		}
		b.WriteString("Attached files (on the parley daemon's machine):")
		for _, a := range m.Attachments {
			fmt.Fprintf(&b, "\n- %s (%s, %s, %d bytes)", a.Path, a.Name, a.Mime, a.Size)
		}
		content = b.String()
	}
	return channelEvent{Content: content, Meta: meta}, true
}
