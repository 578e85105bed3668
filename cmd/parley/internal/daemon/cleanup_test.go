package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
)

// dm is where the person of these tests writes; their first message there
// starts the session, bound to the fake platform at that place.
var dm = core.Place{Chat: "dm", Thread: "cleanup"}

// sessionAt returns the session bound at place on the fake platform.
func (h *harness) sessionAt(place core.Place) core.SessionID {
	h.t.Helper()
	s, err := h.d.Store.SessionAt(context.Background(), "fake", place)
	if err != nil {
		h.t.Fatalf("session at %v: %v", place, err)
	}
	return s.ID
}

// notice sends feedback for the person, as an adapter would.
func (h *harness) notice(id core.SessionID, text string, lt core.Lifetime) {
	h.t.Helper()
	h.do(core.Command{Kind: core.Notice, Origin: "fake", Session: id, Text: text, Lifetime: lt})
}

// ledger returns the ids of the platform messages the session's ledger rows
// point at, oldest first.
func (h *harness) ledger(id core.SessionID) []string {
	h.t.Helper()
	rows, err := h.d.Store.Cleanup(context.Background(), id)
	if err != nil {
		h.t.Fatalf("ledger: %v", err)
	}
	ids := make([]string, 0, len(rows))
	for _, r := range rows {
		ids = append(ids, r.Ref.ID)
	}
	return ids
}

// ledgerIs waits until the session's ledger holds exactly the rows for ids:
// a row is removed by the delete's completion callback, which may run just
// after the outbox went idle (in a bubble, settling it lets it run first).
func (h *harness) ledgerIs(id core.SessionID, ids ...string) {
	h.t.Helper()
	var got []string
	defer func() {
		if !slices.Equal(got, ids) {
			h.t.Logf("ledger holds rows for %v", got)
		}
	}()
	h.eventually(fmt.Sprintf("ledger rows for exactly %v", ids), func() bool {
		got = h.ledger(id)
		return slices.Equal(got, ids)
	})
}

// deleted reports whether the message is gone from the fake platform.
func (h *harness) deleted(msgID string) bool {
	h.t.Helper()
	m, ok := h.fk.Message(msgID)
	if !ok {
		h.t.Fatalf("no message %s on the platform", msgID)
	}
	return m.Deleted
}

// deleteOps returns the delete operations the platform saw for msgID.
func deleteOps(fk *fake.Adapter, msgID string) []fake.Op {
	var out []fake.Op
	for _, op := range fk.Ops() {
		if op.Method == "delete" && op.ID == msgID {
			out = append(out, op)
		}
	}
	return out
}

// only returns the one message of kind shown at place whose text contains
// text, failing the test when there is not exactly one.
func (h *harness) only(place core.Place, kind core.MessageKind, text string) fake.Message {
	h.t.Helper()
	var found []fake.Message
	for _, m := range shown(h.fk, place, kind) {
		if strings.Contains(m.Text, text) {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		h.t.Fatalf("%d %s messages with %q at %v, want 1 (all: %+v)", len(found), kind, text, place, h.fk.Messages(place))
	}
	return found[0]
}

// The cleanup tests run in synctest bubbles: the platform latency some of
// them add to delay a message on its way takes exactly that long on the
// fake clock, and none of them waits in real time.

func TestCleanupNextInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike())
		msg1 := h.say(dm, "msg1")
		id := h.sessionAt(dm)
		h.drain()
		h.ledgerIs(id, msg1.Ref.ID)

		msg2 := h.say(dm, "msg2")
		h.drain()
		if !h.deleted(msg1.Ref.ID) {
			t.Error("msg1 is still on the platform after the person's next input")
		}
		if h.deleted(msg2.Ref.ID) {
			t.Error("msg2 was deleted by its own arrival")
		}
		h.ledgerIs(id, msg2.Ref.ID)
	})
}

