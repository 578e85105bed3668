//go:build !linux

package httpguard

import "net"

// unacked cannot be known here: Settled reports a stream settled at once.
func unacked(*net.TCPConn) (int, bool) { return 0, false }
