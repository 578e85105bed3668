// Package claudecode runs the Claude Code CLI headless, one long-lived
// process per conversation, and speaks its stream-json protocol: user turns
// in on stdin, events out on stdout, permission prompts and interrupts as
// control requests. Driver is parley's agent.Driver of kind "claude-code":
// the orchestrator sees Claude Code only through package agent (driver.go
// says how its events map: what people read of a tool call, why a turn
// ended), and a Driver's conversations get parley's own MCP server, bound
// to their session, as --mcp-config with its tools allowed.
//
// # One warm process per conversation
//
// A Runner starts `claude -p --input-format stream-json --output-format
// stream-json --verbose --include-partial-messages` with --session-id (a new
// conversation) or --resume (an existing one) and keeps it for many turns:
// Process.Send writes {"type":"user",…} lines, and each turn prints
// system/init … result. Measured with BenchmarkTurn against an instant fake
// model, a turn on a warm process takes ~40 ms (first streamed text after
// ~38 ms), a turn as `claude -p --resume` per turn ~450 ms, nearly all of
// it the CLI's start-up; so processes stay warm, and a caller that stops
// idle ones pays the start once, on the next message.
//
// Start does the control protocol's initialize handshake before it
// returns. Claude Code answers it only after loading the conversation, and
// for a --resume of an id it has no transcript of it prints a result with
// "No conversation found…" and exits instead: that is ErrNoConversation (a
// process killed before its first turn began leaves no transcript, so the
// caller starts the conversation afresh; one killed later in that turn
// leaves the turn's message, but no answer, and --session-id then fails
// with "Session ID … is already in use": the caller resumes it). A process
// Start returns is ready for Send.
//
// # Events
//
// Stdout is parsed line by line by key, never by position (key order
// varies), without a line-length limit (the initialize answer and tool
// results run to MiB); lines of kinds parley does not use are skipped.
// stream_event text deltas become TextDelta, finished blocks Text and
// ToolUse, tool_result blocks ToolResult, system/api_retry APIRetry,
// result Result. Text blocks are numbered per turn across the model's
// messages, so a consumer can join them. A Bash result's tool_use_result
// is {stdout, stderr} on success (exit code 0) and "Error: Exit code N\n…"
// on failure (ExitCode N, the rest, stdout and stderr mixed, as Stderr).
// Text of sub-agents (parent_tool_use_id set) is not the turn's answer and
// is left out.
//
// # Permissions and interrupts
//
// With Options.AskPermissions the process gets --permission-prompt-tool
// stdio: each prompt is a can_use_tool control_request, reported as a
// PermissionRequest and answered with Process.Answer as a control_response
// ({"behavior":"allow","updatedInput":…} or {"behavior":"deny","message":…,
// "interrupt":…}). A denial's message is what the model reads as the
// call's error; with Interrupt the turn ends (TerminalReason
// "aborted_tools") and the process lives on. Process.Interrupt sends an
// interrupt control_request and waits for its acknowledgement (the turn
// ends with "aborted_streaming"); a prompt still waiting then is withdrawn
// with a control_cancel_request, reported as PermissionCancel. Control
// requests of other kinds are answered with an error at once, so Claude
// Code never waits on parley for something it did not register.
//
// # Processes, and what a crash leaves
//
// Each process runs in its own process group (Setpgid), with Pdeathsig
// SIGKILL as a second line should parley die without stopping it, with
// TMPDIR = StateDir/tmp/<key>, and with a variable PARLEY_CLAUDECODE_RUN
// of a random value that it and everything it starts inherit. Claude Code
// starts each Bash command in a session of its own, out of claude's group:
// the variable is what finds them (it is per process where TMPDIR is per
// key, so a stopping process never touches its successor). Stop closes
// stdin, sends SIGTERM to the group, SIGKILL after a grace; once claude
// exited (for whatever reason) the rest of its group and every process
// carrying its variable are killed, and the pidfile and the TMPDIR
// removed. A pidfile (pid, start time from /proc/PID/stat, the variable)
// is written after start, so ReapStale, after a crash of parley, stops
// only what is provably left by it: a group whose leader has the recorded
// start time or whose members carry the variable (a group id cannot be
// reused while a member lives), and processes carrying the variable, each
// signalled through a pidfd opened before its environment is checked. A
// pid given to a stranger is left alone. Start does the same for its own
// key first: two processes on one transcript race.
//
// The environment is the base (os.Environ by default) without any CLAUDE*
// variable (parley may itself run inside Claude Code, whose session
// variables must not leak into the agents it runs) and without any
// PARLEY_* one (parley's configuration: PARLEY_HTTP_TOKEN would open its
// whole API to the agent, which gets its session's credential instead),
// then Options.ExtraEnv
// (the operator's own, CLAUDE* allowed), then the TMPDIR and the variable.
//
// # Parley's own tools
//
// A process started with an MCP configuration (Driver: agent.Tools) gets
// it as a file in its own TMPDIR, written with mode 0600 before the
// process starts (it holds the session's credential; on the command line
// it would be readable by every user in /proc), passed as --mcp-config,
// with --allowedTools mcp__parley so that those tools ask nobody. Both
// options take several values, so they come before the others. 2.1.328
// connects to the server before its first model request.
//
// # Problems
//
// Failures people can fix are *Problem values (agent.Problem) with a cause and a fix: a
// command that is not installed or cannot run (from Start), credentials
// the API refuses (Claude Code retries a 401 for minutes: the driver ends
// the process at the first api_retry with status 401/403), no credentials
// at all ("Not logged in"). An API that cannot be reached or is overloaded
// is retried by Claude Code and reported as APIRetry events; how long to
// wait is the caller's decision.
//
// Finding and stopping processes reads Linux's /proc and uses waitid and
// Pdeathsig, so processes run on Linux only; elsewhere Start returns a
// Problem saying so (parley as a channel works everywhere).
//
// Checked against Claude Code 2.1.328 (claudetest.ClaudeCodeVersion); the
// recorded lines under testdata are its output.
package claudecode
