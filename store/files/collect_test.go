package files_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
	"github.com/parley-chat/parley/store/files"
)

// post appends an assistant message with attachments and its journaled
// event, as the command service does, and returns the event's seq.
func post(tb testing.TB, st core.Store, session core.SessionID, atts ...core.Attachment) uint64 {
	tb.Helper()
	res, err := st.Append(context.Background(), core.Append{
		Message: core.Message{Session: session, Role: core.RoleAssistant, Origin: core.OriginMCP, Content: "here", Attachments: atts},
		Events:  []core.Event{{Kind: core.EventAssistant, Message: &core.Message{}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return res.Events[0].Seq
}

// Which copies Collect removes, on a fake clock: a copy delivered
// everywhere goes once the message that refers to it is past the
// retention; one still journaled stays whatever its age; one whose message
// was never appended (a crash between the copy and the append, seen
// through a restart of the store) goes once it is Fresh-old; one held by
// a Put not yet released, or put or released while Collect runs, stays.
func TestCollect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := bolt.Open(filepath.Join(t.TempDir(), "parley.db"), bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		sess, _, err := st.CreateSession(ctx, core.Session{ID: core.NewSessionID(time.Now()), Title: "files"})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		s := newStore(t, dir, files.Options{})
		const retention = 30 * 24 * time.Hour
		collect := func() files.Collected {
			t.Helper()
			c, err := s.Collect(ctx, st, time.Now().Add(-retention))
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		has := func(a core.Attachment) bool {
			_, err := os.Stat(a.Path)
			return err == nil
		}

		delivered := put(t, s, "delivered.txt", "delivered everywhere")
		seq := post(t, st, sess.ID, delivered)
		s.Release(delivered)
		if err := st.ConfirmDelivery(ctx, seq, "telegram/file/0", true); err != nil {
			t.Fatal(err)
		}
		pending := put(t, s, "pending.txt", "a platform is down")
		post(t, st, sess.ID, pending)
		s.Release(pending)
		orphan := put(t, s, "orphan.txt", "killed before the append")
		held := put(t, s, "held.txt", "its append is under way")
		// A temporary file a killed Put left, written now.
		if err := os.WriteFile(filepath.Join(dir, ".put-123"), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, ".put-123"), time.Now(), time.Now()); err != nil {
			t.Fatal(err)
		}

		// Within Fresh and the retention, everything stays.
		if c := collect(); c.Files != 0 {
			t.Errorf("removed %d files at once", c.Files)
		}
		// A restart: the process that held orphan is gone.
		s = newStore(t, dir, files.Options{})
		held = put(t, s, "held.txt", "its append is under way")
		time.Sleep(files.Fresh + time.Second)
		c := collect()
		if has(orphan) || !has(delivered) || !has(pending) || !has(held) {
			t.Errorf("after Fresh: orphan %v delivered %v pending %v held %v; want only the orphan gone",
				has(orphan), has(delivered), has(pending), has(held))
		}
		if _, err := os.Stat(filepath.Join(dir, ".put-123")); err == nil {
			t.Error("a killed Put's temporary file was left")
		}
		if c.Files != 2 || c.Bytes != int64(len("killed before the append")+len("half")) {
			t.Errorf("collected %+v", c)
		}

		// Past the retention: the delivered copy goes, the journaled one
		// stays until its delivery is finished.
		time.Sleep(retention)
		collect()
		if has(delivered) || !has(pending) || !has(held) {
			t.Errorf("past the retention: delivered %v pending %v held %v; want the delivered copy gone",
				has(delivered), has(pending), has(held))
		}
		s.Release(held)
		collect()
		if has(held) {
			t.Error("a released copy no message refers to was kept")
		}
		if want := int64(len("a platform is down")); s.Total() != want {
			t.Errorf("total %d, want %d", s.Total(), want)
		}
		if got := names(t, dir); !slices.Equal(got, []string{filepath.Base(pending.Path)}) {
			t.Errorf("directory %q, want the pending copy alone", got)
		}
	})
}

// A copy put again, or released, while Collect reads the store is left for
// the next run: its message may have been appended after Collect read the
// messages.
func TestCollectLeavesWhatChangesMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		s := newStore(t, dir, files.Options{})
		a := put(t, s, "a.txt", "appended late")
		time.Sleep(files.Fresh + time.Second)
		st := &slowStore{Store: nil, during: func() { s.Release(a) }}
		if _, err := s.Collect(ctx, st, time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(a.Path); err != nil {
			t.Error("a copy released while Collect read the store was removed")
		}
		st.during = nil
		if _, err := s.Collect(ctx, st, time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(a.Path); err == nil {
			t.Error("the next run kept a copy nothing refers to")
		}
	})
}

// slowStore is a store with no journal and no messages, which runs during
// while Collect reads its messages.
type slowStore struct {
	core.Store
	during func()
}

func (s *slowStore) Deliveries(context.Context, uint64, int) ([]core.Delivery, error) {
	return nil, nil
}

func (s *slowStore) Inbox(context.Context, core.SessionID, core.MessageID, int) ([]core.Message, error) {
	if s.during != nil {
		s.during()
	}
	return nil, nil
}
