package daemon_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/files"
)

// postFile copies content into the daemon's store of files and posts it as
// the agent's tool does: copy, append, release.
func (h *harness) postFile(id core.SessionID, name, content string) core.Attachment {
	h.t.Helper()
	a, err := h.d.Files.Put(context.Background(), name, "text/plain", strings.NewReader(content), 1<<20)
	if err != nil {
		h.t.Fatal(err)
	}
	h.do(core.Command{Kind: core.AssistantPost, Origin: core.OriginMCP, Session: id, Text: "here: " + name, Attachments: []core.Attachment{a}})
	h.d.Files.Release(a)
	return a
}

// delivered is the content of the documents the fake platform got at place.
func delivered(h *harness, place core.Place) []string {
	var out []string
	for _, op := range opsAt(h.fk.Ops(), place, "file") {
		if op.Err == nil {
			out = append(out, op.File)
		}
	}
	return out
}

// The copies of files go by the daemon's pruning, on a fake clock: one
// whose message was never appended (the daemon killed between the copy and
// the append) once it is files.Fresh-old; one delivered once its message
// is past the retention; one not yet delivered (its platform down) not
// before its delivery, however old its message.
func TestFileCopiesPruned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const retention = 3 * time.Hour
		h := newBubbleHarness(t, telegramLike(), func(o *daemon.Options) { o.Retention = retention })
		ctx := context.Background()
		id := h.newSession("files")
		has := func(a core.Attachment) bool {
			_, err := os.Stat(a.Path)
			return err == nil
		}

		sent := h.postFile(id, "sent.txt", "delivered at once")
		place := h.place(id)
		h.drain()
		if got := delivered(h, place); len(got) != 1 || got[0] != "delivered at once" {
			t.Fatalf("documents %q", got)
		}
		orphan, err := h.d.Files.Put(ctx, "orphan.txt", "text/plain", strings.NewReader("never appended"), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		h.crash()
		h.start()
		synctest.Wait() // the platform up again, before it goes down
		h.d.Outbox.Hold("fake", true)
		waiting := h.postFile(id, "waiting.txt", "its platform is down")
		synctest.Wait()

		h.d.PruneOnce(ctx)
		if !has(sent) || !has(orphan) || !has(waiting) {
			t.Fatalf("at once: sent %v orphan %v waiting %v; want all kept", has(sent), has(orphan), has(waiting))
		}
		time.Sleep(files.Fresh + time.Minute)
		h.d.PruneOnce(ctx)
		if !has(sent) || has(orphan) || !has(waiting) {
			t.Errorf("after %s: sent %v orphan %v waiting %v; want the orphan gone", files.Fresh, has(sent), has(orphan), has(waiting))
		}
		time.Sleep(retention)
		h.d.PruneOnce(ctx)
		if has(sent) || !has(waiting) {
			t.Errorf("past the retention: sent %v waiting %v; want the delivered copy gone, the undelivered kept", has(sent), has(waiting))
		}

		h.d.Outbox.Hold("fake", false)
		h.drain()
		if got := delivered(h, place); len(got) != 2 || got[1] != "its platform is down" {
			t.Fatalf("documents %q", got)
		}
		// Delivered now, and its message past the retention already.
		h.d.PruneOnce(ctx)
		if has(waiting) || h.d.Files.Total() != 0 {
			t.Errorf("delivered, its message past the retention: kept %v, %d bytes left", has(waiting), h.d.Files.Total())
		}
	})
}
