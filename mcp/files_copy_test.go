package mcp

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/files"
)

// copies lists the copies in s's store of files.
func copies(t *testing.T, s *Server) []string {
	t.Helper()
	entries, err := os.ReadDir(s.opts.Files.(*files.Store).Dir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// What the open refuses, whatever was checked before: a path that holds a
// symlink by the time it is opened (put in after it was resolved), a FIFO
// or a device, a hard link to a protected file, a file too large, a full
// store. Nothing is copied for any of them.
func TestOpenAndCopyRefusals(t *testing.T) {
	root := t.TempDir()
	send := filepath.Join(root, "send")
	if err := os.Mkdir(send, 0o700); err != nil {
		t.Fatal(err)
	}
	config := write(t, filepath.Join(root, "etc", "parley.toml"), "[telegram]\ntoken = \"123:secret\"\n")
	write(t, filepath.Join(root, "elsewhere", "notes.txt"), "private")
	s := fileServer(t, []string{send}, []string{config})

	// A symlink in a parent directory: send/dir leads out of the send
	// directories. open is given the path as if it had been resolved
	// before the directory was swapped for the link.
	dir := symlink(t, filepath.Join(root, "elsewhere"), filepath.Join(send, "dir"))
	if _, err := s.open(filepath.Join(dir, "notes.txt"), filepath.Join(dir, "notes.txt")); err == nil {
		t.Error("a symlinked directory in the path was followed")
	}
	// A symlink as the final component, to the config file.
	final := symlink(t, config, filepath.Join(send, "report.txt"))
	if _, err := s.open(final, final); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlink as the final component: %v, want a refusal naming the symlink", err)
	}

	// A FIFO is refused without blocking on its open.
	fifo := filepath.Join(send, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.attachments(t.Context(), []string{fifo}); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("a FIFO: %v, want \"is not a regular file\"", err)
	}
	// A device, opened as a handle that reads nothing, is refused too.
	if _, err := s.open("/dev/null", "/dev/null"); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("a device: %v, want \"is not a regular file\"", err)
	}

	// A hard link to the config file.
	hard := filepath.Join(send, "innocent.txt")
	if err := os.Link(config, hard); err != nil {
		t.Fatal(err)
	}
	if _, err := s.attachments(t.Context(), []string{hard}); err == nil || !strings.Contains(err.Error(), "a link to one of parley's own files") {
		t.Errorf("a hard link to the config file: %v", err)
	}

	// Too large, by its size when opened.
	big := filepath.Join(send, "big.bin")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxFileSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := s.attachments(t.Context(), []string{big}); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a file of %d bytes: %v", maxFileSize+1, err)
	}
	if names := copies(t, s); len(names) != 0 {
		t.Errorf("copies kept after refusals: %q", names)
	}

	// A full store: the tool error names the setting, and of several
	// files none is kept.
	small, err := files.New(t.TempDir(), files.Options{MaxTotal: 10, Setting: "files_max_mb (PARLEY_FILES_MAX_MB)"})
	if err != nil {
		t.Fatal(err)
	}
	s.opts.Files = small
	one := write(t, filepath.Join(send, "one.txt"), "12345")
	two := write(t, filepath.Join(send, "two.txt"), "678901")
	if _, err := s.attachments(t.Context(), []string{one, two}); err == nil || !strings.Contains(err.Error(), "files_max_mb (PARLEY_FILES_MAX_MB)") {
		t.Errorf("a full store: %v, want an error naming the setting", err)
	}
	if small.Total() != 5 {
		t.Errorf("the store counts %d bytes, want the 5 of the first copy (held by nothing, collected later)", small.Total())
	}
}

// The copy is taken when the agent posts: replacing the file, renaming
// another over it, swapping it for a symlink to the config file or
// removing it afterwards leaves the copy as it was.
func TestCopyIsTakenAtPost(t *testing.T) {
	root := t.TempDir()
	send := filepath.Join(root, "send")
	config := write(t, filepath.Join(root, "parley.toml"), "[telegram]\ntoken = \"123:secret\"\n")
	s := fileServer(t, []string{send}, []string{config})
	for _, change := range []struct {
		name string
		do   func(path string)
	}{
		{"symlink to the config file", func(p string) {
			os.Remove(p)
			symlink(t, config, p)
		}},
		{"renamed over", func(p string) {
			if err := os.Rename(write(t, p+".new", "something else"), p); err != nil {
				t.Fatal(err)
			}
		}},
		{"written in place", func(p string) { write(t, p, "something else") }},
		{"removed", func(p string) { os.Remove(p) }},
	} {
		t.Run(change.name, func(t *testing.T) {
			p := write(t, filepath.Join(send, strings.ReplaceAll(change.name, " ", "-")+".txt"), "the report: "+change.name)
			atts, err := s.attachments(t.Context(), []string{p})
			if err != nil {
				t.Fatal(err)
			}
			change.do(p)
			if got := copied(t, s, atts[0]); got != "the report: "+change.name {
				t.Errorf("the copy holds %q", got)
			}
		})
	}
	// A message from before copies were kept names the agent's path and
	// no digest: it is never read again.
	if _, err := s.opts.Files.Open(core.Attachment{Name: "old.txt", Path: config, Size: 30}); err == nil {
		t.Error("an attachment without a copy was opened by its path")
	}
}
