package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
	"github.com/parley-chat/parley/store/bolt"
)

// TestBackupUnderLoad: while clients post messages to a running parley
// without pause, the operator runs the parley command: `parley backup`
// (which, finding the database locked, asks the daemon for its copy),
// then `parley restore` of that file into another data directory, and
// `parley doctor` there, whose check reads every page. The restored
// database passes, and holds every message whose POST was answered
// before the backup began. `parley restore` into the running parley's
// data directory is refused.
func TestBackupUnderLoad(t *testing.T) {
	t.Parallel()
	const token = "backup-e2e-token"
	cfg := testConfig(t)
	cfg.HTTP.Token = token
	run := runMain(t, cfg)
	defer func() {
		if err := run.stop(); err != nil {
			t.Error(err)
		}
	}()
	base := "http://" + run.addr

	var (
		mu    sync.Mutex
		acked []core.MessageID
	)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			client := &http.Client{}
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf(`{"text":"writer %d message %d: %s"}`, w, i, strings.Repeat("words ", 50))
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/chat", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := client.Do(req)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				var p struct {
					ID core.MessageID `json:"id"`
				}
				err = json.NewDecoder(resp.Body).Decode(&p)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || err != nil || p.ID == "" {
					errs <- fmt.Errorf("POST /api/chat: %s, %v", resp.Status, err)
					return
				}
				mu.Lock()
				acked = append(acked, p.ID)
				mu.Unlock()
			}
		})
	}
	deadline := time.After(60 * time.Second)
	for count() < 300 {
		select {
		case err := <-errs:
			t.Fatal(err)
		case <-deadline:
			t.Fatalf("only %d messages posted in a minute", count())
		case <-time.After(5 * time.Millisecond):
		}
	}
	mu.Lock()
	before := append([]core.MessageID(nil), acked...)
	mu.Unlock()

	env := []string{"HOME=" + t.TempDir()}
	file := filepath.Join(t.TempDir(), "parley-backup.db")
	exit, out := runParley(t, env, "backup", file, "--data-dir", cfg.DataDir, "--url", base, "--token", token)
	during := count() - len(before)
	stop()
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if exit != exitOK || !strings.Contains(out, "from the parley running at "+base) {
		t.Fatalf("parley backup: exit %d\n%s", exit, out)
	}
	t.Logf("%s(%d messages acknowledged before the backup, %d while it ran)", out, len(before), during)

	exit, out = runParley(t, env, "restore", file, "--data-dir", cfg.DataDir)
	if exit != exitFailed || !strings.Contains(out, "a parley is running on "+cfg.DataDir) {
		t.Errorf("parley restore into the running parley's directory: exit %d\n%s", exit, out)
	}

	restored := t.TempDir()
	if exit, out = runParley(t, env, "restore", file, "--data-dir", restored); exit != exitOK {
		t.Fatalf("parley restore: exit %d\n%s", exit, out)
	}
	exit, out = runParley(t, env, "doctor", "--data-dir", restored, "--listen", "127.0.0.1:0")
	if exit != exitOK || !strings.Contains(out, "its database opens and is sound") {
		t.Fatalf("parley doctor of the restored data directory: exit %d\n%s", exit, out)
	}

	st, err := bolt.Open(filepath.Join(restored, daemon.DBFile), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	have := map[core.MessageID]bool{}
	if err := st.Export(context.Background(), store.KindMessages, func(r store.Record) error {
		have[r.Message.ID] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var missing bytes.Buffer
	n := 0
	for _, id := range before {
		if !have[id] {
			if n++; n <= 5 {
				fmt.Fprintf(&missing, " %s", id)
			}
		}
	}
	if n > 0 {
		t.Fatalf("%d of the %d messages acknowledged before the backup are not in it:%s…", n, len(before), missing.String())
	}
}
