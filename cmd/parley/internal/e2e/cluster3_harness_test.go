package e2e

// The harness of the three-process cluster test (cluster3_test.go): real
// `parley serve` child processes on one PostgreSQL, and a tap in front of
// the fake Bot API that records, as Telegram sees them, which instance long
// polls when and which updates it was handed and acknowledged.
//
// The children are the parley command itself (parleyBin), started as a
// service manager starts it: `parley serve --data-dir DIR --listen ADDR`
// with the configuration in its environment. Unlike a kill -9, SIGTERM
// stops it gracefully, so that a clean stop can be measured.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/store/postgres"
)

// node is one `parley serve` child process of the cluster.
type node struct {
	n      int // its index in the cluster, for the tap and the figures
	dir    string
	listen string
	env    []string
	cmd    *exec.Cmd
	log    *servetest.Buffer
	exited chan struct{}
}

// startNode starts instance n with its own data directory and listen
// address and the environment env (its configuration); awaitHealthy waits
// until it serves.
func startNode(t *testing.T, n int, env []string) *node {
	t.Helper()
	return runNode(t, n, t.TempDir(), freeAddr(t), env)
}

// restart starts the instance again, after it stopped or was killed, on
// its data directory and listen address, as a service manager would.
func (nd *node) restart(t *testing.T) *node {
	t.Helper()
	return runNode(t, nd.n, nd.dir, nd.listen, nd.env)
}

func runNode(t *testing.T, n int, dir, listen string, env []string) *node {
	t.Helper()
	nd := &node{n: n, dir: dir, listen: listen, env: env, log: &servetest.Buffer{}, exited: make(chan struct{})}
	nd.cmd = exec.Command(parleyBin(t), "serve", "--data-dir", dir, "--listen", listen)
	nd.cmd.Env = append(os.Environ(), env...)
	nd.cmd.Stdout, nd.cmd.Stderr = nd.log, nd.log
	if err := nd.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = nd.cmd.Wait()
		close(nd.exited)
	}()
	t.Cleanup(nd.kill)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("instance %d (pid %d) log, repeated records folded:\n%s", n, nd.cmd.Process.Pid, digest(nd.log.String(), 3))
		}
	})
	return nd
}

// awaitHealthy waits until the instance answers on /api/health.
func (nd *node) awaitHealthy(t *testing.T) {
	t.Helper()
	servetest.PollUntil(t, 30*time.Second, fmt.Sprintf("instance %d to start", nd.n), nd.healthy, func() string {
		if nd.gone() {
			return "it exited: " + tail(nd.log.String(), 40)
		}
		return ""
	})
}

func (nd *node) healthy() bool {
	resp, err := http.Get("http://" + nd.listen + "/api/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (nd *node) gone() bool {
	select {
	case <-nd.exited:
		return true
	default:
		return false
	}
}

// kill stops the instance with SIGKILL: no shutdown, no release of its
// lease or claims.
func (nd *node) kill() {
	if !nd.gone() {
		_ = nd.cmd.Process.Kill()
		<-nd.exited
	}
}

// term asks the instance to stop gracefully (SIGTERM) and waits until it
// has.
func (nd *node) term(t *testing.T) {
	t.Helper()
	_ = nd.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-nd.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("instance %d did not stop within 30 s of SIGTERM", nd.n)
	}
}

// poll is one getUpdates as the Bot API saw it.
type poll struct {
	node       int
	start, end time.Time // end is zero while it is in flight
	offset     int64     // the offset it asked from (confirming what is before)
	code       int       // HTTP status of the answer
	desc       string    // the error's description, if any
	updates    []int64   // the ids of the updates it was handed
}

// tgCall is one other Bot API request as the Bot API saw it.
type tgCall struct {
	node   int
	at     time.Time
	method string
	code   int
}

// tap sits in front of the fake Bot API, one address per instance, and
// records every request by the instance that made it. It models nothing:
// the fake answers every request.
type tap struct {
	srv   *telegramtest.Server
	mu    sync.Mutex
	polls []poll
	calls []tgCall
	// texts holds the text of every message update handed out, by
	// update id (service messages such as a topic's creation have none).
	texts map[int64]string
	// refused instances get Telegram's flood-control answer to every
	// message method; inflight counts each instance's calls under way.
	refused  map[int]bool
	inflight map[int]int
}

func newTap(srv *telegramtest.Server) *tap {
	return &tap{srv: srv, texts: map[int64]string{}, refused: map[int]bool{}, inflight: map[int]int{}}
}

// refuse makes Telegram answer instance n's sends, edits and deletions
// with 429 and retry_after 1, as its flood control does, from now on; its
// long poll goes on.
func (tp *tap) refuse(n int) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.refused[n] = true
}

