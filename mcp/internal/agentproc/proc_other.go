//go:build !linux

package agentproc

import (
	"errors"
	"syscall"
)

// Everything that finds and stops processes reads Linux's /proc and uses
// its waitid and Pdeathsig; elsewhere drivers refuse to start agents
// (Supported is false) and parley works as a channel only.

func Supported() bool { return false }

func SysProcAttr() *syscall.SysProcAttr { return nil }

func SignalGroup(int, syscall.Signal) {}

func WaitExited(int) {}

func ProcStart(int) (uint64, error) { return 0, errors.New("agentproc: no /proc") }

func GroupMembers(int) []int { return nil }

func HasMarker(int, string) bool { return false }

func Marked(string) []int { return nil }

func SignalMarked(string, syscall.Signal) {}

func Live(int) bool { return false }
