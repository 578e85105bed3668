package commands_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
)

// TestLogsWhatAnOperatorAsksAbout: sessions created and closed at info
// level, one debug line per message in and out, and never the content.
func TestLogsWhatAnOperatorAsksAbout(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level,
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey || a.Key == "session" {
						return slog.Attr{}
					}
					return a
				}}))
			e := newEnv(t, commands.Options{Logger: log})
			id := e.newSession()
			e.handle(msg(id, "telegram", "the secret plan"))
			e.handle(core.Command{Kind: core.AssistantPost, Session: id, Origin: core.OriginMCP, Text: "the secret answer"})
			e.handle(core.Command{Kind: core.Close, Session: id, Origin: "telegram"})
			want := []string{
				`level=INFO msg="session created" origin=api`,
				`level=DEBUG msg="message in" origin=telegram kind=human_message bytes=15`,
				`level=DEBUG msg="message out" origin=mcp kind=assistant_message bytes=17`,
				`level=DEBUG msg="message in" origin=telegram kind=human_message bytes=5`, // the /close itself
				`level=INFO msg="session closed" origin=telegram`,
			}
			var got []string
			for line := range strings.Lines(buf.String()) {
				line = strings.TrimSpace(line)
				if strings.Contains(line, `msg="session `) || strings.Contains(line, `msg="message `) {
					got = append(got, line)
				}
			}
			var expected []string
			for _, w := range want {
				if level == slog.LevelDebug || strings.HasPrefix(w, "level=INFO") {
					expected = append(expected, w)
				}
			}
			if strings.Join(got, "\n") != strings.Join(expected, "\n") {
				t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(expected, "\n"))
			}
			if strings.Contains(buf.String(), "secret") {
				t.Errorf("the log holds message content:\n%s", buf.String())
			}
		})
	}
}
