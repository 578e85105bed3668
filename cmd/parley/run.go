package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/mcp"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version or VCS revision from the build info is used.
var version = ""

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the daemon failed while running
	exitUsage  = 2 // bad arguments or configuration
)

const usage = `parley puts AI agent sessions in front of people where they already chat.

Usage:
  parley serve [--config FILE] [--data-dir DIR] [--listen ADDR]
  parley mcp [--config FILE] [--url URL] [--token TOKEN] [--session ID]
  parley mcp --channel [--config FILE] [--url URL] [--token TOKEN] [--session ID | --title T]
  parley pairing list|approve CODE|deny CODE [--config FILE] [--url URL] [--token TOKEN]
  parley doctor [--config FILE] [--data-dir DIR] [--listen ADDR] [--json]
  parley init [PATH]
  parley migrate --from DATA_DIR [--config FILE]
  parley backup [FILE] [--force] [--config FILE] [--data-dir DIR] [--url URL] [--token TOKEN]
  parley restore FILE [--config FILE] [--data-dir DIR]
  parley service install [--user|--system] [--config FILE] [--dry-run] [--force]
  parley version

Every configuration key can also be set with an environment variable
PARLEY_<SECTION>_<KEY>, e.g. PARLEY_HTTP_LISTEN or PARLEY_LOG_FORMAT.
`

// Run runs the parley command line with args (without the program name) and
// returns the process exit code. ctx ending stops a running daemon
// gracefully.
func Run(ctx context.Context, args, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return serveCmd(ctx, args[1:], env, stderr)
	case "mcp":
		return stdioProxy(ctx, args[1:], env, stdin, stdout, stderr)
	case "pairing":
		return pairingCmd(ctx, args[1:], env, stdout, stderr)
	case "doctor":
		return doctor(ctx, args[1:], env, stdout, stderr)
	case "init":
		return initConfig(args[1:], env, stdout, stderr)
	case "migrate":
		return migrateCmd(ctx, args[1:], env, stdout, stderr)
	case "backup":
		return backupCmd(ctx, args[1:], env, stdout, stderr)
	case "restore":
		return restoreCmd(ctx, args[1:], env, stdout, stderr)
	case "service":
		return service(args[1:], env, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "parley", Version())
		return exitOK
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "parley: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// Version is parley's version.
func Version() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel-" + s.Value[:12]
		}
	}
	return "devel"
}

// serveCmd is parley serve: the daemon, configured from the file, the
// environment and the flags, until ctx ends.
func serveCmd(ctx context.Context, args, env []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("parley serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "TOML configuration `file` (default: none; PARLEY_CONFIG)")
	dataDir := fs.String("data-dir", "", "data `directory` (PARLEY_DATA_DIR)")
	listen := fs.String("listen", "", "HTTP listen `address` (PARLEY_HTTP_LISTEN, default 127.0.0.1:8765)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "parley serve: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *configPath == "" {
		*configPath = lookup(env, "PARLEY_CONFIG")
	}
	// Flags win over the environment and the file: pass them on as the
	// environment variables they stand for, so they are validated alike.
	if *dataDir != "" {
		env = append(env, "PARLEY_DATA_DIR="+*dataDir)
	}
	if *listen != "" {
		env = append(env, "PARLEY_HTTP_LISTEN="+*listen)
	}
	cfg, err := loadConfig(*configPath, env)
	if err != nil {
		fmt.Fprintf(stderr, "parley: invalid configuration:\n%s\n", indent(err.Error()))
		return exitUsage
	}
	log := newLogger(cfg.Log, stderr)
	for _, name := range config.UnknownEnv(without(without(env, "PARLEY_CONFIG"), mcp.AgentTokenEnv), platforms.Known(platforms.All())) {
		log.Warn("unknown environment variable ignored", "name", name)
	}
	// The checks doctor makes of the address, the data directory and the
	// transcription endpoint, so that serve stops on the same findings.
	// The platforms are not among them: the daemon starts each with its
	// check, and one that is down is retried while the rest serves.
	// Transcription is optional to a running parley: a failure there is
	// only a warning.
	stop := false
	for _, f := range (&checkup{cfg: cfg, serving: true}).preflight(ctx) {
		switch {
		case f.OK:
		case f.Check == "transcription":
			log.Warn("voice messages will not be transcribed", "problem", f.Problem, "fix", f.Fix)
		default:
			log.Error("cannot start", "check", f.Check, "problem", f.Problem, "fix", f.Fix)
			stop = true
		}
	}
	if stop {
		return exitUsage
	}
	m := &serve.Main{Config: cfg, Logger: log, ConfigPath: *configPath, Version: Version(), Platforms: platforms.All()}
	if err := m.Open(ctx); err != nil {
		log.Error("start failed", "err", err)
		return exitUsage
	}
	defer m.Close()
	for _, f := range openFiles(*configPath, cfg) {
		log.Warn("open to other users", "check", f.Check, "problem", f.Problem, "fix", f.Fix)
	}
	if err := m.Run(ctx); err != nil {
		log.Error("stopped with an error", "err", err)
		return exitFailed
	}
	return exitOK
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.SlogLevel()}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func lookup(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

func without(env []string, key string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
