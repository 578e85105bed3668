package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/parley-chat/parley/core"
)

// The progress message: one per session, binding and turn, listing the
// turn's tool calls compactly (tool, command, running / exit code /
// approval). Like the output message it is derived state: every tool event
// queues one coalescing op that, when it runs, renders the session's calls
// as they are then, and sends the message or edits it in place (the digest,
// persisted in Binding.Progress, skips no-op edits). It is sent with the
// turn_complete lifetime, so the cleanup ledger deletes it when the turn
// completes; an op that runs after its turn ended does nothing, and one
// whose message is found gone while its turn still runs sends it anew.
// Adapters that cannot edit get the message once, with the first call.

// progressLines is how many calls the progress message lists; earlier
// ones are counted in a line above them.
const progressLines = 10

// progressCmdLen bounds a command's length in the progress message.
const progressCmdLen = 80

// progress keeps the progress message of each session, binding and turn.
type progress struct {
	store    core.Store
	outbox   *Outbox
	bindings *bindings
	// sent is called after every message sent (Dispatcher.sent).
	sent func(ctx context.Context, s Sent)
}

// enqueue queues bringing a's progress message of e's turn up to
// date with the session.
func (pg *progress) enqueue(s core.Session, a core.Adapter, e core.Event) {
	name := a.Name()
	calls := []core.OpKind{core.OpEdit}
	if b, ok := s.Bindings[name]; !ok || b.Progress.Ref.IsZero() || b.Progress.Turn != e.Turn {
		calls = []core.OpKind{core.OpSend}
	}
	key := "progress\x00" + string(s.ID) + "\x00" + string(name) + "\x00" + strconv.FormatUint(e.Turn, 10)
	pg.outbox.Enqueue(core.Op{Kind: core.OpEdit, Calls: calls, Adapter: name, Place: queuePlace(s, a), Key: key,
		Run: func(ctx context.Context, at core.Place) error { return pg.deliver(ctx, a, s.ID, at, e) }})
}

// deliver shows the progress of e's turn on a.
func (pg *progress) deliver(ctx context.Context, a core.Adapter, id core.SessionID, queuedAt core.Place, e core.Event) error {
	b, _, err := pg.bindings.of(ctx, a, id, queuedAt)
	if err != nil {
		return err
	}
	s, err := pg.store.Session(ctx, id)
	if err != nil {
		return err
	}
	if s.Turn != e.Turn {
		return core.ErrNoCall // the turn is over: its progress is deleted, not shown
	}
	text := ProgressText(s.Tools, e.Turn)
	if text == "" {
		return core.ErrNoCall
	}
	m := core.OutMessage{Kind: core.KindProgress, Text: text, Silent: true}
	dg := digest(m)
	cur := b.Progress
	if cur.Turn != e.Turn {
		cur = core.OutputState{Turn: e.Turn}
	}
	if !cur.Ref.IsZero() && cur.Digest == dg {
		return core.ErrNoCall
	}
	ed, canEdit := a.(core.Editor)
	if !cur.Ref.IsZero() {
		if !canEdit {
			return core.ErrNoCall
		}
		err := ed.Edit(ctx, cur.Ref, m)
		switch {
		case err == nil, errors.Is(err, core.ErrNotModified):
			cur.Digest = dg
			return pg.save(ctx, id, a.Name(), cur)
		case !errors.Is(err, core.ErrMessageGone):
			return err
		}
	}
	ref, err := pg.bindings.sendAt(ctx, a, id, &b, m)
	if err != nil {
		return err
	}
	pg.sent(ctx, Sent{Session: id, Ref: ref, Kind: core.KindProgress, Lifetime: core.LifetimeTurnComplete, Seq: e.Seq})
	cur.Ref, cur.Digest = ref, dg
	return pg.save(ctx, id, a.Name(), cur)
}

func (pg *progress) save(ctx context.Context, id core.SessionID, name core.AdapterName, p core.OutputState) error {
	_, _, err := pg.store.UpdateSession(ctx, id, func(s *core.Session) error {
		b, ok := s.Bindings[name]
		if !ok {
			return nil
		}
		b.Progress = p
		s.Bindings[name] = b
		return nil
	})
	return err
}

// ProgressText renders the tool calls of turn as the progress message's
// markdown, or "" when the turn has none.
func ProgressText(tools []core.ToolState, turn uint64) string {
	var calls []core.ToolState
	for _, t := range tools {
		if t.Turn == turn {
			calls = append(calls, t)
		}
	}
	if len(calls) == 0 {
		return ""
	}
	done := 0
	for _, t := range calls {
		if t.Done {
			done++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "🔧 Tools: %d of %d done", done, len(calls))
	if n := len(calls) - progressLines; n > 0 {
		fmt.Fprintf(&b, "\n… %d earlier", n)
		calls = calls[n:]
	}
	for _, t := range calls {
		b.WriteString("\n" + progressLine(t))
	}
	return b.String()
}

func progressLine(t core.ToolState) string {
	var mark, state string
	switch {
	case t.Done && t.Failed():
		mark, state = "❌", fmt.Sprintf("exit %d", *t.ExitCode)
	case t.Done:
		mark, state = "✅", "done"
		if t.ExitCode != nil {
			state = "exit 0"
		}
	case t.Question != "":
		mark, state = "❓", "waiting for approval"
	case t.Decision == core.DecisionDenyContinue || t.Decision == core.DecisionDenyAbort:
		mark, state = "🚫", "denied"
	default:
		mark, state = "⏳", "running"
	}
	line := mark + " **" + escapeInline(t.Tool) + "**"
	if c := oneLine(t.Cmd); c != "" {
		line += " " + codeSpan(c)
	}
	return line + " — " + state
}

// oneLine is cmd's first line, shortened to progressCmdLen characters.
func oneLine(cmd string) string {
	cmd = strings.TrimSpace(cmd)
	first, _, more := strings.Cut(cmd, "\n")
	r := []rune(first)
	if len(r) > progressCmdLen {
		return string(r[:progressCmdLen-1]) + "…"
	}
	if more {
		return first + " …"
	}
	return first
}

// codeSpan is s as a markdown code span, with a fence longer than any run
// of backticks inside.
func codeSpan(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	return fence + pad + s + pad + fence
}

// escapeInline escapes markdown's inline punctuation in a tool's name.
func escapeInline(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_[]<>#|~", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
