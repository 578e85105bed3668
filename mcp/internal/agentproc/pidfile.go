package agentproc

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Record is a pidfile's content: enough to recognise the process later
// even when its pid was given to another process meanwhile.
type Record struct {
	PID          int    `json:"pid"`
	Start        uint64 `json:"start"` // field 22 of /proc/PID/stat
	Conversation string `json:"conversation"`
	// Marker is the NAME=id entry of the process's environment (NewMarker).
	Marker string `json:"marker"`
}

// NewMarker returns name=<random id>: the variable one agent process gets,
// which every process it starts inherits (see HasMarker). It is unique per
// process, so a process stopping never touches its successor.
func NewMarker(name string) string {
	var b [12]byte
	rand.Read(b[:])
	return name + "=" + hex.EncodeToString(b[:])
}

// WritePidfile writes rec to path: into a new file renamed over path, so
// a crash leaves the old record or the new one, never half of one.
func WritePidfile(path string, rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("agentproc: pidfile: %w", err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("agentproc: pidfile: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("agentproc: pidfile: %w", err)
	}
	return nil
}

// ErrBadPidfile is ReadPidfile's error for a file that holds no record of
// a process: nothing can be stopped by it, and it can go.
var ErrBadPidfile = errors.New("agentproc: the pidfile holds no process record")

// ReadPidfile reads the record at path: ErrBadPidfile when the file holds
// no record with a plausible pid.
func ReadPidfile(path string) (Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Record{}, err
	}
	var rec Record
	if json.Unmarshal(b, &rec) != nil || rec.PID <= 1 {
		return Record{}, ErrBadPidfile
	}
	return rec, nil
}

// StopLeftover stops what is left of the process rec records: its process
// group when a live member is provably parley's (the leader with the
// recorded start time, or a member carrying the marker), and every process
// carrying the marker. It sends SIGTERM, SIGKILL after grace, and waits up
// to grace again. It returns whether anything of rec's was running. A pid
// given to a stranger is left alone.
func StopLeftover(rec Record, grace time.Duration) bool {
	if !GroupIsOurs(rec) && len(Marked(rec.Marker)) == 0 {
		return false
	}
	// The group is verified, so signalling it as a whole is safe; the
	// marked processes are signalled one by one.
	signal := func(sig syscall.Signal) {
		if GroupIsOurs(rec) {
			SignalGroup(rec.PID, sig)
		}
		SignalMarked(rec.Marker, sig)
	}
	signal(syscall.SIGTERM)
	if !waitGone(rec, grace) {
		signal(syscall.SIGKILL)
		waitGone(rec, grace)
	}
	return true
}

// GroupIsOurs says whether process group rec.PID has a live member that is
// the recorded process or carries its marker. A group id cannot be given
// to a new process while a member lives, so one recognised member makes the
// whole group ours.
func GroupIsOurs(rec Record) bool {
	for _, pid := range GroupMembers(rec.PID) {
		if pid == rec.PID {
			if start, err := ProcStart(pid); err == nil && start == rec.Start {
				return true
			}
			continue
		}
		if HasMarker(pid, rec.Marker) {
			return true
		}
	}
	return false
}

// waitGone waits until neither rec's group nor a marked process is left.
func waitGone(rec Record, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !GroupIsOurs(rec) && len(Marked(rec.Marker)) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
