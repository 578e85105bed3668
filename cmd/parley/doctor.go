package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"reflect"
	"strings"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/mcp"
)

// doctor is `parley doctor [--config FILE] [--data-dir DIR] [--listen
// ADDR] [--json]`: it checks what `parley serve` needs, with the same
// configuration and flags, and prints one finding
// per check — what is wrong and the exact fix — instead of stopping at the
// first problem as serve does. The exit status is 1 when any check failed.
//
// The checks, in order (checkup.run): the configuration loads and is
// valid (one finding per problem: Load names the key and the fix); the
// data directory; the PostgreSQL database of [store] url, when it is set
// (doctor_store.go); the age of the newest backup in [store] backup_dir,
// when it is set (doctor_backup.go: a day old or none fails); the listen
// address; every enabled platform, through the
// very code serve starts it with (serve.Main.BuildAdapters: build the adapter,
// then its Check, so a platform added to the table is checked without code
// here); the transcription endpoint; the agent parley runs for each
// session, when [agent] kind names one (its command runs, its version, its
// login: doctor_agent.go); and, when a parley already serves the address,
// an MCP client's initialize and tools/list.
//
// Every failed finding has a fix: the one its error carries
// (core.WithFix), or, for an error whose message says it (the
// configuration's and most of the adapters' are written that way), the
// general one of its check. When a parley already serves the address, a
// platform it reports down (its /api/health) is a finding too.
func doctor(ctx context.Context, args, env []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("parley doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "TOML configuration `file` (default: none; PARLEY_CONFIG)")
	dataDir := fs.String("data-dir", "", "data `directory`, as given to parley serve (PARLEY_DATA_DIR)")
	listen := fs.String("listen", "", "HTTP listen `address`, as given to parley serve (PARLEY_HTTP_LISTEN)")
	asJSON := fs.Bool("json", false, "print the findings as a JSON list of {check, ok, problem, fix}")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	// The flags stand for their variables, as in serve.
	if *dataDir != "" {
		env = append(env, "PARLEY_DATA_DIR="+*dataDir)
	}
	if *listen != "" {
		env = append(env, "PARLEY_HTTP_LISTEN="+*listen)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "parley doctor: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *configPath == "" {
		*configPath = lookup(env, "PARLEY_CONFIG")
	}
	var findings []finding
	cfg, err := loadConfig(*configPath, env)
	if err != nil {
		for _, e := range splitErr(err) {
			f := failed("config", e)
			if errors.Is(e, iofs.ErrNotExist) {
				f.Fix = "write one with parley init " + *configPath + ", or give another --config"
			}
			findings = append(findings, f)
		}
		findings = append(findings, finding{Check: "checks", Problem: "the other checks did not run: they need a valid configuration",
			Fix: "fix the configuration as above, then run parley doctor again"})
	} else {
		where := "no file: the defaults and PARLEY_* variables"
		if *configPath != "" {
			where = *configPath
		}
		findings = append(findings, finding{Check: "config", OK: true, Detail: "loaded " + where})
		if f, bad := exposedSecrets(*configPath, cfg); bad {
			findings = append(findings, f)
		}
		for _, name := range config.UnknownEnv(without(without(env, "PARLEY_CONFIG"), mcp.AgentTokenEnv), platforms.Known(platforms.All())) {
			findings = append(findings, finding{Check: "config", OK: true,
				Detail: "warning: " + name + " matches no key and is ignored (misspelt?)"})
		}
		findings = append(findings, (&checkup{cfg: cfg, table: platforms.All(), env: env}).run(ctx)...)
	}
	if err := report(stdout, findings, *asJSON); err != nil {
		fmt.Fprintf(stderr, "parley doctor: %v\n", err)
		return exitFailed
	}
	for _, f := range findings {
		if !f.OK {
			return exitFailed
		}
	}
	return exitOK
}

// finding is one result of a check.
type finding struct {
	// Check names what was checked: config, data_dir, listen, a
	// platform's name, transcription, mcp.
	Check string `json:"check"`
	OK    bool   `json:"ok"`
	// Problem says what is wrong; empty when OK.
	Problem string `json:"problem"`
	// Fix says what to do about it; empty only when OK.
	Fix string `json:"fix"`
	// Detail says what was found when OK ("served by a running parley").
	Detail string `json:"detail,omitempty"`
}

// exposedSecrets reports a configuration file that holds secrets (any
// key tagged secret is set, or a URL carries a password) and that every
// user of the machine may read. Group-readable is left alone: a system
// service reads its file through its group.
func exposedSecrets(path string, cfg config.Config) (finding, bool) {
	if path == "" || reflect.DeepEqual(cfg, cfg.Redacted()) {
		return finding{}, false
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm()&0o004 == 0 {
		return finding{}, false
	}
	return finding{Check: "config", Problem: fmt.Sprintf("%s holds secrets (tokens, keys) and every user of this machine can read it (mode %04o)", path, info.Mode().Perm()),
		Fix: fmt.Sprintf("chmod 600 %s (or 640, with the group the service runs as)", path)}, true
}

// fixer is an error that carries its fix apart from its message.
type fixer interface {
	error
	Fix() string
}

// failed makes a finding of an error. Its fix is the one the error
// carries (core.WithFix, or a Fix method); an error that only says its
// fix in its message (as the configuration's and most of the adapters'
// do) gets the general one of its check, so that no failed finding goes
// without a fix.
func failed(check string, err error) finding {
	fix := ""
	if fx, ok := errors.AsType[fixer](err); ok {
		fix = fx.Fix()
	}
	if fix == "" {
		fix = generalFix(check)
	}
	return finding{Check: check, Problem: err.Error(), Fix: fix}
}

// generalFix is the fix of a failed check whose error says what to do in
// its message.
func generalFix(check string) string {
	if check == "config" {
		return "correct what the problem names, in the configuration file or its PARLEY_* variable, then run parley doctor again"
	}
	return fmt.Sprintf("do what the problem says, in [%s] (PARLEY_%s_*) or on %s's side, then run parley doctor again; "+
		"parley serve meanwhile serves without %s and tries it again", check, strings.ToUpper(check), check, check)
}

// splitErr returns the errors joined in err (errors.Join), recursively, so
// that each becomes its own finding; any other error is itself. An error
// that wraps several with a message of its own (fmt.Errorf with two %w) is
// not a join: its message would be lost.
func splitErr(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	parts := j.Unwrap()
	msgs := make([]string, len(parts))
	for i, p := range parts {
		msgs[i] = p.Error()
	}
	if strings.Join(msgs, "\n") != err.Error() {
		return []error{err}
	}
	var out []error
	for _, p := range parts {
		out = append(out, splitErr(p)...)
	}
	return out
}

// report prints the findings, as text for people or as a JSON list.
func report(w io.Writer, findings []finding, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if findings == nil {
			findings = []finding{}
		}
		return enc.Encode(findings)
	}
	var b strings.Builder
	failures := 0
	for _, f := range findings {
		if f.OK {
			fmt.Fprintf(&b, "ok    %s: %s\n", f.Check, f.Detail)
			continue
		}
		failures++
		fmt.Fprintf(&b, "FAIL  %s: %s\n", f.Check, indentRest(f.Problem))
		if f.Fix != "" {
			fmt.Fprintf(&b, "      fix: %s\n", indentRest(f.Fix))
		}
	}
	switch failures {
	case 0:
		b.WriteString("\nAll checks passed.\n")
	case 1:
		b.WriteString("\n1 check failed.\n")
	default:
		fmt.Fprintf(&b, "\n%d checks failed.\n", failures)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// indentRest indents the continuation lines of a finding's text under its
// first.
func indentRest(s string) string {
	return strings.ReplaceAll(s, "\n", "\n      ")
}
