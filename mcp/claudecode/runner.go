package claudecode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/parley-chat/parley/mcp/internal/agentproc"
)

// Options configure a Runner.
type Options struct {
	// Command is the Claude Code binary, a path or a name looked up on
	// PATH; default "claude".
	Command string
	// Args are extra arguments, after parley's own.
	Args []string
	// Workdir is the process's working directory; empty: parley's own.
	Workdir string
	// CommandKey is where people set Command, for the Problem of a
	// missing one ("[agents.cc] command (PARLEY_AGENTS_CC_COMMAND)");
	// default: [agent]'s.
	CommandKey string
	// Env is the base environment (nil: os.Environ()). Every CLAUDE*
	// variable is stripped from it: parley running inside Claude Code must
	// not hand its own session's settings to the agents it runs; so is
	// every PARLEY_* variable, parley's own configuration (its [http]
	// token among them).
	Env []string
	// ExtraEnv is appended after stripping ([agent] env): the operator's
	// own settings, CLAUDE* allowed here.
	ExtraEnv []string
	// StateDir holds the pidfiles and per-process TMPDIRs (data_dir/agents).
	StateDir string
	// AskPermissions passes --permission-prompt-tool stdio: every
	// permission prompt becomes a PermissionRequest event, answered with
	// Process.Answer.
	AskPermissions bool
	// Logger receives what the processes print on stderr (debug) and how
	// they end; nil discards.
	Logger *slog.Logger
}

// Runner starts Claude Code processes and keeps track of them, on disk too,
// so that a later run can stop what a crashed one left behind.
type Runner struct {
	opts Options
	log  *slog.Logger

	mu   sync.Mutex
	live map[string]*Process // by key
}

// NewRunner returns a Runner with opts; it starts nothing.
func NewRunner(opts Options) *Runner {
	if opts.Command == "" {
		opts.Command = "claude"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{opts: opts, log: log, live: map[string]*Process{}}
}

// keyPattern keeps keys usable as file names in StateDir.
var keyPattern = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$`)

// Start starts one long-lived process for conversation (a UUID): `-p
// --input-format stream-json --output-format stream-json --verbose
// --include-partial-messages`, plus --session-id conversation or, with
// resume, --resume conversation. key (a session id, file-name safe) names
// its pidfile and its own TMPDIR under StateDir; one key runs one process
// at a time, and a process a previous run left for key is stopped first.
//
// Start returns once the process answered the control protocol's
// initialize request, so a process it returns is ready for Send. Errors:
// ErrNoConversation when resume was asked and Claude Code has no
// conversation by that id (a process killed before its first turn began
// leaves none: start it afresh with resume=false); a *Problem when the command cannot run or
// cannot log in; ctx's error when ctx ended first (the process is stopped).
func (r *Runner) Start(ctx context.Context, key, conversation string, resume bool) (*Process, error) {
	return r.start(ctx, key, conversation, resume, nil)
}

// start is Start with an MCP configuration for the process (--mcp-config,
// see Driver): written into the process's own TMPDIR, mode 0600, before it
// starts; nil for none.
func (r *Runner) start(ctx context.Context, key, conversation string, resume bool, mcpConfig []byte) (*Process, error) {
	if !keyPattern.MatchString(key) {
		return nil, fmt.Errorf("claudecode: key %q is not a file-name-safe id", key)
	}
	if conversation == "" || strings.HasPrefix(conversation, "-") {
		return nil, fmt.Errorf("claudecode: conversation id %q is not a UUID", conversation)
	}
	if r.opts.StateDir == "" {
		return nil, errors.New("claudecode: no StateDir")
	}
	if !agentproc.Supported() {
		return nil, &Problem{
			Cause: "parley runs Claude Code only on Linux",
			Fix:   "run parley on Linux, or run Claude Code yourself with parley as its channel (parley mcp --channel)",
		}
	}
	if err := checkWorkdir(r.opts.Workdir); err != nil {
		return nil, err
	}
	r.mu.Lock()
	if old := r.live[key]; old != nil {
		r.mu.Unlock()
		return nil, fmt.Errorf("claudecode: a process for %s is already running", key)
	}
	p := newProcess(r, key, conversation)
	p.mcpConfig = mcpConfig
	r.live[key] = p
	r.mu.Unlock()

	// A process a previous run left for this key would race the new one
	// on the same transcript: stop it first.
	if _, err := os.Stat(r.pidfile(key)); err == nil {
		if _, err := r.reap(r.pidfile(key), key); err != nil {
			r.forget(p)
			return nil, err
		}
	}

	if err := p.start(r.command(conversation, resume, p.mcpConfigPath()), r.env(p.tmpdir, p.marker)); err != nil {
		r.forget(p)
		return nil, err
	}
	if err := p.initialize(ctx); err != nil {
		p.Stop()
		if errors.Is(p.Err(), ErrNoConversation) || isProblem(p.Err()) {
			return nil, p.Err()
		}
		return nil, err
	}
	return p, nil
}

func isProblem(err error) bool {
	var pr *Problem
	return errors.As(err, &pr)
}

func (r *Runner) forget(p *Process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live[p.key] == p {
		delete(r.live, p.key)
	}
}

// command is the process's command line. mcpConfig, when set, is the file
// of parley's own MCP server, whose tools are allowed without a prompt.
// Both options take several values, so they come before the single-valued
// ones: a value after them is never taken for theirs.
func (r *Runner) command(conversation string, resume bool, mcpConfig string) *exec.Cmd {
	args := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json",
		"--verbose", "--include-partial-messages"}
	if mcpConfig != "" {
		args = append(args, "--mcp-config", mcpConfig, "--allowedTools", "mcp__"+toolsServer)
	}
	if r.opts.AskPermissions {
		args = append(args, "--permission-prompt-tool", "stdio")
	}
	if resume {
		args = append(args, "--resume", conversation)
	} else {
		args = append(args, "--session-id", conversation)
	}
	args = append(args, r.opts.Args...)
	cmd := exec.Command(r.opts.Command, args...)
	cmd.Dir = r.opts.Workdir
	cmd.SysProcAttr = agentproc.SysProcAttr()
	return cmd
}

