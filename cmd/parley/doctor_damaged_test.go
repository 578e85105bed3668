package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
)

// damagedDatabases are data files as a failing disk, a bad copy or a wrong
// path leave them, by name, made from a sound database with data.
func damagedDatabases(t *testing.T) map[string][]byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), daemon.DBFile)
	st, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 300 {
		sess, _, err := st.CreateSession(ctx, core.Session{Title: fmt.Sprint("session ", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Role: core.RoleUser,
			Mime: core.MimeMarkdown, Content: strings.Repeat("the build fails on main. ", 20)}}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(rnd.Uint32())
	}
	// Every page but the two meta pages zeroed: the header is sound, so
	// only a check of every page finds it.
	hollow := append([]byte(nil), whole...)
	clear(hollow[2*4096:])
	return map[string][]byte{
		"empty":             nil,
		"one byte":          whole[:1],
		"half a page":       whole[:2048],
		"one page":          whole[:4096],
		"cut in the middle": whole[:len(whole)/2],
		"random bytes":      garbage,
		"a PNG image":       append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), garbage...),
		"a text file":       []byte(strings.Repeat("[http]\nlisten = \"127.0.0.1:8766\"\n", 200)),
		"pages zeroed":      hollow,
	}
}

// TestDoctorDamagedDatabase: parley doctor reports a damaged data file as
// a failed data_dir finding that names the file and says the fix, and
// does not panic; parley serve refuses to start with the same words.
func TestDoctorDamagedDatabase(t *testing.T) {
	for name, content := range damagedDatabases(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, daemon.DBFile)
			if err := os.WriteFile(db, content, 0o600); err != nil {
				t.Fatal(err)
			}
			code, fs := runDoctor(t, "PARLEY_DATA_DIR="+dir)
			if code != exitFailed {
				t.Errorf("exit %d, want %d", code, exitFailed)
			}
			f := wantFinding(t, fs, "data_dir", false, db, "is damaged or not a parley database")
			if f.Fix != bolt.DamagedFix {
				t.Errorf("fix %q, want %q", f.Fix, bolt.DamagedFix)
			}

			var out, errOut bytes.Buffer
			code = Run(context.Background(), []string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0"}, nil, nil, &out, &errOut)
			if code != exitUsage {
				t.Errorf("serve exited %d, want %d: %s", code, exitUsage, errOut.String())
			}
			// "pages zeroed" passes the header check that serve
			// makes; serve then meets the damage as it reads.
			for _, want := range []string{db, "damaged"} {
				if !strings.Contains(errOut.String(), want) {
					t.Errorf("serve's log does not say %q: %s", want, errOut.String())
				}
			}
			if got, _ := os.ReadFile(db); !bytes.Equal(got, content) {
				t.Error("the file was changed")
			}
		})
	}
}
