//go:build unix

package bolt

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes the exclusive flock(2) bbolt takes on unix systems, without
// waiting: errLocked when another open file holds it.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

// shareFile takes a shared flock(2) on f without waiting: errLocked while
// a writer (a running parley, which holds bbolt's exclusive lock) has the
// file. Readers share it.
func shareFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