func TestCleanupNextNotice(t *testing.T) {
	t.Run("the next notice deletes the previous one", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newBubbleHarness(t, telegramLike())
			msg := h.say(dm, "voice message")
			id := h.sessionAt(dm)
			h.notice(id, "🎤 Transcribing…", "")
			h.drain()
			first := h.only(dm, core.KindNotice, "Transcribing")
			h.notice(id, "📎 Received file", "")
			h.drain()
			if !h.deleted(first.ID) {
				t.Error("the first notice is still shown after the second")
			}
			second := h.only(dm, core.KindNotice, "Received file")
			h.ledgerIs(id, msg.Ref.ID, second.ID)
		})
	})
	t.Run("output streaming deletes the notice", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newBubbleHarness(t, telegramLike())
			msg := h.say(dm, "voice message")
			id := h.sessionAt(dm)
			h.notice(id, "🎤 Transcribing…", "")
			h.drain()
			n := h.only(dm, core.KindNotice, "Transcribing")
			h.output(id, "thinking…")
			h.drain()
			if !h.deleted(n.ID) {
				t.Error("the notice is still shown after output streaming started")
			}
			out := h.only(dm, core.KindOutput, "thinking")
			if h.deleted(out.ID) {
				t.Error("the output message was deleted")
			}
			h.ledgerIs(id, msg.Ref.ID)
		})
	})
	t.Run("output streaming right after the notice deletes it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The agent starts streaming before the notice reached the
			// platform, here slowed down by network latency: the notice's row
			// is only recorded once it was sent, after the output event went
			// through the ledger, so the rule must be applied to it late.
			h := newBubbleHarness(t, telegramLike())
			h.fk.Latency = 50 * time.Millisecond // before the first platform call
			h.say(dm, "voice message")
			id := h.sessionAt(dm)
			h.notice(id, "🎤 Transcribing…", "")
			h.output(id, "thinking…")
			h.drain()
			var notices []string
			for _, m := range shown(h.fk, dm, core.KindNotice) {
				notices = append(notices, m.Text)
			}
			if len(notices) > 0 {
				t.Errorf("notices %q still shown after output streaming started", notices)
			}
		})
	})
}

func TestCleanupTurnComplete(t *testing.T) {
	t.Run("deleted when the turn completes, not before", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newBubbleHarness(t, telegramLike())
			h.say(dm, "run the tests")
			id := h.sessionAt(dm)
			h.notice(id, "⏳ Running tests…", core.LifetimeTurnComplete)
			h.drain()
			progress := h.only(dm, core.KindNotice, "Running tests")

			// Neither the person's next input nor the next notice touch it.
			h.say(dm, "and the linters too")
			h.notice(id, "📎 Received file", "")
			h.drain()
			if h.deleted(progress.ID) {
				t.Fatal("the progress message was deleted before the turn completed")
			}

			h.output(id, "all green")
			h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
			h.drain()
			if !h.deleted(progress.ID) {
				t.Error("the progress message is still shown after the turn completed")
			}
			h.eventually("the progress message's row removed", func() bool {
				return !slices.Contains(h.ledger(id), progress.ID)
			})
		})
	})
	t.Run("progress sent right before the turn completes is deleted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The yield goes through the ledger while the progress message is
			// still on its way (see the notice case above).
			h := newBubbleHarness(t, telegramLike())
			h.fk.Latency = 50 * time.Millisecond // before the first platform call
			h.say(dm, "run the tests")
			id := h.sessionAt(dm)
			h.notice(id, "⏳ Running tests…", core.LifetimeTurnComplete)
			h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
			h.drain()
			if got := shown(h.fk, dm, core.KindNotice); len(got) > 0 {
				t.Errorf("progress messages %+v still shown after the turn completed", got)
			}
		})
	})
}

