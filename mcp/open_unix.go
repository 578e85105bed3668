//go:build unix

package mcp

import (
	"os"
	"syscall"
)

// openNoFollow opens p for reading without following a final symlink and
// without blocking on a FIFO swapped in for the file.
func openNoFollow(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}
