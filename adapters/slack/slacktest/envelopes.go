package slacktest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Envelope is one delivery attempt of a Socket Mode envelope.
type Envelope struct {
	ID           string // envelope_id, new for every attempt
	Type         string // "events_api", "slash_commands", "interactive"
	RetryAttempt int    // 0 for the first delivery
	// Sent is when the envelope was handed to a connection; Acked when
	// its ack arrived (zero when not acked).
	Sent, Acked time.Time
	Payload     json.RawMessage
	// AckPayload is the payload the ack carried (a slash command's
	// response), nil without one.
	AckPayload json.RawMessage
}

// maxRetries is how often an envelope not acked in time is redelivered
// before Slack gives up on it, as the Events API does.
const maxRetries = 3

// delivery is an envelope until it is acked or given up: its payload and
// its current attempt.
type delivery struct {
	typ     string
	payload json.RawMessage
	accepts bool   // accepts_response_payload
	attempt int    // retry_attempt of the current (or next) attempt
	reason  string // retry_reason
	id      string // envelope_id of the current attempt
	rec     int    // index of the current attempt in the record
	timer   *time.Timer
}

// socketState is the Socket Mode side of the server.
type socketState struct {
	conns   []*wsConn // open connections, oldest first
	opened  int
	tickets map[string]bool // unused tickets from apps.connections.open
	record  []Envelope
	pending map[string]*delivery // by the envelope_id of its current attempt
	queue   []*delivery          // waiting for a connection
}

func newSocketState() socketState {
	return socketState{tickets: map[string]bool{}, pending: map[string]*delivery{}}
}

// Envelopes returns every delivery attempt so far, in the order sent.
func (s *Server) Envelopes() []Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.sock.record)
	for i := range out {
		out[i].Payload = slices.Clone(out[i].Payload)
		out[i].AckPayload = slices.Clone(out[i].AckPayload)
	}
	return out
}

// enqueue queues a new envelope and sends it at once when a connection is
// open. Callers hold s.mu.
func (s *Server) enqueue(typ string, payload json.RawMessage) {
	if s.deliverHTTP(typ, payload) {
		return // the Events API over HTTP (eventsapi.go)
	}
	d := &delivery{typ: typ, payload: payload, accepts: typ == "slash_commands"}
	s.sock.queue = append(s.sock.queue, d)
	s.pump()
}

// pump sends the queued envelopes on the newest open connection that is
// not being closed, if there is one. Callers hold s.mu.
func (s *Server) pump() {
	c := s.liveConn()
	if c == nil {
		return
	}
	for _, d := range s.sock.queue {
		s.deliver(c, d)
	}
	s.sock.queue = nil
}

// deliver sends one attempt of d on c, with a new envelope id, and starts
// its ack deadline. Callers hold s.mu.
func (s *Server) deliver(c *wsConn, d *delivery) {
	d.id = newUUID()
	d.rec = len(s.sock.record)
	s.sock.record = append(s.sock.record, Envelope{ID: d.id, Type: d.typ, RetryAttempt: d.attempt, Sent: s.now(), Payload: d.payload})
	s.sock.pending[d.id] = d
	frame, err := json.Marshal(obj{
		"envelope_id": d.id, "payload": d.payload, "type": d.typ, "accepts_response_payload": d.accepts,
		"retry_attempt": d.attempt, "retry_reason": d.reason,
	})
	if err != nil {
		s.tb.Errorf("slacktest: encoding an envelope: %v", err)
		return
	}
	c.send(frame)
	id := d.id
	d.timer = time.AfterFunc(s.opts.AckTimeout, func() { s.ackTimedOut(d, id) })
	s.changed()
}

// ackTimedOut redelivers d when the attempt id is still not acked: with
// retry_attempt one higher, retry_reason "timeout" and a new envelope id,
// on the connection open then or on the next one. After maxRetries
// redeliveries it gives up, as Slack does.
func (s *Server) ackTimedOut(d *delivery, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed() || s.sock.pending[id] != d {
		return
	}
	delete(s.sock.pending, id)
	if d.attempt >= maxRetries {
		s.changed()
		return
	}
	d.attempt++
	d.reason = "timeout"
	s.sock.queue = append(s.sock.queue, d)
	s.pump()
	s.changed()
}

// ack records the ack of envelope id; acks of unknown ids or of earlier
// attempts are ignored, as Slack ignores them.
func (s *Server) ack(id string, payload json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.sock.pending[id]
	if d == nil {
		return
	}
	d.timer.Stop()
	delete(s.sock.pending, id)
	rec := &s.sock.record[d.rec]
	rec.Acked = s.now()
	if len(payload) > 0 && string(payload) != "null" {
		rec.AckPayload = slices.Clone(payload)
	}
	s.changed()
}

// closed reports whether the server has shut down. Callers hold s.mu.
func (s *Server) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// newUUID returns a random version 4 UUID, the shape of envelope ids.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