func TestCleanupManualMessagesStay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike())
		h.say(dm, "hello")
		id := h.sessionAt(dm)
		h.do(core.Command{Kind: core.AssistantPost, Origin: core.OriginMCP, Session: id, Text: "here is the plan"})
		h.output(id, "step 1 done")
		h.drain()
		assistant := h.only(dm, core.KindAssistant, "here is the plan")
		output := h.only(dm, core.KindOutput, "step 1 done")

		// Everything that fires a rule: input, notices, output, turn completion.
		h.say(dm, "go on")
		h.notice(id, "📎 Received file", "")
		h.notice(id, "⏳ Working…", core.LifetimeTurnComplete)
		h.output(id, "step 2 done")
		h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
		h.drain()
		h.say(dm, "thanks")
		h.notice(id, "🎤 Transcribing…", "")
		h.drain()

		for _, m := range []fake.Message{assistant, output} {
			if h.deleted(m.ID) {
				t.Errorf("%s message %s was deleted", m.Kind, m.ID)
			}
			if ops := deleteOps(h.fk, m.ID); len(ops) > 0 {
				t.Errorf("%d delete operations for the %s message", len(ops), m.Kind)
			}
			if slices.Contains(h.ledger(id), m.ID) {
				t.Errorf("the %s message has a ledger row", m.Kind)
			}
		}
	})
}

func TestCleanupTurnDoneDeletedAtNextInput(t *testing.T) {
	t.Run("deleted at the next input", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newBubbleHarness(t, telegramLike())
			h.say(dm, "what is 6×7?")
			id := h.sessionAt(dm)
			h.output(id, "42")
			h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
			h.drain()
			done := h.only(dm, core.KindTurnDone, "Done")
			if !slices.Contains(h.ledger(id), done.ID) {
				t.Fatalf("no ledger row for the turn-completion message (rows %v)", h.ledger(id))
			}

			msg2 := h.say(dm, "thanks")
			h.drain()
			if !h.deleted(done.ID) {
				t.Error("the turn-completion message is still shown after the person's next input")
			}
			if out := h.only(dm, core.KindOutput, "42"); h.deleted(out.ID) {
				t.Error("the output message was deleted")
			}
			h.ledgerIs(id, msg2.Ref.ID)
		})
	})
	t.Run("on its way when the person writes again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The person writes right after the turn completed, before "✅ Done"
			// reached the platform (slowed down by latency here). Left alone,
			// it would show up under their new message, saying "done" while
			// the agent works on it, until yet another input.
			h := newBubbleHarness(t, telegramLike())
			h.fk.Latency = 50 * time.Millisecond // before the first platform call
			h.say(dm, "what is 6×7?")
			id := h.sessionAt(dm)
			h.output(id, "42")
			h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
			h.say(dm, "and 6×8?")
			h.drain()
			if got := shown(h.fk, dm, core.KindTurnDone); len(got) > 0 {
				t.Errorf("turn-completion messages %+v still shown after the person's next input", got)
			}
		})
	})
}

// A rule fired and its rows were marked due, then the daemon died before
// the platform call: the next start deletes the messages and drops the rows,
// and leaves rows that were not due alone.
func TestCleanupReplayedAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike())
		msg1 := h.say(dm, "msg1")
		id := h.sessionAt(dm)
		h.notice(id, "📎 Received file", "")
		h.drain()
		n := h.only(dm, core.KindNotice, "Received file")
		h.ledgerIs(id, msg1.Ref.ID, n.ID)

		h.shutdown()
		st, err := bolt.Open(filepath.Join(h.dir, daemon.DBFile), bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		rows, err := st.Cleanup(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Ref.ID == msg1.Ref.ID {
				r.Due = true
				if err := st.AddCleanup(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if h.deleted(msg1.Ref.ID) {
			t.Fatal("msg1 deleted before the restart")
		}

		h.start()
		h.drain()
		if !h.deleted(msg1.Ref.ID) {
			t.Error("the due deletion was not replayed at start-up")
		}
		if h.deleted(n.ID) {
			t.Error("a notice whose rule had not fired was deleted at start-up")
		}
		h.ledgerIs(id, n.ID)
	})
}

func TestCleanupVanishedMessageClearsRow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike())
		msg1 := h.say(dm, "msg1")
		id := h.sessionAt(dm)
		h.drain()
		h.fk.Vanish(msg1.Ref.ID) // the person deleted it themselves
		msg2 := h.say(dm, "msg2")
		h.drain()
		ops := deleteOps(h.fk, msg1.Ref.ID)
		if len(ops) != 1 || !errors.Is(ops[0].Err, core.ErrMessageGone) {
			t.Errorf("delete operations for msg1: %+v, want one answered with ErrMessageGone", ops)
		}
		if f := h.d.Outbox.Stats().Failed["fake"]; f != 0 {
			t.Errorf("outbox counts %d failed operations, want none: a gone message is deleted", f)
		}
		h.ledgerIs(id, msg2.Ref.ID)
	})
}

