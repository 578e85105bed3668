package agentproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

const (
	// StopGrace is how long Stop lets the process group end on SIGTERM
	// before it sends SIGKILL.
	StopGrace = 3 * time.Second
	// drainGrace is how long stdout may stay open after the agent exited
	// and its group was killed (a process that left the group may hold it).
	drainGrace = 2 * time.Second
)

// Spec says how to start one agent process.
type Spec struct {
	// Cmd is the command with its Path, Args, Dir and Env (which carries
	// Marker and TMPDIR = TmpDir); Start sets its SysProcAttr and pipes.
	Cmd *exec.Cmd
	// Pidfile is where the process is recorded while it runs.
	Pidfile string
	// TmpDir is created empty (mode 0700) before the start and removed
	// after the exit.
	TmpDir string
	// Marker is the NAME=id entry of Cmd.Env (NewMarker).
	Marker string
	// Conversation is recorded in the pidfile.
	Conversation string
	// Stderr receives what the process writes on stderr.
	Stderr io.Writer
	// Read reads the process's stdout until it ends; it runs on a
	// goroutine of its own. Start waits for it, at most drainGrace after
	// the exit, before the process counts as done.
	Read func(stdout io.Reader)
}

// Proc is one running agent process in a process group of its own. Its
// methods are safe for concurrent use.
type Proc struct {
	spec Spec
	// PID is the process's pid, also its process group's id.
	PID int
	// Stdin is the write end of the process's stdin: writes may set
	// deadlines, and Stop closes it.
	Stdin *os.File

	stdout   *os.File
	readDone chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	waitErr  error
}

// Start starts spec's process: a TMPDIR of its own, pipes of its own
// (stdout must be closable from this side when a process that escaped the
// group keeps it open, and stdin writes need deadlines), then the pidfile.
// The error of a command that cannot start wraps exec's, so
// errors.Is(err, exec.ErrNotFound) and the like tell why.
func Start(spec Spec) (*Proc, error) {
	if err := os.RemoveAll(spec.TmpDir); err != nil {
		return nil, fmt.Errorf("agentproc: tmpdir: %w", err)
	}
	if err := os.MkdirAll(spec.TmpDir, 0o700); err != nil {
		return nil, fmt.Errorf("agentproc: tmpdir: %w", err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(spec.TmpDir)
		return nil, fmt.Errorf("agentproc: pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		os.RemoveAll(spec.TmpDir)
		return nil, fmt.Errorf("agentproc: pipe: %w", err)
	}
	cmd := spec.Cmd
	cmd.SysProcAttr = SysProcAttr()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, spec.Stderr
	cmd.WaitDelay = drainGrace
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		os.RemoveAll(spec.TmpDir)
		return nil, err
	}
	p := &Proc{spec: spec, PID: cmd.Process.Pid, Stdin: inW, stdout: outR,
		readDone: make(chan struct{}), done: make(chan struct{})}
	// The pidfile is written before wait runs: until then the process,
	// even one that exited at once, is an unreaped zombie with a start
	// time, and wait's removal cannot come before the write.
	start, err := ProcStart(p.PID)
	if err == nil {
		err = WritePidfile(spec.Pidfile, Record{PID: p.PID, Start: start, Conversation: spec.Conversation, Marker: spec.Marker})
	}
	go func() {
		defer close(p.readDone)
		spec.Read(outR)
	}()
	go p.wait()
	if err != nil {
		// Without a pidfile a crash of parley would leave it unfound.
		p.Stop()
		return nil, err
	}
	return p, nil
}

// Stop ends the process: it closes stdin, sends SIGTERM to the whole
// process group, SIGKILL after StopGrace, and waits until it is done (the
// group killed, the pidfile and the TMPDIR removed). It can be called more
// than once and after the process exited on its own.
func (p *Proc) Stop() {
	p.stopOnce.Do(func() {
		// Closing unblocks a write stuck on a full pipe.
		p.Stdin.Close()
		SignalGroup(p.PID, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(StopGrace):
			SignalGroup(p.PID, syscall.SIGKILL)
		}
	})
	<-p.done
}

// Kill ends the process like Stop but returns at once.
func (p *Proc) Kill() { go p.Stop() }

// Done is closed once the process exited and everything it left was
// stopped and removed.
func (p *Proc) Done() <-chan struct{} { return p.done }

// ExitErr is how the process exited (exec.Cmd.Wait's error), once Done.
func (p *Proc) ExitErr() error {
	<-p.done
	return p.waitErr
}

// wait reaps the process. Once it exited it kills what is left of its
// group while the zombie still holds the group id (so the kill cannot
// reach a stranger), and what it started elsewhere.
func (p *Proc) wait() {
	WaitExited(p.PID)
	SignalGroup(p.PID, syscall.SIGKILL)
	for range 3 {
		if len(Marked(p.spec.Marker)) == 0 {
			break
		}
		SignalMarked(p.spec.Marker, syscall.SIGKILL)
	}
	select {
	case <-p.readDone:
	case <-time.After(drainGrace):
		p.stdout.Close()
		<-p.readDone
	}
	p.waitErr = p.spec.Cmd.Wait()
	p.stdout.Close()
	p.Stdin.Close()
	p.removeFiles()
	close(p.done)
}

// removeFiles removes the pidfile and the TMPDIR, unless the pidfile is no
// longer this process's: then a successor owns both.
func (p *Proc) removeFiles() {
	rec, err := ReadPidfile(p.spec.Pidfile)
	if errors.Is(err, ErrBadPidfile) || err == nil && rec.Marker != p.spec.Marker {
		return
	}
	os.Remove(p.spec.Pidfile)
	os.RemoveAll(p.spec.TmpDir)
}
