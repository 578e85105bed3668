package adaptertest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode"

	"github.com/parley-chat/parley/core"
)

// Harness is what an adapter's test supplies to Run.
type Harness struct {
	// New returns a fresh adapter and platform for one check. It is called
	// once per subtest (inside a testing/synctest bubble for the
	// time-driven checks when InMemory is set); cleanup goes to t.Cleanup.
	New func(t *testing.T) Env
	// InMemory says the platform runs in this process on the process's
	// clock, without network I/O, so time-driven checks may run in a
	// synctest bubble. HTTP fakes leave it false.
	InMemory bool
}

// Env is one adapter and its platform, as a check sees them. Hooks left nil
// must be explained in Cannot (or be covered by NoMessages), and some may
// not be left out at all when the adapter claims what they check (see the
// hook constants).
type Env struct {
	// Adapter is the adapter under test, not running (the suite never
	// calls Run).
	Adapter core.Adapter
	// Place is a conversation to use; zero when the adapter binds its own
	// (a core.Binder), in which case the suite binds a session per check.
	Place core.Place

	// Shown returns the messages the platform shows at place now, oldest
	// first, people's included.
	Shown func(place core.Place) []ShownMessage
	// Vanish deletes a message behind the adapter's back, as a person
	// would.
	Vanish func(ref core.MessageRef)
	// DeleteThread deletes a conversation the adapter bound, with its
	// messages, behind the adapter's back.
	DeleteThread func(place core.Place)
	// RateLimitNext makes the platform refuse the next call the adapter
	// makes for an operation of kind with its 429 ("too many requests")
	// and retryAfter, in the platform's own shape.
	RateLimitNext func(kind core.OpKind, retryAfter time.Duration)
	// RateLimitScope is the Scope the adapter documents for a 429 of an
	// operation of kind; core.ScopeUnspecified (the outbox pauses the
	// group) when the platform does not say. Required with RateLimitNext.
	RateLimitScope func(kind core.OpKind) core.Scope
	// Title is what the platform shows as the conversation's title (a
	// Telegram topic's name, a Matrix room's name, a Slack header).
	Title func(place core.Place) string
	// Calls returns every call the platform received so far, oldest
	// first, with the platform's own times.
	Calls func() []Call
	// InjectPersonMessage makes a person write text at place and returns
	// the reference the adapter would have given it.
	InjectPersonMessage func(place core.Place, text string) core.MessageRef

	// NoMessages, when not empty, says why the platform keeps no messages
	// the adapter sends (the web page renders sessions from their state):
	// Send, Edit and Delete are accepted and change nothing. It stands for
	// the Shown, Vanish and InjectPersonMessage hooks, and the checks that
	// need a message to be shown, changed or gone are skipped with it.
	NoMessages string
	// Cannot says, for each hook left nil, why the platform cannot offer
	// it.
	Cannot map[Hook]string
}

// ShownMessage is one message as the platform shows it.
type ShownMessage struct {
	// ID is the platform's message id, as in core.MessageRef.ID.
	ID string
	// Text is the text people see: after rendering and parsing (Telegram's
	// visible text, not its HTML), so the suite compares it loosely.
	Text string
	// Buttons are the labels of the buttons shown with it, in order.
	Buttons []string
}

// Call is one platform call as the platform recorded it.
type Call struct {
	// Time is when the platform received it, by its clock (which must be
	// the process's, so that the suite can compare).
	Time time.Time
	// Kind is the outbox operation kind the call belongs to (a topic
	// creation is a send, a chat action is typing).
	Kind core.OpKind
	// Place is where it landed; zero when the platform did not record it
	// (telegramtest's injected failures).
	Place core.Place
	// Err is the platform's error ("" on success).
	Err string
}

// Hook names one of Env's platform hooks.
type Hook string

// Env's hooks. A nil hook fails the check that needs it unless Cannot (or
// NoMessages) says why. Where the adapter claims what a hook checks, no
// reason is accepted: Shown, Vanish and InjectPersonMessage are required
// unless NoMessages (Vanish for Editors and Deleters, InjectPersonMessage
// for Deleters), RateLimitNext when Capabilities declares Limits, Title for
// StatusShowers, Calls for TypingNotifiers.
const (
	HookShown               Hook = "Shown"
	HookVanish              Hook = "Vanish"
	HookDeleteThread        Hook = "DeleteThread"
	HookRateLimitNext       Hook = "RateLimitNext"
	HookTitle               Hook = "Title"
	HookCalls               Hook = "Calls"
	HookInjectPersonMessage Hook = "InjectPersonMessage"
)