// openStore opens the cluster's store in the test process, to read what
// the instances wrote; it closes when the test ends.
func openStore(t *testing.T, url string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// allow ends refuse: instance n's calls reach Telegram again.
func (tp *tap) allow(n int) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	delete(tp.refused, n)
}

// idle reports whether no call of instance n other than its long poll is
// under way.
func (tp *tap) idle(n int) bool {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.inflight[n] == 0
}

// messageMethod reports whether a Bot API method shows, changes or removes
// a message (what flood control counts).
func messageMethod(m string) bool {
	return strings.HasPrefix(m, "send") || strings.HasPrefix(m, "edit") || strings.HasPrefix(m, "delete") && m != "deleteWebhook"
}

// url starts the tap's address for instance n; it closes when the test
// ends.
func (tp *tap) url(t *testing.T, n int) string {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.serve(n, w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

func (tp *tap) serve(n int, w http.ResponseWriter, r *http.Request) {
	cw := &captureWriter{ResponseWriter: w, code: http.StatusOK}
	if !strings.HasSuffix(r.URL.Path, "/getUpdates") {
		method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		tp.mu.Lock()
		if tp.refused[n] && messageMethod(method) {
			tp.calls = append(tp.calls, tgCall{node: n, at: time.Now(), method: method, code: http.StatusTooManyRequests})
			tp.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 1","parameters":{"retry_after":1}}`)
			return
		}
		tp.inflight[n]++
		tp.mu.Unlock()
		tp.srv.ServeHTTP(cw, r)
		tp.mu.Lock()
		tp.inflight[n]--
		tp.calls = append(tp.calls, tgCall{node: n, at: time.Now(), method: method, code: cw.code})
		tp.mu.Unlock()
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var params struct {
		Offset int64 `json:"offset"`
	}
	_ = json.Unmarshal(body, &params)
	cw.keep = true
	tp.mu.Lock()
	k := len(tp.polls)
	tp.polls = append(tp.polls, poll{node: n, start: time.Now(), offset: params.Offset})
	tp.mu.Unlock()

	tp.srv.ServeHTTP(cw, r)

	var answer struct {
		Result []struct {
			ID      int64 `json:"update_id"`
			Message *struct {
				Text string `json:"text"`
			} `json:"message"`
		} `json:"result"`
		Description string `json:"description"`
	}
	_ = json.Unmarshal(cw.body.Bytes(), &answer)
	tp.mu.Lock()
	defer tp.mu.Unlock()
	p := &tp.polls[k]
	p.end, p.code, p.desc = time.Now(), cw.code, answer.Description
	for _, u := range answer.Result {
		p.updates = append(p.updates, u.ID)
		if u.Message != nil && u.Message.Text != "" {
			tp.texts[u.ID] = u.Message.Text
		}
	}
}

// captureWriter passes an answer through and keeps its status (and, with
// keep, its body).
type captureWriter struct {
	http.ResponseWriter
	code int
	keep bool
	body bytes.Buffer
}

func (c *captureWriter) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.keep {
		c.body.Write(b)
	}
	return c.ResponseWriter.Write(b)
}

// snapshot returns the polls and calls recorded so far.
func (tp *tap) snapshot() ([]poll, []tgCall) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]poll(nil), tp.polls...), append([]tgCall(nil), tp.calls...)
}

// firstPollAfter returns the first getUpdates after at by an instance other
// than not, and whether there is one.
func (tp *tap) firstPollAfter(at time.Time, not int) (poll, bool) {
	polls, _ := tp.snapshot()
	for _, p := range polls {
		if p.node != not && !p.start.Before(at) {
			return p, true
		}
	}
	return poll{}, false
}

// poller returns the instance whose getUpdates came last, or -1 before the
// first.
func (tp *tap) poller() int {
	polls, _ := tp.snapshot()
	if len(polls) == 0 {
		return -1
	}
	return polls[len(polls)-1].node
}

// overlaps returns every pair of getUpdates from different instances that
// were in flight at the same time, as text; Telegram would have ended one
// of them with 409.
func (tp *tap) overlaps() []string {
	polls, _ := tp.snapshot()
	sort.Slice(polls, func(i, j int) bool { return polls[i].start.Before(polls[j].start) })
	var out []string
	open := []poll{}
	for _, p := range polls {
		still := open[:0]
		for _, o := range open {
			if o.end.IsZero() || o.end.After(p.start) {
				still = append(still, o)
			}
		}
		open = still
		for _, o := range open {
			if o.node != p.node {
				out = append(out, fmt.Sprintf("instance %d polled from %s to %s while instance %d polled from %s (answered %d %s)",
					o.node, o.start.Format("15:04:05.000"), o.end.Format("15:04:05.000"), p.node, p.start.Format("15:04:05.000"), p.code, p.desc))
			}
		}
		open = append(open, p)
	}
	return out
}

