package main

import (
	"fmt"

	"os"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
)

// openFiles checks what parley keeps that other users of the machine could
// get into: the config file when it holds secrets (doctor's exposedSecrets:
// every user may read it; group-readable is how a system service reads
// it), and the data directory, which holds every conversation and received
// file, when group or others have any permission on it. serve warns of each
// once at start.
//
// They are warnings, and parley changes no permission itself: the data
// directory it creates is 0700 (daemon.Open), but one that exists was made
// by someone, perhaps open to a group on purpose (backups), and the config
// file is the operator's. Each finding names the chmod that fixes it.
func openFiles(configPath string, cfg config.Config) []finding {
	var out []finding
	if f, exposed := exposedSecrets(configPath, cfg); exposed {
		out = append(out, f)
	}
	if info, err := os.Stat(cfg.DataDir); err == nil && info.Mode().Perm()&0o077 != 0 {
		out = append(out, finding{Check: "data_dir",
			Problem: fmt.Sprintf("the data directory %s (conversations, received files) is open to other users (mode %04o)", cfg.DataDir, info.Mode().Perm()),
			Fix:     "chmod 700 " + cfg.DataDir})
	}
	return out
}