// A deletion the platform refuses for good (too old, no right) clears its
// row: it is not retried, at once or at the next start.
func TestCleanupPermanentRefusalClearsRow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike())
		msg1 := h.say(dm, "msg1")
		id := h.sessionAt(dm)
		h.drain()
		h.fk.FailNext("delete", core.Permanent(errors.New("message can't be deleted")))
		msg2 := h.say(dm, "msg2")
		h.drain()
		h.ledgerIs(id, msg2.Ref.ID)
		h.restart()
		h.drain()
		var refusedDeletes int
		for _, op := range h.fk.Ops() {
			if op.Method == "delete" && core.IsPermanent(op.Err) {
				refusedDeletes++
			}
		}
		if ops := deleteOps(h.fk, msg1.Ref.ID); len(ops) != 0 || refusedDeletes != 1 {
			t.Errorf("%d refused deletes and %+v for msg1, want the one refusal, never retried", refusedDeletes, ops)
		}
		if m, _ := h.fk.Message(msg1.Ref.ID); m.Deleted {
			t.Error("msg1 was deleted after all")
		}
	})
}

// Where the platform cannot delete people's messages the rule is skipped,
// not faked; parley's own messages are still tidied up.
func TestCleanupSkippedWithoutDeleteOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		caps := telegramLike()
		caps.DeleteOthers = false
		h := newBubbleHarness(t, caps)
		msg1 := h.say(dm, "msg1")
		id := h.sessionAt(dm)
		h.output(id, "answer")
		h.do(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
		h.drain()
		done := h.only(dm, core.KindTurnDone, "Done")

		msg2 := h.say(dm, "msg2")
		h.drain()
		if h.deleted(msg1.Ref.ID) {
			t.Error("msg1 was deleted although the platform cannot delete people's messages")
		}
		if ops := deleteOps(h.fk, msg1.Ref.ID); len(ops) > 0 {
			t.Errorf("%d delete operations attempted for msg1, want none", len(ops))
		}
		if !h.deleted(done.ID) {
			t.Error("parley's own turn-completion message was not deleted")
		}
		h.ledgerIs(id, msg2.Ref.ID)
	})
}

func TestCleanupDisabledLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike(), func(o *daemon.Options) {
			o.DisabledCleanup = map[core.Lifetime]bool{core.LifetimeNextInput: true}
		})
		msg1 := h.say(dm, "msg1")
		id := h.sessionAt(dm)
		h.notice(id, "🎤 Transcribing…", "")
		h.drain()
		n := h.only(dm, core.KindNotice, "Transcribing")
		h.say(dm, "msg2")
		h.notice(id, "📎 Received file", "")
		h.drain()
		if h.deleted(msg1.Ref.ID) {
			t.Error("msg1 was deleted although next_input cleanup is disabled")
		}
		if ops := deleteOps(h.fk, msg1.Ref.ID); len(ops) > 0 {
			t.Errorf("%d delete operations attempted for msg1, want none", len(ops))
		}
		if slices.Contains(h.ledger(id), msg1.Ref.ID) {
			t.Error("msg1's row is kept although its rule fired and is disabled")
		}
		if !h.deleted(n.ID) {
			t.Error("a notice was not deleted: only next_input is disabled")
		}
	})
}
