package daemon_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
)

// A platform update's dedup key (and the reservation of the session its
// /new created) recognise a redelivery for exactly the retention, and the
// pruner, running every hour on the fake clock, removes them at the first
// run after it: at +49 h for a retention of 48 h.
func TestPrunerKeepsDedupKeysForTheRetention(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike(), func(o *daemon.Options) {
			o.Retention = 48 * time.Hour
			o.PruneInterval = time.Hour
		})
		ctx := context.Background()
		place := core.Place{Chat: "dm", Thread: "9"}
		newSession := core.Command{Kind: core.CreateSession, Origin: "fake", Place: place, Title: "t",
			Actor: core.Actor{ID: "42"}, PlatformID: "update-1"}
		update := core.Command{Kind: core.SendMessage, Origin: "fake", Place: place, Text: "hello",
			Actor: core.Actor{ID: "42"}, PlatformID: "update-2",
			Ref: core.MessageRef{Adapter: "fake", Place: place, ID: "m2"}}
		deliver := func(cmd core.Command) {
			t.Helper()
			if err := h.fk.Deliver(ctx, cmd); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		deliver(newSession)
		deliver(update)
		key := "fake\x00update-2"
		reservation := commands.ReservationPrefix + "fake\x00update-1"
		kept := func() (dedup, reserved bool) {
			t.Helper()
			_, dedup, err := h.d.Store.Deduped(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			v, err := h.d.Store.Cursor(ctx, reservation)
			if err != nil {
				t.Fatal(err)
			}
			return dedup, v != ""
		}
		if d, r := kept(); !d || !r {
			t.Fatalf("after delivery: dedup key kept %v, reservation kept %v; the test proves nothing", d, r)
		}

		// 48 hours on, the platform redelivers both: recognised, nothing
		// new in the inbox or the sessions.
		time.Sleep(48 * time.Hour)
		synctest.Wait()
		if d, r := kept(); !d || !r {
			t.Fatalf("at the retention: dedup key kept %v, reservation kept %v; want both", d, r)
		}
		deliver(newSession)
		deliver(update)
		msgs, err := h.d.Store.Inbox(ctx, "", "", 0)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("inbox after redelivery within the retention: %d messages, %v; want 1", len(msgs), err)
		}
		if all, err := h.d.Store.Sessions(ctx); err != nil || len(all) != 1 {
			t.Fatalf("sessions after redelivery: %d, %v; want 1", len(all), err)
		}

		// The hourly run after the retention removes both.
		time.Sleep(time.Hour)
		synctest.Wait()
		if d, r := kept(); d || r {
			t.Fatalf("an hour past the retention: dedup key kept %v, reservation kept %v; want both pruned", d, r)
		}
		// The message itself stays.
		if msgs, err := h.d.Store.Inbox(ctx, "", "", 0); err != nil || len(msgs) != 1 {
			t.Fatalf("inbox after pruning: %d messages, %v; want the message kept", len(msgs), err)
		}
	})
}