// A check is one conformance check, run in its own subtest with a fresh Env.
type check struct {
	name string
	run  func(t *testing.T, e *env)
	// timed checks run in a synctest bubble when the harness is InMemory.
	timed bool
}

var checks = []check{
	{name: "capabilities", run: checkCapabilities},
	{name: "capabilities stable", run: checkStable},
	{name: "send", run: checkSend},
	{name: "edit", run: checkEdit},
	{name: "output grows", run: checkOutputGrows},
	{name: "edit gone", run: checkEditGone},
	{name: "buttons", run: checkButtons},
	{name: "delete", run: checkDelete},
	{name: "delete others", run: checkDeleteOthers},
	{name: "length", run: checkLength},
	{name: "bind", run: checkBind},
	{name: "thread gone", run: checkThreadGone},
	{name: "status", run: checkStatus},
	{name: "rate limit", run: checkRateLimit},
	{name: "typing waits out a 429", run: checkTyping, timed: true},
}

// Run runs every conformance check against the adapter h builds, each in a
// subtest of t with a fresh Env.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("adaptertest: Harness.New is nil")
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.timed && h.InMemory {
				// The bubble's t is its own: carry a skip out of it.
				skipped := false
				synctest.Test(t, func(t *testing.T) {
					defer func() { skipped = t.Skipped() }()
					c.run(t, newEnv(t, h))
				})
				if skipped {
					t.SkipNow()
				}
				return
			}
			c.run(t, newEnv(t, h))
		})
	}
}

// env is an Env with the suite's helpers.
type env struct {
	Env
	h Harness
}

func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	e := &env{Env: h.New(t), h: h}
	if e.Adapter == nil {
		t.Fatal("adaptertest: Env.Adapter is nil")
	}
	return e
}

// callTimeout bounds each platform call the suite makes.
const callTimeout = 30 * time.Second

// ctx is the context of one platform call.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return c
}

// need returns whether hook h is there. When it is not, it fails the test
// if the Env gives no reason or the adapter claims what the hook checks,
// and otherwise returns false with the reason.
func (e *env) need(t *testing.T, h Hook) (bool, string) {
	t.Helper()
	present := map[Hook]bool{
		HookShown: e.Shown != nil, HookVanish: e.Vanish != nil, HookDeleteThread: e.DeleteThread != nil,
		HookRateLimitNext: e.RateLimitNext != nil, HookTitle: e.Title != nil, HookCalls: e.Calls != nil,
		HookInjectPersonMessage: e.InjectPersonMessage != nil,
	}[h]
	if present {
		if h == HookRateLimitNext && e.RateLimitScope == nil {
			t.Fatal("adaptertest: Env.RateLimitNext needs Env.RateLimitScope, the scope the adapter documents for a 429")
		}
		return true, ""
	}
	messageHook := h == HookShown || h == HookVanish || h == HookInjectPersonMessage
	if messageHook && e.NoMessages != "" {
		return false, "the platform keeps no messages: " + e.NoMessages
	}
	var claim string
	switch {
	case h == HookShown:
		claim = "it sends messages"
	case h == HookVanish && (isEditor(e.Adapter) || isDeleter(e.Adapter)):
		claim = "it is a core.Editor or core.Deleter (gone messages are core.ErrMessageGone)"
	case h == HookInjectPersonMessage && isDeleter(e.Adapter):
		claim = fmt.Sprintf("it is a core.Deleter declaring DeleteOthers=%v", e.Adapter.Capabilities().DeleteOthers)
	case h == HookRateLimitNext && len(e.Adapter.Capabilities().Limits) > 0:
		claim = "it declares rate limits"
	case h == HookTitle && isStatusShower(e.Adapter):
		claim = "it is a core.StatusShower"
	case h == HookCalls && isTyping(e.Adapter):
		claim = "it is a core.TypingNotifier"
	}
	if claim != "" {
		t.Fatalf("adaptertest: Env.%s is nil, but the adapter claims what it checks: %s", h, claim)
	}
	reason := e.Cannot[h]
	if reason == "" {
		t.Fatalf("adaptertest: Env.%s is nil and Env.Cannot does not say why", h)
	}
	return false, reason
}

