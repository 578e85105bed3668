// Package claudecode runs the Claude Code CLI headless, one long-lived
// process per conversation, and speaks its stream-json protocol: user turns
// in on stdin, events out on stdout, permission prompts and interrupts as
// control requests.
package claudecode
