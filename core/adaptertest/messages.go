package adaptertest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// sample is markdown every platform can show; its words survive rendering.
const sample = "Hello from the **conformance** suite, with `inline code` and _emphasis_."

// checkSend: a send returns a usable reference, distinct from the next
// one's, and the platform shows the text.
func checkSend(t *testing.T, e *env) {
	place := e.place(t)
	first := e.send(t, place, sample)
	second := e.send(t, place, "A second message follows the first")
	if first.ID == second.ID {
		t.Fatalf("two sends returned the same message id %q", first.ID)
	}
	if ok, reason := e.need(t, HookShown); !ok {
		t.Skipf("the references are usable; what the platform shows cannot be checked: %s", reason)
	}
	for _, c := range []struct {
		ref  core.MessageRef
		text string
	}{{first, sample}, {second, "A second message follows the first"}} {
		m, ok := e.shown(place, c.ref.ID)
		if !ok {
			t.Errorf("the platform does not show message %q at %+v: it shows %+v", c.ref.ID, place, e.Shown(place))
			continue
		}
		if miss := missing(m.Text, c.text); len(miss) > 0 {
			t.Errorf("message %q shows %q, missing the words %q of %q", c.ref.ID, m.Text, miss, c.text)
		}
	}
}

// checkEdit: an edit changes what the message shows, and an edit with
// identical content is success (nil or core.ErrNotModified) that changes
// nothing.
func checkEdit(t *testing.T, e *env) {
	ed, ok := e.Adapter.(core.Editor)
	if !ok {
		t.Skip("the adapter is not a core.Editor")
	}
	place := e.place(t)
	const alpha, beta = "Version alpha of the message", "Version **beta** of the message"
	ref := e.send(t, place, alpha)
	count := -1
	if e.Shown != nil {
		count = len(e.Shown(place))
	}
	if err := ed.Edit(ctx(t), ref, core.OutMessage{Kind: core.KindAssistant, Text: alpha}); err != nil && !errors.Is(err, core.ErrNotModified) {
		t.Errorf("Edit with the content just sent: %v, want nil or core.ErrNotModified", err)
	}
	if err := ed.Edit(ctx(t), ref, core.OutMessage{Kind: core.KindAssistant, Text: beta}); err != nil {
		t.Fatalf("Edit to new content: %v", err)
	}
	if err := ed.Edit(ctx(t), ref, core.OutMessage{Kind: core.KindAssistant, Text: beta}); err != nil && !errors.Is(err, core.ErrNotModified) {
		t.Errorf("Edit with identical content: %v, want nil or core.ErrNotModified (both are success)", err)
	}
	if ok, reason := e.need(t, HookShown); !ok {
		t.Skipf("the edits succeed; what the platform shows cannot be checked: %s", reason)
	}
	m, ok := e.shown(place, ref.ID)
	if !ok {
		t.Fatalf("the edited message %q is not shown at %+v", ref.ID, place)
	}
	if miss := missing(m.Text, beta); len(miss) > 0 || strings.Contains(m.Text, "alpha") {
		t.Errorf("the edited message shows %q, want the words of %q and no \"alpha\"", m.Text, beta)
	}
	if n := len(e.Shown(place)); n != count {
		t.Errorf("the place shows %d messages after editing one, %d before: %+v", n, count, e.Shown(place))
	}
}

// checkOutputGrows: a session's output message, edited in place while the
// agent streams — first growing, then rewritten — stays one message that
// shows the latest text. Adapters may carry it by other platform means
// than edits (Slack's streaming methods); people see the same.
func checkOutputGrows(t *testing.T, e *env) {
	ed, ok := e.Adapter.(core.Editor)
	if !ok {
		t.Skip("the adapter is not a core.Editor")
	}
	place := e.place(t)
	steps := []string{
		"Step one of the output",
		"Step one of the output, then step two",
		"Step one of the output, then step two, then step **three**",
		"A rewritten output, in other words",
	}
	ref, err := e.Adapter.Send(ctx(t), place, core.OutMessage{Kind: core.KindOutput, Text: steps[0]})
	if err != nil {
		t.Fatalf("Send of an output message: %v", err)
	}
	count := -1
	if e.Shown != nil {
		count = len(e.Shown(place))
	}
	for _, text := range steps[1:] {
		if err := ed.Edit(ctx(t), ref, core.OutMessage{Kind: core.KindOutput, Text: text}); err != nil {
			t.Fatalf("Edit of the output message to %q: %v", text, err)
		}
	}
	if ok, reason := e.need(t, HookShown); !ok {
		t.Skipf("the edits succeed; what the platform shows cannot be checked: %s", reason)
	}
	m, ok := e.shown(place, ref.ID)
	if !ok {
		t.Fatalf("the output message %q is not shown at %+v: it shows %+v", ref.ID, place, e.Shown(place))
	}
	last := steps[len(steps)-1]
	if miss := missing(m.Text, last); len(miss) > 0 || strings.Contains(m.Text, "Step") {
		t.Errorf("the output message shows %q, want the words of %q and nothing of the earlier steps", m.Text, last)
	}
	if n := len(e.Shown(place)); n != count {
		t.Errorf("the place shows %d messages after the output was edited, %d before: %+v", n, count, e.Shown(place))
	}
}

