// Command parley is the daemon that puts AI agent sessions in front of
// people where they already chat.
//
//	parley serve [--config FILE] [--data-dir DIR] [--listen ADDR]
//	parley mcp [--config FILE] [--url URL] [--token TOKEN] [--session ID]
//	parley mcp --channel [--config FILE] [--url URL] [--token TOKEN] [--session ID | --title T]
//	parley pairing list|approve CODE|deny CODE
//	parley doctor [--config FILE] [--data-dir DIR] [--listen ADDR] [--json]
//	parley init [PATH]
//	parley migrate --from DATA_DIR [--config FILE]
//	parley backup [FILE] [--force] [--config FILE] [--data-dir DIR] [--url URL] [--token TOKEN]
//	parley restore FILE [--config FILE] [--data-dir DIR]
//	parley service install [--user|--system] [--config FILE] [--dry-run] [--force]
//	parley version
//
// Configuration comes from one TOML file, every key overridable by a
// PARLEY_<SECTION>_<KEY> environment variable; the flags override both.
// main only parses arguments, loads the configuration and hands it, with
// the one list of platforms (internal/platforms), to the wiring in
// internal/serve (serve.Main: Open, Run, Close). The end-to-end tests
// (internal/e2e) run that wiring in their own process, and this command,
// built, as child processes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(Run(ctx, os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr))
}
