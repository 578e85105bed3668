package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/core"
)

// How a session's title and status are shown. A session lives in a thread;
// its root is either parley's (posted by /parley new, or for a session
// started elsewhere) or a person's (the top-level message that started
// it).
//
//   - A root parley owns shows "⏳ *Title*": the status emoji and the
//     title, edited in place (chat.update) when either changes.
//   - A person's root cannot be edited. Its status is a reaction on it
//     (⏳ hourglass, 💬 speech balloon, ❓ question, ✅ check mark), swapped
//     when the status changes, which the channel shows at a glance; its
//     title is the message itself, until the session is renamed: then a
//     header reply in the thread shows the new title, edited on later
//     renames.
//
// Core calls ShowStatus only when the view changed. What parley posted is
// kept in the binding's Meta. Who owns the root is known when the adapter
// made the session (the roots map, in memory until the first status is
// shown); after a restart in between, ShowStatus finds out by editing the
// root, which Slack refuses (cant_update_message) for a person's.

// meta is the adapter's state of a binding.
type meta struct {
	// Owner of the root: ownerBot or ownerPerson; empty until known.
	Owner string `json:"owner,omitempty"`
	// Title is the title a person's root shows by itself (the session's
	// first title).
	Title string `json:"title,omitempty"`
	// Header is the ts of the reply showing a renamed session's title.
	Header string `json:"header,omitempty"`
	// Reaction is the status reaction on a person's root.
	Reaction string `json:"reaction,omitempty"`
}

const (
	ownerBot    = "bot"
	ownerPerson = "person"
)

func parseMeta(raw json.RawMessage) meta {
	var m meta
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &m) // unreadable state starts afresh
	}
	return m
}

func (m meta) raw() json.RawMessage {
	b, _ := json.Marshal(m)
	return b
}

// remember notes who owns the root of a session the adapter just made at p.
func (a *Adapter) remember(p core.Place, owner string) { a.roots.Store(p, owner) }

// Bind implements core.Binder: a session that started elsewhere gets a
// root message in the channel, showing its status and title, and lives in
// its thread.
func (a *Adapter) Bind(ctx context.Context, s core.Session) (core.Binding, error) {
	v := core.StatusView{Title: s.Title, Status: s.Status}
	p := core.Place{Chat: a.opts.Channel}
	ts, err := a.post(ctx, p, payload{Text: rootText(v)}.options(false))
	if err != nil {
		return core.Binding{}, err
	}
	// The root already shows the status: no ShowStatus follows.
	return core.Binding{Place: core.Place{Chat: p.Chat, Thread: ts}, Meta: meta{Owner: ownerBot}.raw(), Shown: v}, nil
}

// ShowStatus implements core.StatusShower (see above). It returns the
// binding's new Meta, or nil when it did not change.
func (a *Adapter) ShowStatus(ctx context.Context, b core.Binding, v core.StatusView) (json.RawMessage, error) {
	p := b.Place
	if p.Thread == "" {
		return nil, nil // no thread, nothing to show it on
	}
	old := parseMeta(b.Meta)
	m := old
	if m.Owner == "" {
		if owner, ok := a.roots.Load(p); ok {
			m.Owner = owner.(string)
		}
	}
	raw, err := a.showStatus(ctx, b, p, old, m, v)
	if err == nil {
		a.roots.Delete(p) // the Meta says it from now on
	}
	return raw, err
}

// showStatus is ShowStatus once the root's owner is known as far as it
// can be without asking Slack.
func (a *Adapter) showStatus(ctx context.Context, b core.Binding, p core.Place, old, m meta, v core.StatusView) (json.RawMessage, error) {
	if m.Owner == "" || m.Owner == ownerBot {
		err := a.update(ctx, p.Chat, p.Thread, payload{Text: rootText(v)}.options(true))
		switch {
		case err == nil:
			m.Owner = ownerBot
			return changed(old, m), nil
		case m.Owner == "" && hasCode(err, codeCantUpdate):
			m.Owner, m.Title = ownerPerson, b.Shown.Title
		default:
			return nil, statusError("chat.update", err)
		}
	}
	if err := a.showReaction(ctx, p, &m, v.Status); err != nil {
		return changed(old, m), err
	}
	if err := a.showHeader(ctx, p, &m, v.Title); err != nil {
		return changed(old, m), err
	}
	return changed(old, m), nil
}

// changed is m's JSON when it differs from old, else nil.
func changed(old, m meta) json.RawMessage {
	if old == m {
		return nil
	}
	return m.raw()
}

// statusError classifies a failure to show a status; a root that is gone
// leaves nothing to show it on, which retrying cannot change.
func statusError(method string, err error) error {
	err = classify(method, err)
	if errors.Is(err, core.ErrMessageGone) {
		return core.Permanent(fmt.Errorf("slack: the thread's root is gone: %w", err))
	}
	return err
}

// showReaction makes the status reaction on a person's root the one of
// st: the new one is added before the old one is taken away.
func (a *Adapter) showReaction(ctx context.Context, p core.Place, m *meta, st core.Status) error {
	name := reactionFor(st)
	if name == m.Reaction {
		return nil
	}
	item := slack.NewRefToMessage(p.Chat, p.Thread)
	if err := a.api.AddReactionContext(ctx, name, item); err != nil && !hasCode(err, codeAlreadyReacted) {
		return statusError("reactions.add", err)
	}
	prev := m.Reaction
	m.Reaction = name
	if prev == "" {
		return nil
	}
	if err := a.api.RemoveReactionContext(ctx, prev, item); err != nil && !hasCode(err, codeNoReaction) {
		// The new status shows; a stale reaction beside it is noise,
		// not worth the status op's retries.
		a.log.Warn("could not remove the previous status reaction", "channel", p.Chat, "thread", p.Thread, "reaction", prev, "err", err)
	}
	return nil
}

// showHeader shows title in the header reply of a thread whose root a
// person wrote, once it differs from the title the root shows.
func (a *Adapter) showHeader(ctx context.Context, p core.Place, m *meta, title string) error {
	if m.Title == "" {
		m.Title = title // the first view: the root itself is the title
		return nil
	}
	if m.Header == "" && title == m.Title {
		return nil
	}
	pl := payload{Text: headerText(title)}
	if m.Header != "" {
		err := a.update(ctx, p.Chat, m.Header, pl.options(true))
		if err == nil {
			return nil
		}
		if !hasCode(err, codeMessageNotFound) {
			return statusError("chat.update", err)
		}
		m.Header = "" // someone deleted it: post another
	}
	ts, err := a.post(ctx, p, pl.options(false))
	if err != nil {
		if errors.Is(err, core.ErrThreadGone) {
			return core.Permanent(err)
		}
		return err
	}
	m.Header = ts
	return nil
}
