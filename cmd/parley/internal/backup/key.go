package backup

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KeyFile is the name, in the data directory, of the key a request for a
// running parley's backup must carry (see the package documentation).
const KeyFile = "backup.key"

// WriteKey makes a new random key and writes it to dataDir's KeyFile,
// readable by its owner only, in place of the last one; parley serve
// calls it once it holds the database's lock, so only the parley running
// on the directory writes it.
func WriteKey(dataDir string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	key := hex.EncodeToString(b)
	f, err := os.CreateTemp(dataDir, ".backup-key-*.tmp")
	if err != nil {
		return "", fmt.Errorf("backup: key: %w", err)
	}
	_, err = f.WriteString(key + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dataDir, KeyFile))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("backup: key: %w", err)
	}
	return key, nil
}

// ReadKey reads dataDir's KeyFile.
func ReadKey(dataDir string) (string, error) {
	path := filepath.Join(dataDir, KeyFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s (the running parley writes it at start; run parley backup as the user parley runs as, with its data directory): %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}
