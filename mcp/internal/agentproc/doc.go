// Package agentproc runs agent processes so that nothing of them outlives
// parley, not even a crash of it: the mechanics the drivers of Claude Code
// (package claudecode) and of ACP agents (package acp) share.
//
// An agent runs in a process group of its own (Setpgid), with Pdeathsig
// SIGKILL as a second line should parley die without stopping it, with a
// TMPDIR of its own and a marker variable (NAME=random id, NewMarker) that
// it and everything it starts inherit: an agent may start commands in
// sessions of their own, out of its group, and the marker is what finds
// them. A pidfile (pid, start time from /proc/PID/stat, marker) is written
// once it started, so StopLeftover, after a crash of parley, stops only
// what is provably left by it: a group whose leader has the recorded start
// time or whose members carry the marker (a group id cannot be reused
// while a member lives), and processes carrying the marker, each signalled
// through a pidfd opened before its environment is checked. A pid given to
// a stranger is left alone.
//
// Proc.Stop closes stdin, sends SIGTERM to the group, SIGKILL after
// StopGrace; once the agent exited (for whatever reason) the rest of its
// group and every process carrying its marker are killed, and the pidfile
// and the TMPDIR removed (unless the pidfile already names a successor).
//
// Finding and stopping processes reads Linux's /proc and uses waitid and
// Pdeathsig: elsewhere Supported is false and drivers refuse to start
// agents.
package agentproc
