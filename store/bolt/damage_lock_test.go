//go:build unix

package bolt

import (
	"bytes"
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestHeldFileIsInUseNotDamaged: the header pages of a file a writer
// holds are not read: a running parley rewrites them, and caught half
// written they would look damaged (TestBackupUnderLoad's `parley backup`
// once said a live database's "freelist page is of the wrong kind"). The
// writer is held here with its pages garbled, so reading them at all
// reports damage: every open of the held file is ErrInUse, and once it
// is let go the same file is reported damaged.
func TestHeldFileIsInUseNotDamaged(t *testing.T) {
	path, _ := filledDB(t)
	writer, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	if err := syscall.Flock(int(writer.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	// Both meta pages mid-write, as the writer could leave them for an
	// instant.
	if _, err := writer.WriteAt(bytes.Repeat([]byte{0xa5}, 2*4096), 0); err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	if _, err := BackupFile(context.Background(), path, &buf, 100*time.Millisecond); !errors.Is(err, ErrInUse) {
		t.Errorf("BackupFile of a held file: %v, want ErrInUse", err)
	}
	if _, err := Verify(context.Background(), path); !errors.Is(err, ErrInUse) {
		t.Errorf("Verify of a held file: %v, want ErrInUse", err)
	}
	if _, err := Open(path, Options{LockTimeout: 100 * time.Millisecond}); !errors.Is(err, ErrInUse) {
		t.Errorf("Open of a held file: %v, want ErrInUse", err)
	}

	if err := writer.Close(); err != nil {
		t.Fatal(err)
	}
	var damaged *DamagedError
	if _, err := BackupFile(context.Background(), path, &buf, 100*time.Millisecond); !errors.As(err, &damaged) {
		t.Errorf("BackupFile of the garbled file let go: %v, want a *DamagedError", err)
	}
}
