//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// acpPidfile reads the pidfile of the default ACP agent's process under
// the data directory dir: data_dir/agents/acp/agent.pid.
func acpPidfile(t *testing.T, dir string) agentPidRecord {
	t.Helper()
	path := filepath.Join(dir, "agents", "acp", "agent.pid")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec agentPidRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.PID <= 1 || rec.Marker == "" {
		t.Fatalf("pidfile %s: %q: %v", path, b, err)
	}
	return rec
}

// TestACPSessionsShareProcess: two sessions of the same agent are served
// by one agent process: after the second session's turn the processes
// carrying the driver's marker are exactly those of the first (same pids,
// same start times), the pidfile names the same process, and each
// session's conversation is its own.
func TestACPSessionsShareProcess(t *testing.T) {
	forEachACPAgent(t, func(t *testing.T, ag acpAgent) {
		st := newACPStack(t, ag, nil)
		first, second := st.newTopic("first"), st.newTopic("second")

		st.model.Say(modeltest.Text("Answer one."))
		st.srv.SendText(st.forum, first, ann, "Remember the word apricot.")
		st.answeredOnce(first, "Answer one.")
		rec := acpPidfile(t, st.cfg.DataDir)
		procs := markedProcs(rec.Marker)
		if !hasPID(procs, rec.PID) {
			t.Fatalf("the pidfile's process %d does not run; marked: %v", rec.PID, procs)
		}

		st.model.Say(modeltest.Text("Answer two."))
		st.srv.SendText(st.forum, second, ann, "Remember the word plum.")
		st.answeredOnce(second, "Answer two.")
		if again := acpPidfile(t, st.cfg.DataDir); again != rec {
			t.Errorf("the pidfile was %+v, then %+v: another process", rec, again)
		}
		after := markedProcs(rec.Marker)
		same := func(a, b procID) int { return a.PID - b.PID }
		slices.SortFunc(procs, same)
		slices.SortFunc(after, same)
		if !slices.EqualFunc(procs, after, func(a, b procID) bool { return a.PID == b.PID && a.Start == b.Start }) {
			t.Errorf("the agent's processes were %v after the first session's turn and %v after the second's", procs, after)
		}
		t.Logf("%s serves both sessions with %d processes: %v", ag.title, len(after), after)

		// One conversation each: neither turn was sent the other's.
		for i := range st.model.turns() {
			sent := st.model.sent(i)
			if strings.Contains(sent, "apricot") && strings.Contains(sent, "plum") {
				t.Errorf("model request %d mixes the sessions:\n%s", i, sent)
			}
		}
		if len(st.sessions()) != 2 {
			t.Fatalf("%d sessions", len(st.sessions()))
		}
	})
}
