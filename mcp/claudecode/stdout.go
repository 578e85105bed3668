package claudecode

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
)

// read turns stdout into events until it closes.
func (p *Process) read() {
	defer close(p.readDone)
	log := p.r.log.With("key", p.key, "pid", p.pgid)
	parse := newParser()
	br := bufio.NewReaderSize(p.stdout, 64*1024)
	for {
		// ReadBytes has no limit: the initialize answer and tool results
		// run to several MiB.
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			got, perr := parse.parse(b)
			if perr != nil {
				log.Debug("claudecode: skipped a line", "err", perr, "line", truncate(string(b), 200))
			}
			p.handle(got)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				log.Debug("claudecode: stdout", "err", err)
			}
			return
		}
	}
}

func (p *Process) handle(got parsed) {
	p.mu.Lock()
	if got.request != nil && got.request.Subtype == "can_use_tool" {
		p.pending[got.request.ID] = got.request.Input
	}
	if got.cancel != "" {
		delete(p.pending, got.cancel)
	}
	if got.response != nil {
		if ch := p.waiting[got.response.ID]; ch != nil {
			ch <- *got.response
		}
	}
	if got.noConversation {
		p.noConversation = true
	}
	newProblem := got.auth != "" && p.problem == nil
	if newProblem {
		p.problem = authProblem(got.auth)
	}
	p.mu.Unlock()
	if newProblem {
		// Claude Code retries a refused key for minutes: nothing will get
		// better, so end it now and say why.
		p.r.log.Warn("claudecode: "+p.problem.Cause, "key", p.key)
		p.kill()
	}
	if got.request != nil && got.request.Subtype != "can_use_tool" {
		// Claude Code waits for an answer to every control request; parley
		// registered no hooks or SDK MCP servers, so say so rather than
		// leave it waiting.
		go p.write(context.Background(), map[string]any{
			"type": "control_response",
			"response": map[string]any{"subtype": "error", "request_id": got.request.ID,
				"error": "parley does not handle " + got.request.Subtype},
		})
	}
	p.queue.Push(got.events...)
}

// stderrTail keeps the end of stderr for exit errors and logs each chunk.
type stderrTail struct{ p *Process }

func (s *stderrTail) Write(b []byte) (int, error) {
	s.p.r.log.Debug("claudecode: stderr", "key", s.p.key, "text", truncate(string(b), 1000))
	s.p.mu.Lock()
	s.p.stderr = append(s.p.stderr, b...)
	if over := len(s.p.stderr) - stderrKeep; over > 0 {
		s.p.stderr = append([]byte(nil), s.p.stderr[over:]...)
	}
	s.p.mu.Unlock()
	return len(b), nil
}
