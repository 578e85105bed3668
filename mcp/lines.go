package mcp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
)

// ReadLines reads newline-delimited JSON-RPC messages (MCP's stdio
// framing) from in and sends each non-blank one, trimmed, on lines, until
// in ends (nil) or ctx does (nil); a message longer than max bytes is an
// error. The stdio relay and the Claude Code channel read their stdin so.
func ReadLines(ctx context.Context, in io.Reader, max int, lines chan<- []byte) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > max {
			return fmt.Errorf("a message is longer than %d bytes", max)
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			select {
			case lines <- line:
			case <-ctx.Done():
				return nil
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// DebugOnly passes a library's log records on at debug level: mcp-go's
// transport logs what is detail for someone debugging a connection, not a
// message for parley's user.
func DebugOnly(h slog.Handler) slog.Handler { return debugOnly{h} }

type debugOnly struct{ h slog.Handler }

func (d debugOnly) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugOnly) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugOnly) WithAttrs(as []slog.Attr) slog.Handler { return debugOnly{d.h.WithAttrs(as)} }
func (d debugOnly) WithGroup(name string) slog.Handler    { return debugOnly{d.h.WithGroup(name)} }
