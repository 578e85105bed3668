package mcp

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/files"
)

// fileServer is a Server with only what the file checks read, and a
// store of files of its own.
func fileServer(t *testing.T, sendDirs, protected []string) *Server {
	t.Helper()
	blobs, err := files.New(t.TempDir(), files.Options{Setting: "files_max_mb"})
	if err != nil {
		t.Fatal(err)
	}
	return &Server{opts: Options{SendDirs: sendDirs, Protected: protected, Files: blobs}}
}

// copied reads the copy an attachment refers to.
func copied(t *testing.T, s *Server, a core.Attachment) string {
	t.Helper()
	r, err := s.opts.Files.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func symlink(t *testing.T, target, link string) string {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// What an agent may send: files inside the send directories, by their
// real path; never /proc, /sys, /dev or parley's own files, whatever the
// directories say; refusals name the setting.
func TestSendDirs(t *testing.T) {
	root := t.TempDir()
	send := filepath.Join(root, "send")
	data := filepath.Join(send, "data") // the data directory inside a send directory
	config := write(t, filepath.Join(send, "parley.toml"), "[http]\ntoken = \"secret\"\n")
	db := write(t, filepath.Join(data, "parley.db"), "bolt")
	report := write(t, filepath.Join(send, "sub", "report.csv"), "a,b\n")
	outside := write(t, filepath.Join(root, "outside.txt"), "no")
	sendx := write(t, filepath.Join(root, "sendx", "f.txt"), "prefix")
	hardlink := filepath.Join(send, "db-copy")
	if err := os.Link(db, hardlink); err != nil {
		t.Fatal(err)
	}
	s := fileServer(t, []string{send}, []string{data, config})

	// Accepted, and copied: the attachment refers to the copy.
	viaLink := symlink(t, report, filepath.Join(send, "link-to-report"))
	for _, p := range []string{report, viaLink, filepath.Join(send, "sub", "..", "sub", "report.csv")} {
		atts, err := s.attachments(t.Context(), []string{p})
		if err != nil {
			t.Fatalf("%s refused: %v", p, err)
		}
		a := atts[0]
		if a.Size != 4 || a.Digest == "" || filepath.Dir(a.Path) != s.opts.Files.(*files.Store).Dir() || a.Name != filepath.Base(p) {
			t.Errorf("%s: attachment %+v, want the copy in the store of files", p, a)
		}
		if got := copied(t, s, a); got != "a,b\n" {
			t.Errorf("%s: the copy holds %q", p, got)
		}
		s.opts.Files.Release(a)
	}

	notIn := "is not in a directory agents may send files from (" + send + "); put the file there, or add its directory to [mcp] send_dirs (PARLEY_MCP_SEND_DIRS)"
	never := "is never sent: "
	for _, tc := range []struct{ name, path, want string }{
		{"outside", outside, notIn},
		{"/tmpx is not /tmp", sendx, notIn},
		{".. escapes", filepath.Join(send, "..", "outside.txt"), notIn},
		{"symlink out", symlink(t, outside, filepath.Join(send, "link-out")), notIn},
		{"symlinked directory out", filepath.Join(symlink(t, root, filepath.Join(send, "dir-out")), "outside.txt"), notIn},
		{"the bolt file", db, never + "it is parley's own (" + data + ")"},
		{"the config file", config, never + "it is parley's own (" + config + ")"},
		{"a hard link to the bolt file", hardlink, never + "it is a link to one of parley's own files"},
		{"the environment", "/proc/self/environ", never + "it is under /proc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.attachments(t.Context(), []string{tc.path})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: %v, want %q", tc.path, err, tc.want)
			}
		})
	}

	// Even with "/" allowed, the kernel's views stay out, directly or by
	// a symlink in an allowed directory.
	all := fileServer(t, []string{"/"}, []string{data, config})
	for _, p := range []string{"/proc/self/environ", symlink(t, "/proc/self/environ", filepath.Join(send, "env")), "/sys/kernel/uevent_seqnum", "/dev/null", db} {
		_, err := all.attachments(t.Context(), []string{p})
		if err == nil || !strings.Contains(err.Error(), never) || !strings.Contains(err.Error(), "[mcp] send_dirs") {
			t.Errorf("%s with / allowed: %v, want %q naming the setting", p, err, never)
		}
	}

	// No send directories: nothing at all.
	if _, err := fileServer(t, []string{}, nil).attachments(t.Context(), []string{report}); err == nil || !strings.Contains(err.Error(), "(none)") {
		t.Errorf("no send directories: %v", err)
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		p, dir string
		want   bool
	}{
		{"/tmp", "/tmp", true},
		{"/tmp/a", "/tmp", true},
		{"/tmpx", "/tmp", false},
		{"/tmpx/a", "/tmp", false},
		{"/a", "/", true},
		{"/", "/", true},
		{"/tm", "/tmp", false},
	} {
		if got := within(tc.p, tc.dir); got != tc.want {
			t.Errorf("within(%q, %q) = %v, want %v", tc.p, tc.dir, got, tc.want)
		}
	}
}

// Through the tool: the daemon's environment is refused, a file in a send
// directory is copied and the message refers to the copy.
func TestAssistantPostFiles(t *testing.T) {
	dir := t.TempDir()
	send := t.TempDir()
	st := newStack(t, dir, stackOptions{sendDirs: []string{send}})
	id := st.createSession("files")
	c := mustDial(t, st.url, connOptions{})
	c.fails(t, "chat.assistant.post", map[string]any{"session_id": string(id), "content": "env", "files": []string{"/proc/self/environ"}},
		"[mcp] send_dirs")
	c.fails(t, "chat.assistant.post", map[string]any{"session_id": string(id), "content": "db", "files": []string{filepath.Join(dir, "parley.db")}},
		"[mcp] send_dirs")
	report := write(t, filepath.Join(send, "report.csv"), "a,b\n")
	link := symlink(t, report, filepath.Join(send, "latest.csv"))
	var res postResult
	c.ok(t, "chat.assistant.post", map[string]any{"session_id": string(id), "content": "here", "files": []string{link}}, &res)
	msgs, err := st.store.Inbox(t.Context(), id, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	m := msgs[len(msgs)-1]
	if len(m.Attachments) != 1 || m.Attachments[0].Name != "latest.csv" || !strings.HasPrefix(m.Attachments[0].Path, filepath.Join(dir, "blobs")+"/") {
		t.Fatalf("stored attachments %+v, want the copy of %s named latest.csv", m.Attachments, report)
	}
	if b, err := os.ReadFile(m.Attachments[0].Path); err != nil || string(b) != "a,b\n" {
		t.Errorf("the copy holds %q (%v)", b, err)
	}
}
