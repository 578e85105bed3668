package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
)

// TestMemoryAfterManySessions is a load command, not a test: with
// PARLEY_MEMLOAD_SESSIONS=N set it starts the daemon as `parley serve`
// would (Main, on 127.0.0.1:0 and a fresh data directory), creates N
// sessions through the HTTP API with one message each (POST /api/chat, eight
// clients at once), forces a garbage collection, returns freed memory to
// the system and reports the process's resident memory and Go heap. Then it
// stops the daemon, starts it again on the same data directory and reports
// the same figures, which is what a restart gives back: the two should be
// close, since nothing per session may be held for good (issue 16, item 11).
//
//	PARLEY_MEMLOAD_SESSIONS=100000 go test ./cmd/parley -run '^TestMemoryAfterManySessions$' -v -timeout 1h
//
// PARLEY_MEMLOAD_HEAPPROFILE=FILE also writes a heap profile after the
// sessions were created (go tool pprof -sample_index=inuse_space FILE).
// The figures are of the test process, which holds the HTTP client too (a
// few idle connections). The clients hold back while the outbox has more
// than 64 operations pending, as TestFillDataDir does; with
// PARLEY_MEMLOAD_UNPACED=1 they do not, and the figures after creation
// include the outbox's backlog (waited for at most 5 minutes). With only
// the web page configured there is none: it follows events itself
// (core.Capabilities.FollowsEvents) and gets no operations; before it did,
// 100,000 queued no-op sends of the page took hours to drain.
func TestMemoryAfterManySessions(t *testing.T) {
	s := os.Getenv("PARLEY_MEMLOAD_SESSIONS")
	if s == "" {
		t.Skip("a load command: set PARLEY_MEMLOAD_SESSIONS (100000 for issue 16's figure)")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("PARLEY_MEMLOAD_SESSIONS=%q is not a positive number", s)
	}
	cfg := testConfig(t)

	t.Logf("before: %s", memFigures())
	stop := runMain(t, cfg)
	addr := stop.addr
	paced := os.Getenv("PARLEY_MEMLOAD_UNPACED") == ""
	start := time.Now()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				// As TestFillDataDir: a backlog of tens of
				// thousands of operations would measure that
				// queue, not what is kept for good.
				for paced && stop.m.Daemon().Outbox.Stats().Pending > 64 {
					<-time.After(time.Millisecond)
				}
				body := fmt.Sprintf(`{"text":"Session %d: the build fails on main since this morning, can you look?"}`, i)
				resp, err := client.Post("http://"+addr+"/api/chat", "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				var buf bytes.Buffer
				_, _ = buf.ReadFrom(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("POST /api/chat: %s %s", resp.Status, buf.String())
					return
				}
				if i%20_000 == 0 {
					t.Logf("%d sessions in %s: %s", i, time.Since(start).Round(time.Second), memFigures())
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		_ = stop.stop()
		return
	}
	resp, err := client.Get("http://" + addr + "/api/sessions?limit=1")
	if err == nil {
		var list struct {
			Sessions []json.RawMessage `json:"sessions"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
	}
	client.CloseIdleConnections()
	t.Logf("%d sessions created through POST /api/chat in %s", n, time.Since(start).Round(time.Second))
	// What the daemon still has to do (the web adapter's sends) is not
	// what is measured: wait until it is done.
	for deadline := time.Now().Add(5 * time.Minute); ; {
		st := stop.m.Daemon().Outbox.Stats()
		if st.Pending == 0 && st.InFlight == 0 && stop.m.Daemon().Dispatcher.Delivering() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Logf("the outbox did not drain in 5 minutes: %d pending, %d deliveries", st.Pending, stop.m.Daemon().Dispatcher.Delivering())
			break
		}
		time.Sleep(100 * time.Millisecond) // polling a daemon at work, not synchronising a test
	}
	t.Logf("waited for the outbox until %s", time.Since(start).Round(time.Second))
	t.Logf("after creating them: %s", memFigures())
	if path := os.Getenv("PARLEY_MEMLOAD_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := stop.stop(); err != nil {
		t.Error(err)
	}
	t.Logf("after stopping the daemon: %s", memFigures())

	again := runMain(t, cfg)
	resp, err = http.Get("http://" + again.addr + "/api/sessions?limit=50")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	t.Logf("restarted on the same data: %s", memFigures())
	if err := again.stop(); err != nil {
		t.Error(err)
	}
}

type runningMain struct {
	m    *serve.Main
	addr string
	// stop ends Run and returns Close's error.
	stop func() error
}

// runMain opens and runs a Main on cfg until stop is called.
func runMain(t *testing.T, cfg config.Config) runningMain {
	t.Helper()
	m := &serve.Main{Config: cfg, Platforms: platforms.All()}
	stop := launch(t, m)
	servetest.AwaitStarted(t, m)
	return runningMain{m: m, addr: m.Addr(), stop: stop}
}

// memFigures forces a collection, returns what it freed to the system and
// reports the resident memory (all of it, the process's own, and the mapped
// database file's pages) and the live heap.
func memFigures() string {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	status, _ := os.ReadFile("/proc/self/status")
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("VmRSS %s (RssAnon %s, RssFile %s), heap in use %d MiB, %d goroutines",
		fields["VmRSS"], fields["RssAnon"], fields["RssFile"], ms.HeapInuse>>20, runtime.NumGoroutine())
}
