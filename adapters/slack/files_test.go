package slack

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/files"
)

// fileShare is a file_share message event with files (JSON objects).
func fileShare(t *testing.T, text string, files ...map[string]any) string {
	t.Helper()
	fs, _ := json.Marshal(files)
	txt, _ := json.Marshal(text)
	return `{"type":"message","subtype":"file_share","channel":"C1","user":"U1","text":` + string(txt) +
		`,"ts":"800.1","thread_ts":"100.1","files":` + string(fs) + `}`
}

func TestSharedFiles(t *testing.T) {
	api := newFakeAPI(t)
	h := newRecorder("U1")
	a := newTestAdapter(t, api, func(o *Options) { o.MaxFileSize = 1 << 10 }, withAuthorizer(h))
	good := map[string]any{"id": "F1", "name": "../../etc/re port.txt", "mimetype": "text/plain", "size": 11,
		"url_private_download": api.fileURL("F1", []byte("hello files"))}
	big := map[string]any{"id": "F2", "name": "big.bin", "size": 4 << 20, "url_private_download": api.fileURL("F2", nil)}
	external := map[string]any{"id": "F3", "name": "doc", "is_external": true, "url_private": "https://drive.example.com/doc"}
	gone := map[string]any{"id": "F4", "name": "gone.txt", "size": 3, "url_private_download": strings.TrimSuffix(api.URL, "api/") + "files/missing"}
	ev := event(t, fileShare(t, "see attached", good, big, external, gone))
	if err := a.onEvent(context.Background(), h, ev); err != nil {
		t.Fatal(err)
	}
	var notices []string
	var sent *core.Command
	for _, c := range h.commands() {
		switch c.Kind {
		case core.Notice:
			notices = append(notices, c.Text)
		case core.SendMessage:
			sent = &c
		}
	}
	want := []string{"📎 big.bin is 4 MB; parley takes files up to 1 KB", "📎 doc is not stored in Slack", "⚠️ Could not fetch gone.txt", "📎 Received re port.txt"}
	if len(notices) != len(want) {
		t.Fatalf("notices %q, want %d", notices, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(notices[i], w) {
			t.Errorf("notice %q, want %q…", notices[i], w)
		}
	}
	if sent == nil || sent.Text != "see attached" || len(sent.Attachments) != 1 || sent.PlatformID != "C1:800.1" {
		t.Fatalf("sent %+v", sent)
	}
	att := sent.Attachments[0]
	data, err := os.ReadFile(att.Path)
	if err != nil || string(data) != "hello files" || att.Name != "re port.txt" || att.Size != 11 || att.Mime != "text/plain" {
		t.Errorf("attachment %+v holds %q (%v)", att, data, err)
	}
	// The copy in parley's store of files, named by its content.
	if dir := a.opts.Files.(*files.Store).Dir(); filepath.Dir(att.Path) != dir || filepath.Base(att.Path) != att.Digest+".txt" {
		t.Errorf("stored at %s, want %s/<digest>.txt", att.Path, dir)
	}

	// A file larger than it said is cut off, not stored.
	liar := map[string]any{"id": "F5", "name": "liar.bin", "size": 10, "url_private_download": api.fileURL("F5", make([]byte, 2<<10))}
	h2 := newRecorder("U1")
	if err := a.onEvent(context.Background(), h2, event(t, fileShare(t, "", liar))); err != nil {
		t.Fatal(err)
	}
	if cmds := h2.commands(); len(cmds) != 1 || !strings.Contains(cmds[0].Text, "larger than parley takes") {
		t.Errorf("commands %q, want one notice", shows(cmds))
	}
}