// checkEditGone: editing a message deleted behind the adapter's back is
// core.ErrMessageGone, so the output lifecycle sends a new one.
func checkEditGone(t *testing.T, e *env) {
	ed, ok := e.Adapter.(core.Editor)
	if !ok {
		t.Skip("the adapter is not a core.Editor")
	}
	e.require(t, HookVanish)
	ref := e.send(t, e.place(t), "This message will vanish")
	e.Vanish(ref)
	err := ed.Edit(ctx(t), ref, core.OutMessage{Kind: core.KindAssistant, Text: "Too late to edit"})
	if !errors.Is(err, core.ErrMessageGone) {
		t.Errorf("Edit of a vanished message: %v, want core.ErrMessageGone", err)
	}
}

// checkButtons: with Capabilities.Buttons, a question's options are shown
// as buttons, with Data as long as core makes it (48 bytes), and an edit
// that keeps them keeps them shown.
func checkButtons(t *testing.T, e *env) {
	if !e.Adapter.Capabilities().Buttons {
		t.Skip("Capabilities.Buttons is false: core shows options as a numbered list")
	}
	qid := strings.Repeat("Q", 46)
	buttons := []core.Button{{Label: "Yes, go ahead", Data: delivery.ButtonData(qid, 1)}, {Label: "No", Data: delivery.ButtonData(qid, 2)}}
	if len(buttons[0].Data) != 48 {
		t.Fatalf("adaptertest: button data of %d bytes, want 48", len(buttons[0].Data))
	}
	place := e.place(t)
	m := core.OutMessage{Kind: core.KindQuestion, Text: "Shall the suite go on?", Buttons: buttons}
	ref, err := e.Adapter.Send(ctx(t), place, m)
	if err != nil {
		t.Fatalf("Send with buttons: %v", err)
	}
	ok, reason := e.need(t, HookShown)
	shows := func(what string) {
		t.Helper()
		if !ok {
			return
		}
		got, shown := e.shown(place, ref.ID)
		if !shown || strings.Join(got.Buttons, "|") != "Yes, go ahead|No" {
			t.Errorf("%s: the platform shows %+v, want the buttons %q and %q", what, got, buttons[0].Label, buttons[1].Label)
		}
	}
	shows("after Send")
	if ed, isEditor := e.Adapter.(core.Editor); isEditor {
		m.Text = "Shall the suite go on? (asked again)"
		if err := ed.Edit(ctx(t), ref, m); err != nil {
			t.Fatalf("Edit keeping the buttons: %v", err)
		}
		shows("after an Edit keeping them")
	}
	if !ok {
		t.Skipf("the buttons are accepted; whether they are shown cannot be checked: %s", reason)
	}
}

// checkDelete: a delete removes the message; deleting it again, or deleting
// one that vanished, is core.ErrMessageGone (which clears its row in the
// cleanup ledger).
func checkDelete(t *testing.T, e *env) {
	del, ok := e.Adapter.(core.Deleter)
	if !ok {
		t.Skip("the adapter is not a core.Deleter")
	}
	place := e.place(t)
	ref := e.send(t, place, "This message will be deleted")
	if err := del.Delete(ctx(t), ref); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if ok, reason := e.need(t, HookShown); !ok {
		t.Skipf("the delete succeeds; whether the message is gone cannot be checked: %s", reason)
	}
	if m, ok := e.shown(place, ref.ID); ok {
		t.Errorf("the deleted message is still shown: %+v", m)
	}
	if err := del.Delete(ctx(t), ref); !errors.Is(err, core.ErrMessageGone) {
		t.Errorf("second Delete of a message: %v, want core.ErrMessageGone", err)
	}
	e.require(t, HookVanish)
	gone := e.send(t, place, "This message will vanish before its delete")
	e.Vanish(gone)
	if err := del.Delete(ctx(t), gone); !errors.Is(err, core.ErrMessageGone) {
		t.Errorf("Delete of a vanished message: %v, want core.ErrMessageGone", err)
	}
}