// env builds the process's environment: the base without CLAUDE* and
// PARLEY_* (and without TMPDIR), ExtraEnv, and its own TMPDIR and marker
// last so nothing overrides them.
func (r *Runner) env(tmpdir, marker string) []string {
	base := r.opts.Env
	if base == nil {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+len(r.opts.ExtraEnv)+1)
	for _, kv := range base {
		// parley's own variables configure parley: PARLEY_HTTP_TOKEN
		// would open its whole API to the agent, which gets its
		// session's credential instead (agent.Tools).
		if strings.HasPrefix(kv, "CLAUDE") || strings.HasPrefix(kv, "PARLEY_") || strings.HasPrefix(kv, "TMPDIR=") {
			continue
		}
		env = append(env, kv)
	}
	for _, kv := range r.opts.ExtraEnv {
		if !strings.HasPrefix(kv, "TMPDIR=") && !strings.HasPrefix(kv, markerVar+"=") {
			env = append(env, kv)
		}
	}
	return append(env, "TMPDIR="+tmpdir, marker)
}

func (r *Runner) tmpdir(key string) string  { return filepath.Join(r.opts.StateDir, "tmp", key) }
func (r *Runner) pidfile(key string) string { return filepath.Join(r.opts.StateDir, key+".pid") }

// markerVar names the variable each process gets a random value of
// (agentproc.NewMarker); every process it starts inherits it, which is how
// they are found. Unlike TMPDIR it is unique per process, not per key, so
// a process stopping never touches its successor on the same key.
const markerVar = "PARLEY_CLAUDECODE_RUN"

func (r *Runner) writePidfile(key string, rec agentproc.Record) error {
	return agentproc.WritePidfile(r.pidfile(key), rec)
}
