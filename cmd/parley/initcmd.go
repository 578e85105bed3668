package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
)

// initConfig is `parley init [PATH]`: it writes the commented example
// configuration (config.Example: every key, its description, its default
// and its variable) to PATH, or to stdout without one or with "-".
//
// It never overwrites: the file is created with O_EXCL, so an existing
// configuration — perhaps holding tokens — is left as it was, even if it
// appears between a check and the write. The file is made readable by its
// owner only, since the tokens a person adds to it are secrets.
func initConfig(args, env []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("parley init", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprintln(stderr, "Usage: parley init [PATH]\n\nWrites a commented example configuration to PATH, or to standard output.")
	}
	if err := fset.Parse(args); err != nil {
		return exitUsage
	}
	if fset.NArg() > 1 {
		fmt.Fprintf(stderr, "parley init: one PATH at most, got %d arguments\n", fset.NArg())
		return exitUsage
	}
	example := config.Example(env, platforms.Known(platforms.All()))
	path := fset.Arg(0)
	if path == "" || path == "-" {
		if _, err := stdout.Write(example); err != nil {
			fmt.Fprintf(stderr, "parley init: %v\n", err)
			return exitFailed
		}
		return exitOK
	}
	if err := writeNew(path, example, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("%w; it is left as it was: choose another path, or remove it first", err)
		}
		fmt.Fprintf(stderr, "parley init: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "parley init: wrote %s\nEdit it (at least one platform's token, chat and allowed users; [agent] kind = \"claude-code\", \"opencode\", \"codex\" or \"gemini\" to have parley run that agent for each session), then check it:\n  parley doctor --config %s\n", path, path)
	return exitOK
}

// writeNew creates path with data, failing with an error wrapping
// fs.ErrExist rather than replacing a file that exists. A failed write
// removes the partial file.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists: %w", path, fs.ErrExist)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}
