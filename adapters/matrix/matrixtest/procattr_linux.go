package matrixtest

import "syscall"

// dieWithParent makes Linux kill Dendrite when the test binary dies without
// running its cleanups (a -timeout panic, a kill), so that no homeserver is
// left running.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
