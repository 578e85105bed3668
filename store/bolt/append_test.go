package bolt

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/parley-chat/parley/core"
)

// The unclean-stop test re-executes the test binary: the child appends and
// then dies without Close, the parent opens the file afterwards.
const (
	childEnv     = "PARLEY_BOLT_TEST_CHILD"
	childPathEnv = "PARLEY_BOLT_TEST_PATH"
)

func TestUncleanStop(t *testing.T) {
	if mode := os.Getenv(childEnv); mode != "" {
		uncleanChild(mode, os.Getenv(childPathEnv))
		return
	}
	for _, mode := range []string{"exit", "kill"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "parley.db")
			cmd := exec.Command(os.Args[0], "-test.run=^TestUncleanStop$")
			cmd.Env = append(os.Environ(), childEnv+"="+mode, childPathEnv+"="+path)
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe() // the "kill" child blocks on it
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("child: %v (read %q)", err, line)
			}
			var sid, mid string
			if _, err := fmt.Sscanf(line, "appended %s %s", &sid, &mid); err != nil {
				t.Fatalf("child said %q: %v", line, err)
			}
			if mode == "kill" {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
			_ = cmd.Wait()

			s := openAt(t, path, Options{NoSync: true})
			inbox, err := s.Inbox(ctx, core.SessionID(sid), "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(inbox) != 1 || string(inbox[0].ID) != mid || inbox[0].Content != "survives" {
				t.Fatalf("inbox after restart = %+v, want one message %s", inbox, mid)
			}
			res, err := s.Append(ctx, core.Append{
				Message:  core.Message{Session: core.SessionID(sid), Content: "redelivered"},
				DedupKey: "telegram/1",
			})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Duplicate || string(res.Message.ID) != mid || res.Message.Content != "survives" {
				t.Errorf("redelivery after restart = %+v, want duplicate of %s", res, mid)
			}
			if evs, err := s.EventsSince(ctx, 0, 0); err != nil || len(evs) != 1 || evs[0].Message == nil || string(evs[0].Message.ID) != mid {
				t.Errorf("events after restart = %+v, %v", evs, err)
			}
		})
	}
}

// uncleanChild appends one message durably, reports it and stops without
// closing the store.
func uncleanChild(mode, path string) {
	ctx := context.Background()
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	sess, _, err := s.CreateSession(ctx, core.Session{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	res, err := s.Append(ctx, core.Append{
		Message:  core.Message{Session: sess.ID, Content: "survives"},
		DedupKey: "telegram/1",
		Events:   []core.Event{{Kind: core.EventHumanMessage, Message: &core.Message{}}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("appended %s %s\n", sess.ID, res.Message.ID)
	if mode == "kill" {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until killed
	}
	os.Exit(0)
}

func TestInboxAcrossFoldAndReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	a := createSession(t, s, core.Session{})
	b := createSession(t, s, core.Session{})
	var inA []core.MessageID
	for i := range 10 {
		inA = append(inA, appendText(t, s, a.ID, fmt.Sprint(i)).ID)
		appendText(t, s, b.ID, fmt.Sprint(i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Everything is still recent; the first append after the reopen folds.
	s = openAt(t, path, Options{NoSync: true})
	s.foldAt = 5
	inA = append(inA, appendText(t, s, a.ID, "after reopen").ID)
	got, err := s.Inbox(ctx, a.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ids(got), inA) {
		t.Errorf("Inbox(a) = %v, want %v", ids(got), inA)
	}
	if got, _ := s.Inbox(ctx, a.ID, inA[9], 0); len(got) != 1 || got[0].Content != "after reopen" {
		t.Errorf("Inbox(a, after the last folded) = %v", contents(got))
	}
}