// acknowledged returns the text of every message update the Bot API handed
// out and then saw acknowledged (a later getUpdates with an offset past
// it), by update id.
func (tp *tap) acknowledged() map[int64]string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var confirmed int64
	for _, p := range tp.polls {
		confirmed = max(confirmed, p.offset)
	}
	out := map[int64]string{}
	for id, text := range tp.texts {
		if id < confirmed {
			out[id] = text
		}
	}
	return out
}

// repeated counts the updates the Bot API handed out more than once: to a
// poller that did not acknowledge them (killed, or stopped by a lost
// lease) and again to the next; the store's dedup keeps each once.
func (tp *tap) repeated() int {
	polls, _ := tp.snapshot()
	handed := map[int64]int{}
	for _, p := range polls {
		for _, id := range p.updates {
			handed[id]++
		}
	}
	n := 0
	for _, k := range handed {
		if k > 1 {
			n++
		}
	}
	return n
}

// conflicts counts the getUpdates answered with 409, by instance.
func (tp *tap) conflicts() map[int]int {
	polls, _ := tp.snapshot()
	out := map[int]int{}
	for _, p := range polls {
		if p.code == http.StatusConflict {
			out[p.node]++
		}
	}
	return out
}

// methods counts, per instance, the Bot API calls other than getUpdates
// made from since on, by method and answer ("sendMessage 200",
// "deleteMessage 429").
func (tp *tap) methods(since time.Time) map[int]map[string]int {
	_, calls := tp.snapshot()
	out := map[int]map[string]int{}
	for _, c := range calls {
		if c.at.Before(since) {
			continue
		}
		if out[c.node] == nil {
			out[c.node] = map[string]int{}
		}
		out[c.node][fmt.Sprintf("%s %d", c.method, c.code)]++
	}
	return out
}

// spent counts the calls the Bot API accepted in the minute before now
// that count against a group's budget of 20 a minute, as telegramtest's
// Rates say: sends (drafts included), edits, deletions and topic calls
// (one forum is all this test's chats).
func (tp *tap) spent(now time.Time) int {
	_, calls := tp.snapshot()
	c := 0
	for _, call := range calls {
		m := call.method
		counted := strings.HasPrefix(m, "send") && m != "sendChatAction" || strings.HasPrefix(m, "edit") ||
			strings.HasPrefix(m, "delete") && m != "deleteWebhook" || strings.Contains(m, "ForumTopic")
		if counted && call.code == http.StatusOK && now.Sub(call.at) < time.Minute {
			c++
		}
	}
	return c
}

// sent counts the messages an instance had accepted by the Bot API from
// since on.
func (tp *tap) sent(since time.Time, n int) int {
	c := 0
	for m, k := range tp.methods(since)[n] {
		if strings.HasPrefix(m, "send") && !strings.HasPrefix(m, "sendChatAction") && strings.HasSuffix(m, " 200") {
			c += k
		}
	}
	return c
}

// listeningAgent is subscribedAgent with its notifications drained, so that
// a long test's stream of them never fills the channel and stalls the
// client; the cluster test reads with chat_read_since.
func listeningAgent(t *testing.T, addr string) *agent {
	t.Helper()
	a := subscribedAgent(t, addr)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case <-a.notes:
			case <-done:
				return
			}
		}
	}()
	return a
}

// inbox reads every message of the inbox through a, page by page, and
// counts the people's messages by their text.
func inbox(a *agent) (map[string]int, error) {
	count := map[string]int{}
	after := ""
	for {
		var r readResult
		if err := a.callErr(20*time.Second, "chat_read_since", map[string]any{"after_id": after, "limit": 1000}, &r); err != nil {
			return nil, err
		}
		for text, n := range r.said() {
			count[text] += n
		}
		if len(r.Messages) == 0 || r.LastID == after {
			return count, nil
		}
		after = r.LastID
	}
}

// digest is a JSON log with every message after its first k records
// folded into a count, so that a retry loop does not hide the rest.
func digest(log string, k int) string {
	seen := map[string]int{}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(log, "\n"), "\n") {
		var rec struct {
			Msg string `json:"msg"`
		}
		_ = json.Unmarshal([]byte(line), &rec)
		if seen[rec.Msg]++; rec.Msg != "" && seen[rec.Msg] > k {
			continue
		}
		b.WriteString(line + "\n")
	}
	for msg, n := range seen {
		if msg != "" && n > k {
			fmt.Fprintf(&b, "(%d more records %q)\n", n-k, msg)
		}
	}
	return b.String()
}
