package adaptertest

import (
	"context"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// markupName is what a dialect's name looks like: "plain", "telegram_html".
var markupName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// checkCapabilities: what the adapter declares is sensible: a length limit
// has a unit, the markup has a name, every rate limit has a scope and
// a rate and counts kinds or methods, and what Capabilities promises the interfaces can do.
func checkCapabilities(t *testing.T, e *env) {
	a := e.Adapter
	c := a.Capabilities()
	if a.Name() == "" || !core.Origin(a.Name()).IsUI() {
		t.Errorf("adapter name %q: want a name that is not one of core's non-UI origins (it is the origin of the adapter's input)", a.Name())
	}
	if c.MaxLength < 0 {
		t.Errorf("MaxLength %d < 0", c.MaxLength)
	}
	if c.MaxLength > 0 && c.LengthUnit != core.Bytes && c.LengthUnit != core.Runes && c.LengthUnit != core.UTF16 {
		t.Errorf("MaxLength %d in unknown LengthUnit %d", c.MaxLength, c.LengthUnit)
	}
	if !markupName.MatchString(string(c.Markup)) {
		t.Errorf("Markup %q: want the dialect's name, lower case (core.MarkupPlain, core.MarkupMarkdown or the adapter's own, like telegram.MarkupHTML)", c.Markup)
	}
	if c.FileThreshold < 0 || c.FileThreshold > 0 && !isFileSender(a) {
		t.Errorf("FileThreshold %d: want 0, or more for a core.FileSender (FileSender %v)", c.FileThreshold, isFileSender(a))
	}
	if c.DeleteOthers && !isDeleter(a) {
		t.Error("DeleteOthers is declared but the adapter is not a core.Deleter")
	}
	if c.EditInterval < 0 {
		t.Errorf("EditInterval %v < 0", c.EditInterval)
	}
	for i, l := range c.Limits {
		switch l.Scope {
		case core.ScopeConversation, core.ScopeGroup, core.ScopeAccount:
		default:
			t.Errorf("Limits[%d] has scope %v: want conversation, group or account", i, l.Scope)
		}
		if l.Rate.Unlimited() {
			t.Errorf("Limits[%d] has rate %+v, which limits nothing: want N > 0 per a positive duration", i, l.Rate)
		}
		for _, k := range l.Kinds {
			if k < core.OpSend || k > core.OpTyping {
				t.Errorf("Limits[%d] counts unknown operation kind %v", i, k)
			}
		}
		checkMethodLimit(t, i, l)
	}
}

// checkMethodLimit: a limit counts operations by kind or calls by method,
// never both (the outbox counts the two at different moments, and an
// operation's calls are the adapter's to name); what a limit on methods
// names is a method, and it neither learns nor keeps a share for new
// messages, which are about operations.
func checkMethodLimit(t *testing.T, i int, l core.Limit) {
	if len(l.Methods) == 0 {
		return
	}
	if len(l.Kinds) > 0 {
		t.Errorf("Limits[%d] names kinds %v and methods %q: want one limit for each", i, l.Kinds, l.Methods)
	}
	for _, m := range l.Methods {
		if m == "" {
			t.Errorf("Limits[%d] names an empty method", i)
		}
	}
	if l.Learn != nil || l.SendShare != 0 {
		t.Errorf("Limits[%d] on methods %q learns or keeps a share for sends: those are for limits on kinds", i, l.Methods)
	}
}

// checkStable: the Capabilities the outbox reads once (Limits and
// EditInterval) do not change as the adapter works. MaxLength and Markup
// are read for every output, so an adapter may learn them from its
// platform; the suite notes when it does.
func checkStable(t *testing.T, e *env) {
	before := e.Adapter.Capabilities()
	place := e.place(t)
	ref := e.send(t, place, sample)
	if ed, ok := e.Adapter.(core.Editor); ok {
		if err := ed.Edit(ctx(t), ref, core.OutMessage{Kind: core.KindAssistant, Text: "Edited: " + sample}); err != nil {
			t.Fatalf("Edit: %v", err)
		}
	}
	after := e.Adapter.Capabilities()
	if !reflect.DeepEqual(before.Limits, after.Limits) || before.EditInterval != after.EditInterval {
		t.Errorf("Limits or EditInterval changed while the adapter worked (the outbox reads them once): %+v, %v became %+v, %v",
			before.Limits, before.EditInterval, after.Limits, after.EditInterval)
	}
	if before.MaxLength != after.MaxLength || before.Markup != after.Markup || before.LengthUnit != after.LengthUnit {
		t.Logf("note: the adapter learned from its platform: MaxLength %d %v %s became %d %v %s",
			before.MaxLength, before.LengthUnit, before.Markup, after.MaxLength, after.LengthUnit, after.Markup)
	}
}

// checkRateLimit: for each operation the adapter can do, the platform's
// 429 is a *core.RateLimitError, not permanent, with at least the
// platform's retry_after and the scope the adapter documents; and the same
// call succeeds once the platform accepts it again.
func checkRateLimit(t *testing.T, e *env) {
	e.require(t, HookRateLimitNext)
	ops := []struct {
		kind  core.OpKind
		claim bool
		// do prepares on a fresh env and returns the call to limit.
		do func(t *testing.T, e *env) func() error
	}{
		{core.OpSend, true, func(t *testing.T, e *env) func() error {
			place := e.place(t)
			return func() error {
				_, err := e.Adapter.Send(ctx(t), place, core.OutMessage{Kind: core.KindAssistant, Text: sample})
				return err
			}
		}},
		{core.OpEdit, isEditor(e.Adapter), func(t *testing.T, e *env) func() error {
			ref := e.send(t, e.place(t), sample)
			n := 0
			return func() error {
				n++
				return e.Adapter.(core.Editor).Edit(ctx(t), ref, core.OutMessage{Text: sample + " (edit " + string(rune('0'+n)) + ")"})
			}
		}},
		{core.OpDelete, isDeleter(e.Adapter), func(t *testing.T, e *env) func() error {
			ref := e.send(t, e.place(t), sample)
			return func() error { return e.Adapter.(core.Deleter).Delete(ctx(t), ref) }
		}},
		{core.OpRename, isStatusShower(e.Adapter), func(t *testing.T, e *env) func() error {
			b := e.binding(t)
			n := 0
			return func() error {
				n++
				_, err := e.Adapter.(core.StatusShower).ShowStatus(ctx(t), b, core.StatusView{Title: "Renamed " + string(rune('0'+n)), Status: core.StatusWorking})
				return err
			}
		}},
		{core.OpTyping, isTyping(e.Adapter), func(t *testing.T, e *env) func() error {
			place := e.place(t)
			return func() error { return e.Adapter.(core.TypingNotifier).Typing(ctx(t), place) }
		}},
	}
	for _, op := range ops {
		t.Run(op.kind.String(), func(t *testing.T) {
			if !op.claim {
				t.Skipf("the adapter cannot %s", op.kind)
			}
			fresh := newEnv(t, e.h)
			fresh.require(t, HookRateLimitNext)
			call := op.do(t, fresh)
			const retryAfter = 3 * time.Second
			fresh.RateLimitNext(op.kind, retryAfter)
			err := call()
			var rl *core.RateLimitError
			switch {
			case !errors.As(err, &rl):
				t.Fatalf("%s refused with 429: %v, want a *core.RateLimitError", op.kind, err)
			case core.IsPermanent(err):
				t.Errorf("%s refused with 429: %v is permanent: the outbox would drop the operation", op.kind, err)
			}
			if rl.RetryAfter < retryAfter {
				t.Errorf("%s refused with retry_after %v: RetryAfter %v is shorter", op.kind, retryAfter, rl.RetryAfter)
			}
			if want := fresh.RateLimitScope(op.kind); rl.Scope != want {
				t.Errorf("%s refused with 429: Scope %v, the adapter documents %v", op.kind, rl.Scope, want)
			}
			if err := call(); err != nil {
				t.Errorf("%s again once the platform accepts it: %v", op.kind, err)
			}
		})
	}
}

// checkTyping: typing indicators sent through a delivery.Outbox with the
// adapter's declared limits reach the platform, but none before the
// retry_after of a 429 at their place has elapsed, by the platform's clock.
func checkTyping(t *testing.T, e *env) {
	tn, ok := e.Adapter.(core.TypingNotifier)
	if !ok {
		t.Skip("the adapter is not a core.TypingNotifier")
	}
	e.require(t, HookCalls)
	e.require(t, HookRateLimitNext)
	// A short real wait for HTTP fakes; on a fake clock, any.
	retryAfter := time.Second
	if e.h.InMemory {
		retryAfter = 5 * time.Second
	}
	place := e.place(t)
	a := e.Adapter
	o := delivery.NewOutbox(delivery.OutboxOptions{}, a)
	defer o.Close()

	e.RateLimitNext(core.OpSend, retryAfter)
	limited := make(chan *core.RateLimitError, 1)
	var once sync.Once
	sent, typed := make(chan error, 1), make(chan error, 1)
	o.Enqueue(core.Op{Kind: core.OpSend, Adapter: a.Name(), Place: place,
		Run: func(ctx context.Context, at core.Place) error {
			_, err := a.Send(ctx, at, core.OutMessage{Kind: core.KindAssistant, Text: sample})
			var rl *core.RateLimitError
			if errors.As(err, &rl) {
				once.Do(func() { limited <- rl })
			}
			return err
		},
		Done: func(err error) { sent <- err }})
	var rl *core.RateLimitError
	select {
	case rl = <-limited:
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for the platform's 429")
	}
	// A platform that counts methods separately (Slack) says its 429 for
	// sends holds back no typing indicator; then the 429 must come from
	// the typing call itself, and the next indicator wait it out.
	refusedKind := core.OpSend
	if len(rl.Kinds) > 0 && !slices.Contains(rl.Kinds, core.OpTyping) {
		t.Logf("a 429 for sends holds back only %v: checking a 429 for typing instead", rl.Kinds)
		if err := waitErr(t, sent, "the send"); err != nil {
			t.Fatalf("the send failed after the 429: %v", err)
		}
		refusedKind = core.OpTyping
		e.RateLimitNext(core.OpTyping, retryAfter)
		first := make(chan error, 1)
		o.Enqueue(core.Op{Kind: core.OpTyping, Adapter: a.Name(), Place: place, Key: "typing", BestEffort: true,
			Run:  func(ctx context.Context, at core.Place) error { return tn.Typing(ctx, at) },
			Done: func(err error) { first <- err }})
		if err := waitErr(t, first, "the refused typing indicator"); !errors.As(err, new(*core.RateLimitError)) {
			t.Fatalf("the first typing indicator ended with %v, want the platform's 429", err)
		}
		sent <- nil
	}
	o.Enqueue(core.Op{Kind: core.OpTyping, Adapter: a.Name(), Place: place, Key: "typing", BestEffort: true,
		Expires: time.Now().Add(retryAfter + time.Minute),
		Run:     func(ctx context.Context, at core.Place) error { return tn.Typing(ctx, at) },
		Done:    func(err error) { typed <- err }})
	if err := waitErr(t, sent, "the send"); err != nil {
		t.Fatalf("the send failed after the 429: %v", err)
	}
	if err := waitErr(t, typed, "the typing indicator"); err != nil {
		t.Fatalf("the typing indicator failed: %v", err)
	}

	// The latest refused call is the 429 (an adapter may have tried
	// another method first), the strictest time to count from.
	var refused time.Time
	var typing []time.Time
	for _, c := range e.Calls() {
		switch {
		case c.Kind == refusedKind && c.Err != "" && (c.Place == place || c.Place.IsZero()):
			refused = c.Time
		case c.Place != place:
		case c.Kind == core.OpTyping && c.Err == "":
			typing = append(typing, c.Time)
		}
	}
	if refused.IsZero() {
		t.Fatalf("adaptertest: the platform recorded no refused send at %+v: %+v", place, e.Calls())
	}
	if len(typing) == 0 {
		t.Fatalf("no typing call reached the platform at %+v: %+v", place, e.Calls())
	}
	for _, at := range typing {
		if d := at.Sub(refused); d < retryAfter {
			t.Errorf("a typing call reached the platform %v after the 429, inside its retry_after of %v", d, retryAfter)
		}
	}
}

// waitTimeout bounds the suite's waits; on a fake clock it costs nothing.
const waitTimeout = 2 * time.Minute

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func waitErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

func isFileSender(a core.Adapter) bool { _, ok := a.(core.FileSender); return ok }
