package e2e

// A kill -9 on the fake clock. The tests of a killed daemon that wait out
// a platform's pacing run in a synctest bubble, where a child process
// cannot be (its waits would be real time): there, crash takes the daemon
// down as SIGKILL does. What a killed process leaves is its files as they
// are on disk at that instant — bbolt writes with write(2), so a commit
// that returned is in the file and one that did not is not — and nothing
// it would still have done reaches anyone. So the daemon's host is cut off
// the network first: nothing it sends from then on arrives (what it sent
// before may have, as a dying process's last packets). Then
// synctest.Wait: once every goroutine of the bubble but the test's is
// durably blocked, no write is half done and none can start while the test
// copies the data directory. What the daemon wrote between the cut and
// the copy, it could have written before a real kill (a call failing just
// before it), so the copy is a state a killed process can leave. It is
// what the next start runs on; the old daemon is then stopped without a
// drain, its shutdown writing only to the directory left behind.

import (
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
)

// crash kills the stack's daemon (see above); the next start runs a new
// one on what the killed one left on disk. The stack must be on bubbleNet.
func (st *stack) crash() {
	st.t.Helper()
	if st.net == nil {
		st.t.Fatal("crash needs a stack on the fake clock (bubbleNet)")
	}
	st.host.Kill()
	if st.agent != nil {
		// Its agent hears of the death (its connections were cut) and goes
		// too; start connects a new one.
		_ = st.agent.Close()
	}
	synctest.Wait()
	left := st.t.TempDir()
	copyTree(st.t, st.cfg.DataDir, left)
	st.crashed = true
	servetest.HoldOutbox(st.m)
	st.stop()
	st.crashed = false
	st.cfg.DataDir = left
}

// copyTree copies the directories and regular files below src to dst.
func copyTree(tb testing.TB, src, dst string) {
	tb.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case d.Type().IsRegular():
			return copyFile(path, to)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("copying the data directory: %v", err)
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
