package bolt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

func TestSchemaTooNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		return b.Put(keySchema, []byte("99"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	_, err = Open(path, Options{NoSync: true})
	if !errors.Is(err, core.ErrSchemaTooNew) {
		t.Fatalf("Open: err = %v, want ErrSchemaTooNew", err)
	}
	t.Logf("Open: %v", err)

	// The refused file is untouched and the lock released.
	db, err = bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketSessions) != nil {
			t.Errorf("Open created buckets in a newer file")
		}
		return nil
	})
}

func TestReopenKeepsSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.SetCursor(context.Background(), "x", "y"); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: err = %v, want ErrClosed", err)
	}
	openAt(t, path, Options{NoSync: true})
}

// TestCloseWhileWriting checks that Close lets every queued write finish:
// each Append either succeeded, and is then in the file, or got ErrClosed.
func TestCloseWhileWriting(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	sess := createSession(t, s, core.Session{})
	var ok atomic.Int64
	started := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				_, err := s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: fmt.Sprint(w, "/", i)}})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				if ok.Add(1) == 100 {
					close(started)
				}
			}
		})
	}
	<-started
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s = openAt(t, path, Options{NoSync: true})
	got, err := s.Inbox(ctx, sess.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != ok.Load() {
		t.Errorf("%d appends succeeded, the inbox holds %d", ok.Load(), len(got))
	}
}
