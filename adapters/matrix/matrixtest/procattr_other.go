//go:build !linux

package matrixtest

import "syscall"

// dieWithParent has no portable equivalent outside Linux: there a test
// binary killed before its cleanups leaves Dendrite running.
func dieWithParent() *syscall.SysProcAttr { return nil }
