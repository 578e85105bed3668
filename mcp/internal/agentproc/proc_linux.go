//go:build linux

package agentproc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// Supported says whether this system can run agent processes under these
// rules: finding and stopping them reads Linux's /proc.
func Supported() bool { return true }

// SysProcAttr puts an agent in a process group of its own, so stopping and
// reaping reach the tools and MCP servers it starts too (they survive a
// kill of the agent alone); Pdeathsig is a second line for when parley
// dies without stopping it.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// SignalGroup sends sig to process group pgid.
func SignalGroup(pgid int, sig syscall.Signal) { syscall.Kill(-pgid, sig) }

// WaitExited blocks until pid, a child of this process, exited, without
// reaping it (WNOWAIT): until reaped it holds its pid and group id.
func WaitExited(pid int) {
	const pPID = 1
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

// HasMarker says whether pid's environment holds marker: the variable
// (NAME=random id, see NewMarker) parley gave one agent process, inherited
// by everything it starts. An agent may start its commands in sessions
// (and process groups) of their own, as Claude Code does with each Bash
// command, so this, not the group, is what finds them all.
func HasMarker(pid int, marker string) bool {
	if marker == "" {
		return false
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if string(kv) == marker {
			return true
		}
	}
	return false
}

// Marked lists the live processes carrying marker.
func Marked(marker string) []int {
	if marker == "" {
		return nil
	}
	var out []int
	eachProcess(func(pid int, st procStat) {
		if HasMarker(pid, marker) {
			out = append(out, pid)
		}
	})
	return out
}

// SignalMarked sends sig to every process carrying marker. Each is opened
// (a pidfd) before its marker is checked, so a pid given to another process
// meanwhile is never signalled.
func SignalMarked(marker string, sig syscall.Signal) {
	for _, pid := range Marked(marker) {
		proc, err := os.FindProcess(pid)
		if err != nil {
			continue
		}
		if HasMarker(pid, marker) {
			proc.Signal(sig)
		}
		proc.Release()
	}
}

// GroupMembers lists the live (not zombie) processes of process group pgid.
func GroupMembers(pgid int) []int {
	var out []int
	eachProcess(func(pid int, st procStat) {
		if st.pgrp == pgid {
			out = append(out, pid)
		}
	})
	return out
}

// eachProcess calls f for every live (not zombie) process.
func eachProcess(f func(pid int, st procStat)) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.state == "Z" {
			continue
		}
		f(pid, st)
	}
}

// Live says whether pid is a live process, not a zombie.
func Live(pid int) bool {
	st, err := readStat(pid)
	return err == nil && st.state != "Z"
}

type procStat struct {
	state string
	pgrp  int
	start uint64
}

// readStat reads /proc/PID/stat. The command name (field 2) may hold
// spaces and parentheses, so the fields are counted after its last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("agentproc: /proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), f[2] field 5 (pgrp), f[19] field 22 (starttime).
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("agentproc: /proc/%d/stat: short", pid)
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return procStat{}, fmt.Errorf("agentproc: /proc/%d/stat: %w", pid, err)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("agentproc: /proc/%d/stat: %w", pid, err)
	}
	return procStat{state: f[0], pgrp: pgrp, start: start}, nil
}

// ProcStart is the process's start time in clock ticks since boot: with
// the pid it names one process for good.
func ProcStart(pid int) (uint64, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, fmt.Errorf("agentproc: start time of %d: %w", pid, err)
	}
	return st.start, nil
}
