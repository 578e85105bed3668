package main

import (
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
)

// openFile is a file or directory of parley's that other users of the
// machine can get into, and how to close it.
type openFile struct{ Problem, Fix string }

// openFiles checks the config file, when it holds secrets, and the data
// directory for permissions that let other users of the machine in: group
// or others may read (or write) them. serve warns of each once at start.
//
// They are warnings, and parley changes no permission itself: the data
// directory it creates is 0700 (daemon.Open), but one that exists was made
// by someone, maybe shared with a group on purpose (backups), and the
// config file is the operator's. The warning names the chmod that fixes it.
func openFiles(configPath, dataDir string) []openFile {
	var out []openFile
	if configPath != "" {
		if secrets := config.FileSecrets(configPath); len(secrets) > 0 {
			if perm, ok := openPerm(configPath); ok {
				out = append(out, openFile{
					Problem: fmt.Sprintf("the config file %s holds secrets (%s) and other users can read it (mode %04o)",
						configPath, strings.Join(secrets, ", "), perm),
					Fix: "chmod 600 " + configPath,
				})
			}
		}
	}
	if perm, ok := openPerm(dataDir); ok {
		out = append(out, openFile{
			Problem: fmt.Sprintf("the data directory %s (conversations, received files) is open to other users (mode %04o)", dataDir, perm),
			Fix:     "chmod 700 " + dataDir,
		})
	}
	return out
}

// openPerm returns the permission bits of path when group or others have
// any of them.
func openPerm(path string) (fs.FileMode, bool) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	perm := info.Mode().Perm()
	return perm, perm&0o077 != 0
}
