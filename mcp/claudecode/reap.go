package claudecode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/parley-chat/parley/mcp/internal/agentproc"
)

// ReapStale stops the process groups a previous run left behind: for every
// pidfile in StateDir whose process group still holds a process of parley's
// (the leader with the recorded start time, or a member carrying the marker
// variable parley gave it; a bare pid may have been given to a stranger),
// and every process carrying that marker elsewhere, it
// sends SIGTERM to the group, SIGKILL after a short grace, and it removes
// the pidfile and the TMPDIR. It returns how many groups it stopped. Call
// it before resuming conversations: two processes on one transcript race.
// Processes this Runner started itself are left alone.
func (r *Runner) ReapStale() (int, error) {
	if r.opts.StateDir == "" {
		return 0, errors.New("claudecode: no StateDir")
	}
	files, err := filepath.Glob(filepath.Join(r.opts.StateDir, "*.pid"))
	if err != nil {
		return 0, fmt.Errorf("claudecode: reap: %w", err)
	}
	r.mu.Lock()
	live := map[string]bool{}
	for k := range r.live {
		live[k] = true
	}
	r.mu.Unlock()
	n := 0
	var errs []error
	for _, f := range files {
		key := strings.TrimSuffix(filepath.Base(f), ".pid")
		if live[key] {
			continue
		}
		stopped, err := r.reap(f, key)
		if stopped {
			n++
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	// A TMPDIR without a pidfile is left from a start that never got to
	// write one.
	dirs, _ := os.ReadDir(filepath.Join(r.opts.StateDir, "tmp"))
	for _, d := range dirs {
		if live[d.Name()] {
			continue
		}
		if _, err := os.Stat(r.pidfile(d.Name())); errors.Is(err, fs.ErrNotExist) {
			os.RemoveAll(r.tmpdir(d.Name()))
		}
	}
	return n, errors.Join(errs...)
}

func (r *Runner) reap(pidfile, key string) (bool, error) {
	rec, err := agentproc.ReadPidfile(pidfile)
	if errors.Is(err, agentproc.ErrBadPidfile) {
		r.log.Warn("claudecode: removing an unreadable pidfile", "file", pidfile)
		return false, os.Remove(pidfile)
	}
	if err != nil {
		return false, fmt.Errorf("claudecode: reap %s: %w", key, err)
	}
	tmpdir := r.tmpdir(key)
	stopped := agentproc.StopLeftover(rec, stopGrace)
	if stopped {
		r.log.Info("claudecode: stopped a process left by a previous run", "key", key, "pid", rec.PID)
	}
	if err := os.Remove(pidfile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return stopped, fmt.Errorf("claudecode: reap %s: %w", key, err)
	}
	if err := os.RemoveAll(tmpdir); err != nil {
		return stopped, fmt.Errorf("claudecode: reap %s: %w", key, err)
	}
	return stopped, nil
}
