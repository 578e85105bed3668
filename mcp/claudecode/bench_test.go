//go:build linux

package claudecode

import (
	"bytes"
	"os/exec"
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
)

// BenchmarkTurn compares the two ways of running Claude Code for a chat:
// a turn on a warm long-lived process (stream-json on stdin, what the
// driver does) against a turn as `claude -p --resume` per turn (a process
// start each time). The fake model answers at once, so the figures are the
// CLI's and the driver's own time per turn.
//
//	go test -run '^$' -bench BenchmarkTurn -benchtime 20x ./mcp/claudecode
func BenchmarkTurn(b *testing.B) {
	b.Run("warm", benchWarm)
	b.Run("resume-per-turn", benchResume)
	b.Run("driver-start-resume", benchDriverCold)
}

// benchDriverCold is the driver's own cold path, what a session whose idle
// process was stopped pays: Start with resume, one turn, Stop.
func benchDriverCold(b *testing.B) {
	_, opts := benchHarness(b)
	r := NewRunner(opts)
	conv := newUUID()
	resume := false
	b.ResetTimer()
	for b.Loop() {
		p, err := r.Start(b.Context(), "bench", conv, resume)
		if err != nil {
			b.Fatal(err)
		}
		resume = true
		if err := p.Send(b.Context(), "hello"); err != nil {
			b.Fatal(err)
		}
		for e := range p.Events() {
			if _, ok := e.(Result); ok {
				break
			}
		}
		p.Stop()
	}
}

func benchHarness(b *testing.B) (*claudetest.API, Options) {
	cli := claudetest.CLI(b)
	api := claudetest.NewAPI(b)
	return api, Options{
		Command:  cli,
		Workdir:  b.TempDir(),
		Env:      []string{},
		ExtraEnv: claudetest.Env(b, api.URL),
		StateDir: b.TempDir(),
	}
}

func benchWarm(b *testing.B) {
	_, opts := benchHarness(b)
	p, err := NewRunner(opts).Start(b.Context(), "bench", newUUID(), false)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop()
	var toDelta time.Duration
	b.ResetTimer()
	for b.Loop() {
		sent := time.Now()
		if err := p.Send(b.Context(), "hello"); err != nil {
			b.Fatal(err)
		}
		seen := false
		for e := range p.Events() {
			if _, ok := e.(TextDelta); ok && !seen {
				seen = true
				toDelta += time.Since(sent)
			}
			if r, ok := e.(Result); ok {
				if r.IsError {
					b.Fatalf("turn failed: %+v", r)
				}
				break
			}
		}
	}
	b.ReportMetric(float64(toDelta.Milliseconds())/float64(b.N), "ms-to-first-delta/op")
}

func benchResume(b *testing.B) {
	_, opts := benchHarness(b)
	conv := newUUID()
	first := true
	b.ResetTimer()
	for b.Loop() {
		args := []string{"-p", "hello", "--output-format", "stream-json", "--verbose"}
		if first {
			args = append(args, "--session-id", conv)
		} else {
			args = append(args, "--resume", conv)
		}
		first = false
		cmd := exec.Command(opts.Command, args...)
		cmd.Dir = opts.Workdir
		cmd.Env = opts.ExtraEnv
		out, err := cmd.Output()
		if err != nil || !bytes.Contains(out, []byte(`"subtype":"success"`)) {
			b.Fatalf("turn: %v\n%s", err, out)
		}
	}
}
