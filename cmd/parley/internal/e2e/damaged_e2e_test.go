package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
)

// TestDamageWhileServingIsAnErrorPerRequest: the database file is cut
// short under a running parley (a failing disk, another program). The
// requests that need the lost pages get an error answer, not a dropped
// connection, the daemon keeps answering what needs no store, and it stops
// cleanly. Without the store's guard, bbolt's read of a page past the end
// of the file kills the process with SIGBUS.
func TestDamageWhileServingIsAnErrorPerRequest(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	run := runMain(t, cfg)
	stopped := false
	defer func() {
		if !stopped {
			_ = run.stop()
		}
	}()
	base := "http://" + run.addr
	for i := range 200 {
		resp, err := http.Post(base+"/api/chat", "application/json",
			strings.NewReader(fmt.Sprintf(`{"text":"message %d: %s"}`, i, strings.Repeat("words ", 100))))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /api/chat: %s", resp.Status)
		}
	}
	if err := os.Truncate(filepath.Join(cfg.DataDir, daemon.DBFile), 2*4096); err != nil {
		t.Fatal(err)
	}
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/api/sessions?limit=500", ""},
		{"POST", "/api/chat", `{"text":"still there?"}`},
		{"GET", "/api/sessions?limit=500", ""},
	} {
		r, _ := http.NewRequest(req.method, base+req.path, strings.NewReader(req.body))
		if req.body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatalf("%s %s: %v (the connection was dropped)", req.method, req.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var answer struct {
			Error string `json:"error"`
		}
		if resp.StatusCode != http.StatusInternalServerError || json.Unmarshal(body, &answer) != nil || answer.Error == "" {
			t.Errorf("%s %s: %s %s, want a 500 with an error", req.method, req.path, resp.Status, body)
		}
	}
	resp, err := http.Get(base + "/api/health")
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("health: %s", resp.Status)
	}
	// Close says the file is damaged, and does not wait for bbolt's
	// write lock, which a panic mid-commit may have left held.
	stopped = true
	if err := run.stop(); !errors.Is(err, core.ErrDamaged) {
		t.Errorf("close: %v, want core.ErrDamaged", err)
	}
}
