package web_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// esClient reads /api/events as EventSource does: when a stream ends it
// connects again with Last-Event-ID, the last id the stream gave (an id
// alone in a message counts) — but only when the test says so (resume),
// so that the test decides what happens between two streams.
type esClient struct {
	t      testing.TB
	url    string
	client *http.Client
	// events are the messages with an id of the log (not "reconnect",
	// "resync", "agents" or states), from every stream in turn.
	events chan frame
	// ended has, for each stream that ended, what it sent.
	ended  chan streamLog
	resume chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// streamLog is what one stream sent, in order.
type streamLog struct {
	frames []frame // every message with data, of every kind
	retry  string  // its "retry:" field
	lastID string  // Last-Event-ID for the next stream
	err    error   // how the body ended: nil when in good order
	status int
}

// kinds is the event types of the stream's messages.
func (l streamLog) kinds() []string {
	k := make([]string, len(l.frames))
	for i, f := range l.frames {
		k[i] = f.Event
	}
	return k
}

func (s *stack) es(query string) *esClient {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &esClient{t: s.t, url: s.srv.URL + "/api/events" + query, client: s.srv.Client(),
		events: make(chan frame, 10000), ended: make(chan streamLog, 100), resume: make(chan struct{}),
		cancel: cancel, done: make(chan struct{})}
	go c.run(ctx)
	s.t.Cleanup(func() { cancel(); <-c.done })
	return c
}

func (c *esClient) run(ctx context.Context) {
	defer close(c.done)
	lastID := ""
	for {
		l := c.stream(ctx, lastID)
		lastID = l.lastID
		select {
		case c.ended <- l:
		case <-ctx.Done():
			return
		}
		select {
		case <-c.resume:
		case <-ctx.Done():
			return
		}
	}
}

// stream reads one response to its end.
func (c *esClient) stream(ctx context.Context, lastID string) streamLog {
	l := streamLog{lastID: lastID}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		l.err = err
		return l
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		l.err = err
		return l
	}
	defer resp.Body.Close()
	l.status = resp.StatusCode
	// The event stream interpretation of the HTML standard: the id
	// buffer outlives a message, and sets Last-Event-ID at each blank
	// line, data or not.
	br := bufio.NewReaderSize(resp.Body, 1<<16)
	var f frame
	var data []string
	idBuf := lastID
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err != io.EOF || line != "" {
				l.err = err
			}
			return l
		}
		line = strings.TrimSuffix(line, "\n")
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			l.lastID = idBuf
			if len(data) > 0 {
				f.Data = strings.Join(data, "\n")
				l.frames = append(l.frames, f)
				if f.ID != "" && f.Event != "reconnect" && f.Event != "resync" {
					c.events <- f
				}
			}
			f, data = frame{}, nil
		case field == "":
			// a comment
		case field == "id":
			f.ID, idBuf = value, value
		case field == "event":
			f.Event = value
		case field == "data":
			data = append(data, value)
		case field == "retry":
			l.retry = value
		}
	}
}

// next is the next stream's end.
func (c *esClient) next() streamLog {
	c.t.Helper()
	select {
	case l := <-c.ended:
		return l
	case <-time.After(time.Minute):
		c.t.Fatal("no stream ended within a minute")
		return streamLog{}
	}
}

// again lets the client connect again.
func (c *esClient) again() {
	select {
	case c.resume <- struct{}{}:
	case <-c.done:
	}
}

// await waits for an event of kind.
func (c *esClient) await(kind core.EventKind) frame {
	c.t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case f := <-c.events:
			if f.Event == string(kind) {
				return f
			}
		case <-deadline:
			c.t.Fatalf("no %s event within a minute", kind)
		}
	}
}
