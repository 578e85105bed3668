package httpguard

import (
	"net"

	"golang.org/x/sys/unix"
)

// unacked is how many bytes written to c its peer has not acknowledged
// yet, sent or not: SIOCOUTQ, which Linux counts from the oldest byte not
// acknowledged (SIOCOUTQNSD counts only those not sent yet), tcp(7):
// https://man7.org/linux/man-pages/man7/tcp.7.html.
func unacked(c *net.TCPConn) (int, bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}
