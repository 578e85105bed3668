//go:build unix

package files

import (
	"os"
	"syscall"
)

// openFlags open a copy for reading without following a symlink put in
// its place and without blocking on a FIFO.
const openFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
