//go:build !linux

package claudecode

import (
	"errors"
	"syscall"
)

// Everything that finds and stops processes reads Linux's /proc and uses
// its waitid and Pdeathsig; elsewhere Start says so instead.

func supported() error {
	return &Problem{
		Cause: "parley runs Claude Code only on Linux",
		Fix:   "run parley on Linux, or run Claude Code yourself with parley as its channel (parley mcp --channel)",
	}
}

func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(int, syscall.Signal) {}

func waitExited(int) {}

func procStart(int) (uint64, error) { return 0, errors.New("claudecode: no /proc") }

func groupMembers(int) []int { return nil }

func hasMarker(int, string) bool { return false }

func marked(string) []int { return nil }

func signalMarked(string, syscall.Signal) {}
