//go:build linux

package claudecode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
	"github.com/parley-chat/parley/mcp/internal/agentproc"
)

// TestStopKillsGroup runs a Bash command that does not end and checks
// Stop leaves nothing behind: not in claude's process group, nor in the
// sessions Claude Code starts its Bash commands in.
func TestStopKillsGroup(t *testing.T) {
	h := newHarness(t, true)
	// touch makes Claude Code ask; tail never ends (sleep is refused by
	// Claude Code's own rules).
	h.api.Say(claudetest.Bash("touch started; tail -f /dev/null & tail -f /dev/null", "Wait forever"))
	p := h.start(t, "s", newUUID(), false)
	if err := p.Send(t.Context(), "sleep"); err != nil {
		t.Fatal(err)
	}
	req := until(t, p, isPermission)
	if err := p.Answer(req[len(req)-1].(PermissionRequest).RequestID, Decision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	sleeps := waitFor(t, func() []int { return commandsIn(p.marker, "tail -f") }, 2)
	t.Logf("claude %d runs %v", p.pgid, sleeps)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := agentproc.GroupMembers(p.pgid); len(left) > 0 {
		t.Fatalf("left in the group after Stop: %v", left)
	}
	if left := agentproc.Marked(p.marker); len(left) > 0 {
		t.Fatalf("left after Stop: %v", left)
	}
	for _, pid := range sleeps {
		if agentproc.Live(pid) {
			t.Errorf("sleep %d still runs", pid)
		}
	}
}

// commandsIn lists the processes carrying marker whose command line holds s.
func commandsIn(marker string, s string) []int {
	var out []int
	for _, pid := range agentproc.Marked(marker) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			out = append(out, pid)
		}
	}
	return out
}

// waitFor polls f until it returns at least n items.
func waitFor(t *testing.T, f func() []int, n int) []int {
	t.Helper()
	deadline := time.Now().Add(turnTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if got := f(); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d after %v", n, turnTimeout)
		}
		<-tick.C
	}
}

// TestReapStale simulates a crash of parley: its processes and pidfiles
// stay, a new Runner on the same StateDir finds and stops them, and leaves
// alone a process that got a recorded pid.
func TestReapStale(t *testing.T) {
	h := newHarness(t, false)
	left := h.start(t, "crashed", newUUID(), false)
	if n, err := h.runner.ReapStale(); n != 0 || err != nil {
		t.Fatalf("the runner reaped %d of its own live processes: %v", n, err)
	}

	// A stranger holding a pid some pidfile records, with another start time.
	stranger := exec.Command("sleep", "300")
	stranger.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stranger.Process.Kill(); stranger.Wait() })
	start, err := agentproc.ProcStart(stranger.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.runner.writePidfile("reused", agentproc.Record{PID: stranger.Process.Pid, Start: start + 1,
		Marker: agentproc.NewMarker(markerVar)}); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(h.opts.StateDir, "tmp", "orphan"), 0o700)

	// A Bash command that outlived its claude (killed with parley, by
	// Pdeathsig): in a session of its own, so only its marker tells.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	orphanTmp := filepath.Join(h.opts.StateDir, "tmp", "orphaned")
	os.MkdirAll(orphanTmp, 0o700)
	orphan := exec.Command("tail", "-f", "/dev/null")
	marker := agentproc.NewMarker(markerVar)
	orphan.Env = []string{"TMPDIR=" + orphanTmp, marker}
	orphan.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	orphanDone := make(chan struct{})
	go func() { orphan.Wait(); close(orphanDone) }()
	t.Cleanup(func() { orphan.Process.Kill(); <-orphanDone })
	if err := h.runner.writePidfile("orphaned", agentproc.Record{PID: gone.Process.Pid, Start: 1, Marker: marker}); err != nil {
		t.Fatal(err)
	}

	again := NewRunner(h.opts)
	n, err := again.ReapStale()
	if n != 2 || err != nil {
		t.Fatalf("reaped %d: %v", n, err)
	}
	for what, done := range map[string]<-chan struct{}{"claude": left.Done(), "its command": orphanDone} {
		select {
		case <-done:
		case <-time.After(turnTimeout):
			t.Fatalf("%s left by the crash still runs", what)
		}
	}
	if err := syscall.Kill(stranger.Process.Pid, 0); err != nil {
		t.Fatalf("the stranger was killed: %v", err)
	}
	ents, _ := os.ReadDir(h.opts.StateDir)
	tmps, _ := os.ReadDir(filepath.Join(h.opts.StateDir, "tmp"))
	if len(ents) != 1 || len(tmps) != 0 {
		t.Fatalf("left in StateDir: %v, tmp: %v", ents, tmps)
	}
}

// TestStartStopsLeftover: a process a previous run left for the same key
// is stopped before the new one starts (two on one transcript race).
func TestStartStopsLeftover(t *testing.T) {
	h := newHarness(t, false)
	conv := newUUID()
	h.api.Say(claudetest.Text("first"))
	left := h.start(t, "s", conv, false)
	turn(t, left, "hello")

	next := &harness{api: h.api, runner: NewRunner(h.opts), opts: h.opts}
	p := next.start(t, "s", conv, true)
	select {
	case <-left.Done():
	case <-time.After(turnTimeout):
		t.Fatal("the leftover still runs")
	}
	h.api.Say(claudetest.Text("second"))
	if r := only[Result](turn(t, p, "again")); r[0].Text != "second" {
		t.Fatalf("result %+v", r)
	}
}
