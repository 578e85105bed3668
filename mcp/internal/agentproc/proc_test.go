//go:build linux

package agentproc

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopKillsAll: Stop ends the agent, its group and what it started in
// a session of its own (found by the marker), and removes the pidfile and
// the TMPDIR.
func TestStopKillsAll(t *testing.T) {
	dir := t.TempDir()
	marker := NewMarker("AGENTPROC_TEST_RUN")
	// The agent prints the pid of a command it started in a session of
	// its own, then waits.
	cmd := exec.Command("sh", "-c", `setsid sleep 300 & echo $!; sleep 300`)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), marker}
	pids := make(chan int, 1)
	p, err := Start(Spec{Cmd: cmd, Pidfile: filepath.Join(dir, "a.pid"), TmpDir: filepath.Join(dir, "tmp"), Marker: marker,
		Stderr: io.Discard,
		Read: func(r io.Reader) {
			line, _ := bufio.NewReader(r).ReadString('\n')
			pid, _ := strconv.Atoi(strings.TrimSpace(line))
			pids <- pid
			io.Copy(io.Discard, r)
		}})
	if err != nil {
		t.Fatal(err)
	}
	var escaped int
	select {
	case escaped = <-pids:
	case <-time.After(30 * time.Second):
		t.Fatal("no pid")
	}
	rec, err := ReadPidfile(filepath.Join(dir, "a.pid"))
	if err != nil || rec.PID != p.PID || rec.Marker != marker || !GroupIsOurs(rec) {
		t.Fatalf("pidfile %+v: %v", rec, err)
	}
	if !Live(escaped) || !HasMarker(escaped, marker) {
		t.Fatalf("the escaped command %d is not running with the marker", escaped)
	}
	p.Stop()
	if Live(p.PID) || Live(escaped) || len(GroupMembers(p.PID)) > 0 {
		t.Fatalf("left: agent %v, escaped %v, group %v", Live(p.PID), Live(escaped), GroupMembers(p.PID))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left in the state dir: %v", ents)
	}
}

// TestStopLeftover: a recorded process is stopped after a "crash" (its
// Proc forgotten); a stranger holding a recorded pid is not.
func TestStopLeftover(t *testing.T) {
	dir := t.TempDir()
	marker := NewMarker("AGENTPROC_TEST_RUN")
	cmd := exec.Command("sleep", "300")
	cmd.Env = []string{marker}
	p, err := Start(Spec{Cmd: cmd, Pidfile: filepath.Join(dir, "a.pid"), TmpDir: filepath.Join(dir, "tmp"), Marker: marker,
		Stderr: io.Discard, Read: func(r io.Reader) { io.Copy(io.Discard, r) }})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ReadPidfile(filepath.Join(dir, "a.pid"))
	if err != nil {
		t.Fatal(err)
	}
	stranger := exec.Command("sleep", "300")
	stranger.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stranger.Process.Kill(); stranger.Wait() }()
	start, _ := ProcStart(stranger.Process.Pid)
	if StopLeftover(Record{PID: stranger.Process.Pid, Start: start + 1, Marker: NewMarker("AGENTPROC_TEST_RUN")}, time.Second) {
		t.Fatal("a stranger was taken for a leftover")
	}
	if !StopLeftover(rec, StopGrace) {
		t.Fatal("the leftover was not found")
	}
	<-p.Done()
	if err := syscall.Kill(stranger.Process.Pid, 0); err != nil {
		t.Fatalf("the stranger was killed: %v", err)
	}
}
