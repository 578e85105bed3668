//go:build linux

package mcp

import (
	"errors"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// noSymlinks opens with no symlink followed in any component of the path
// (openat2(2), Linux 5.6): the path was resolved before it was checked, so
// a symlink in it now was put there since.
var noSymlinks = unix.OpenHow{Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}

// openat2 opens p with flags and no symlink followed; on a kernel without
// openat2 (or a sandbox that refuses it) the final component alone is not
// followed (O_NOFOLLOW), and the caller's look at /proc/self/fd catches a
// directory swapped for a symlink.
func openat2(p string, flags int) (*os.File, error) {
	how := noSymlinks
	how.Flags = uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC)
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &how)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		fd, err = unix.Open(p, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, errSymlink
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// openPath opens p as a handle that reads nothing (O_PATH): opening it has
// no effect whatever p turns out to be (a FIFO, a device), and the caller
// looks at what it is before reading. A symlink as the final component
// opens the link itself, which is no regular file.
func openPath(p string) (*os.File, error) { return openat2(p, unix.O_PATH) }

// readable opens the file of the handle h, found regular, for reading:
// through /proc/self/fd, which reopens the very file h is, whatever p
// names now. Without /proc it opens p again as openPath did; the caller
// checks that this is the same file.
func readable(h *os.File, p string) (*os.File, error) {
	f, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(h.Fd())), os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == nil {
		return f, nil
	}
	return openat2(p, unix.O_RDONLY|unix.O_NONBLOCK)
}
