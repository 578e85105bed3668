//go:build unix && !linux

package mcp

import (
	"errors"
	"os"
	"syscall"
)

// openPath opens p for reading without following a final symlink and
// without blocking on a FIFO; the caller's look at the opened file refuses
// anything but a regular file.
func openPath(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, errSymlink
	}
	return f, err
}

// readable is the file of h again, open for reading.
func readable(h *os.File, _ string) (*os.File, error) {
	fd, err := syscall.Dup(int(h.Fd()))
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), h.Name()), nil
}