// checkDeleteOthers: deleting a person's message works when the adapter
// declares DeleteOthers, and fails for good when it does not (the cleanup
// rules for people's messages are then skipped, not retried forever).
func checkDeleteOthers(t *testing.T, e *env) {
	del, ok := e.Adapter.(core.Deleter)
	if !ok {
		t.Skip("the adapter is not a core.Deleter")
	}
	e.require(t, HookInjectPersonMessage)
	e.require(t, HookShown)
	place := e.place(t)
	ref := e.InjectPersonMessage(place, "A person wrote this")
	if _, ok := e.shown(place, ref.ID); !ok {
		t.Fatalf("adaptertest: InjectPersonMessage returned %+v, which the platform does not show", ref)
	}
	err := del.Delete(ctx(t), ref)
	_, still := e.shown(place, ref.ID)
	if e.Adapter.Capabilities().DeleteOthers {
		if err != nil || still {
			t.Errorf("Delete of a person's message with DeleteOthers declared: err %v, still shown %v; want it deleted", err, still)
		}
		return
	}
	if err == nil || !core.IsPermanent(err) || !still {
		t.Errorf("Delete of a person's message without DeleteOthers: err %v (permanent %v), still shown %v; want a permanent error and the message kept",
			err, core.IsPermanent(err), still)
	}
}

// checkLength: a message of exactly MaxLength, measured as the adapter
// measures, is accepted and shown whole; one twice as long is either
// refused for good or delivered whole in several messages.
func checkLength(t *testing.T, e *env) {
	if e.Adapter.Capabilities().MaxLength <= 0 {
		t.Skip("Capabilities.MaxLength is 0: the platform has no length limit")
	}
	place := e.place(t)
	// Some adapters learn what their platform supports (and so their
	// limit) from its first answer.
	e.send(t, place, "A short message first")
	c := e.Adapter.Capabilities()
	exact, n := textOfLength(e.Adapter, c.MaxLength, "w")
	if n != c.MaxLength {
		t.Logf("no text renders to exactly MaxLength %d; using %d", c.MaxLength, n)
	}
	ref := e.send(t, place, exact)
	shows := func() string {
		var all []string
		for _, m := range e.Shown(place) {
			all = append(all, m.Text)
		}
		return strings.Join(all, "\n")
	}
	haveShown, reason := e.need(t, HookShown)
	if haveShown {
		if m, ok := e.shown(place, ref.ID); !ok || len(missing(m.Text, exact)) > 0 {
			t.Errorf("a message of MaxLength %d is not shown whole (missing %q)", c.MaxLength, missing(m.Text, exact))
		}
	}
	if ed, ok := e.Adapter.(core.Editor); ok {
		// The live output message is edited up to MaxLength too.
		other, _ := textOfLength(e.Adapter, n, "v")
		if err := ed.Edit(ctx(t), ref, core.OutMessage{Kind: core.KindOutput, Text: other}); err != nil {
			t.Errorf("Edit to a text of MaxLength %d: %v", c.MaxLength, err)
		} else if haveShown {
			if m, ok := e.shown(place, ref.ID); !ok || len(missing(m.Text, other)) > 0 {
				t.Errorf("a message edited to MaxLength %d is not shown whole", c.MaxLength)
			}
		}
	}
	over, _ := textOfLength(e.Adapter, 2*c.MaxLength+16, "o")
	_, err := e.Adapter.Send(ctx(t), place, core.OutMessage{Kind: core.KindAssistant, Text: over})
	switch {
	case err != nil && !core.IsPermanent(err):
		t.Errorf("a message twice MaxLength was refused with %v, which is not permanent: the outbox would retry it forever", err)
	case err != nil:
		t.Logf("a message twice MaxLength is refused: %v", err)
	case !haveShown:
		t.Skipf("a message twice MaxLength is accepted; whether it is shown whole cannot be checked: %s", reason)
	default:
		if miss := missing(shows(), over); len(miss) > 0 {
			t.Errorf("a message twice MaxLength was accepted but %d of its words are not shown (first %q): it must be refused or split, not cut",
				len(miss), miss[0])
		}
	}
}

// textOfLength returns plain text (words numbered after prefix, with
// accented letters and emoji so that the unit of length matters) of length
// n as a measures it once rendered, or the nearest length below it it could
// make.
func textOfLength(a core.Adapter, n int, prefix string) (string, int) {
	measure := func(s string) int {
		if m, ok := a.(core.Measurer); ok {
			return m.RenderedLength(s)
		}
		return delivery.Measure(s, a.Capabilities().LengthUnit)
	}
	unit := a.Capabilities().LengthUnit
	build := func(raw int) string {
		var b strings.Builder
		size := 0
		for i := 1; ; i++ {
			tok := fmt.Sprintf(" %s%dé😀", prefix, i)
			if i == 1 {
				tok = tok[1:]
			}
			m := delivery.Measure(tok, unit)
			if size+m > raw {
				break
			}
			b.WriteString(tok)
			size += m
		}
		for ; size < raw; size++ {
			b.WriteByte('x')
		}
		return b.String()
	}
	best, bestLen := "", -1
	raw := n
	for range 8 {
		s := build(raw)
		got := measure(s)
		if got <= n && got > bestLen {
			best, bestLen = s, got
		}
		if got == n {
			break
		}
		raw += n - got
		if raw <= 0 {
			break
		}
	}
	return best, bestLen
}