// require skips the test when hook h is missing for a stated reason.
func (e *env) require(t *testing.T, h Hook) {
	t.Helper()
	if ok, reason := e.need(t, h); !ok {
		t.Skipf("the platform cannot %s: %s", h, reason)
	}
}

// session returns a new session to bind.
func (e *env) session(title string) core.Session {
	now := time.Now()
	return core.Session{ID: core.NewSessionID(now), Title: title, Status: core.StatusIdle, Created: now, Updated: now}
}

// bind binds a new session and checks the binding's basics.
func (e *env) bind(t *testing.T, title string) core.Binding {
	t.Helper()
	b, err := e.Adapter.(core.Binder).Bind(ctx(t), e.session(title))
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	if b.Place.IsZero() {
		t.Fatalf("Bind returned a binding without a Place: %+v", b)
	}
	return b
}

// place returns a conversation for one check: Env.Place, or a new binding's.
func (e *env) place(t *testing.T) core.Place {
	t.Helper()
	return e.binding(t).Place
}

// binding returns a binding for one check: at Env.Place, or a new one.
func (e *env) binding(t *testing.T) core.Binding {
	t.Helper()
	if !e.Place.IsZero() {
		return core.Binding{Adapter: e.Adapter.Name(), Place: e.Place}
	}
	if !isBinder(e.Adapter) {
		t.Fatal("adaptertest: Env.Place is zero and the adapter is not a core.Binder")
	}
	b := e.bind(t, "Conformance check")
	b.Adapter = e.Adapter.Name()
	return b
}

// send sends text at place and checks the reference.
func (e *env) send(t *testing.T, place core.Place, text string) core.MessageRef {
	t.Helper()
	ref, err := e.Adapter.Send(ctx(t), place, core.OutMessage{Kind: core.KindAssistant, Text: text})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if ref.IsZero() || ref.Adapter != e.Adapter.Name() || ref.Place != place {
		t.Fatalf("Send returned %+v: want a non-empty ID, Adapter %q and the Place sent to (%+v): the cleanup ledger and the output state keep it",
			ref, e.Adapter.Name(), place)
	}
	return ref
}

// shown returns the message id shows at place, if the platform shows it.
func (e *env) shown(place core.Place, id string) (ShownMessage, bool) {
	for _, m := range e.Shown(place) {
		if m.ID == id {
			return m, true
		}
	}
	return ShownMessage{}, false
}

// words are the words of md: runs of letters and digits, markup aside.
func words(md string) []string {
	return strings.FieldsFunc(md, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// missing are the words of md that shown lacks.
func missing(shown, md string) []string {
	var out []string
	for _, w := range words(md) {
		if !strings.Contains(shown, w) {
			out = append(out, w)
		}
	}
	return out
}

// roundTrip passes b through JSON, as the store keeps it, and checks that
// its Meta survives.
func roundTrip(t *testing.T, b core.Binding) core.Binding {
	t.Helper()
	if len(b.Meta) > 0 && !json.Valid(b.Meta) {
		t.Fatalf("binding Meta is not valid JSON: %q", b.Meta)
	}
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatalf("binding does not marshal: %v", err)
	}
	var out core.Binding
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("binding does not unmarshal: %v", err)
	}
	if out.Place != b.Place || !sameJSON(out.Meta, b.Meta) {
		t.Fatalf("binding changed through JSON: %+v became %+v", b, out)
	}
	return out
}

// sameJSON reports whether a and b hold the same JSON value (empty = none).
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func isEditor(a core.Adapter) bool       { _, ok := a.(core.Editor); return ok }
func isDeleter(a core.Adapter) bool      { _, ok := a.(core.Deleter); return ok }
func isBinder(a core.Adapter) bool       { _, ok := a.(core.Binder); return ok }
func isStatusShower(a core.Adapter) bool { _, ok := a.(core.StatusShower); return ok }
func isTyping(a core.Adapter) bool       { _, ok := a.(core.TypingNotifier); return ok }
