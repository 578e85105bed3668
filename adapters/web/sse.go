package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/parley-chat/parley/adapters/web/httpguard"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
)

// uiWait bounds how long an SSE message waits for its UiUpdate (see
// states.waitApplied) before it goes out without one.
const uiWait = 2 * time.Second

// sseMessage is the data of one SSE message.
type sseMessage struct {
	Seq     uint64         `json:"seq"`
	Kind    core.EventKind `json:"kind"`
	Session core.SessionID `json:"session_id"`
	Time    time.Time      `json:"ts"`
	Event   core.Event     `json:"event"`
	// UI is, with ?ui=delta, what the event changed in the session's
	// UiState, when the session's reducer was in memory as the event
	// arrived. A client that follows a session and gets an event of it
	// without UI reloads the snapshot. Without ?ui=delta whole states
	// follow as their own messages (uiwire.go).
	UI *uistate.UIUpdate `json:"ui,omitempty"`
}

// resyncMessage is the data of a "resync" SSE message.
type resyncMessage struct {
	Kind   string `json:"kind"` // "resync"
	After  uint64 `json:"after"`
	Resume uint64 `json:"resume"`
	Reason string `json:"reason"`
}

// stream is one open /api/events response.
type stream struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	back   *backend
	filter core.SessionID
	delta  bool // ?ui=delta: UiUpdates instead of whole states
	// dirty are the sessions whose whole state is to be sent when
	// stateTimer fires (uiwire.go).
	dirty      map[core.SessionID]bool
	stateTimer *time.Timer
	timeout    time.Duration
	// ended is closed when the stream is to end to make room for a new
	// one (lifetime.go).
	ended <-chan struct{}
	// last is the seq of the last event handled (sent, or skipped by the
	// filter): everything up to it is done.
	last uint64
	buf  bytes.Buffer
}

// events serves GET /api/events: Server-Sent Events of all sessions (or of
// ?session=ID). Each message's id is its event's seq.
//
// Resuming (Last-Event-ID, or ?last_event_id= for a first connection)
// replays the store's event log after that seq, in pages, then follows the
// live bus. The bus subscription is lossy, so the daemon never waits for a
// slow client; it is opened before the replay so nothing falls between the
// two. Live events at or before the last seq handled are the replay's
// overlap and are dropped; a live event past last+1, or a grown Dropped
// count, means events were missed, and they are read from the store again.
// When the store no longer has them (ErrEventsTruncated) the stream says
// "resync" and carries on from the oldest event kept. Without a resume
// point the stream starts at the newest event. Each stream ends after
// Options.StreamLifetime, or earlier to make room, and is reconnected
// (lifetime.go).
func (a *Adapter) events(w http.ResponseWriter, r *http.Request, c call) {
	ctx := r.Context()
	from := r.Header.Get("Last-Event-ID")
	if from == "" {
		from = r.URL.Query().Get("last_event_id")
	}
	var after uint64
	if from != "" {
		n, err := strconv.ParseUint(from, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{"Last-Event-ID is not an event seq: " + strconv.Quote(from)})
			return
		}
		after = n
	}
	sub, cancel := c.back.bus.Subscribe(a.opts.SSEBuffer, true)
	defer cancel()
	last, err := c.back.store.LastEventSeq(ctx)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// A resume point past the newest event: the data was restored from a
	// backup, or replaced. Live events up to it would be taken for ones
	// the client has; it must reload instead.
	ahead := from != "" && after > last
	if from == "" {
		after = last
	}
	a.clients.Add(1)
	defer a.clients.Add(-1)
	ended, evicted, leave := a.streams.join(a.opts.MaxStreams)
	defer leave()
	if evicted > 0 {
		a.log.Info("SSE streams at their bound: ending the oldest to make room; it reconnects",
			"max_streams", a.opts.MaxStreams)
	}

	// Until the stream ends by design and its client took everything, a
	// close resets the connection (lifetime.go).
	end := httpguard.BoundStream(r)
	reset := false
	defer func() {
		if !reset {
			end()
		}
	}()
	s := &stream{w: w, rc: http.NewResponseController(w), back: c.back,
		filter: core.SessionID(r.URL.Query().Get("session")), timeout: a.opts.WriteTimeout, last: after,
		delta: r.URL.Query().Get("ui") == "delta", ended: ended}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	// The stream ends by design and the client reconnects: its connection
	// is not kept for another request.
	h.Set("Connection", "close")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(&s.buf, "retry: %d\nid: %d\n: connected\n\n", retryMillis, after)
	if ahead {
		err = s.resync(after, last, "the event log has no event after the last one received: "+
			"its data was restored or replaced; reload the snapshots")
	} else {
		err = s.flush()
	}
	if err == nil {
		err = a.follow(ctx, s, sub, from != "")
	}
	switch {
	case errors.Is(err, errLifetime) || errors.Is(err, errCrowded):
		reset = !s.finish(ctx, r, err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The client does not read. net/http has closed the connection,
		// reset (BoundStream): what the kernel held for the client went
		// with it. A client that was only slow reconnects and resumes
		// after the last event it read (Last-Event-ID).
		a.log.Debug("sse client cut off: it does not read", "err", err)
	case err != nil && ctx.Err() == nil && !errors.Is(err, errDetached):
		a.log.Debug("sse client dropped", "err", err)
	}
}

var errDetached = errors.New("adapter detached")

// follow replays (when asked) and then streams live events until the
// client goes, a write fails, the adapter is detached or the stream is to
// end by design (errLifetime, errCrowded).
func (a *Adapter) follow(ctx context.Context, s *stream, sub *core.Subscription, replay bool) error {
	// The replay counts: a stream that was far behind ends once it caught
	// up, and its client resumes from there.
	life := time.NewTimer(a.opts.StreamLifetime)
	defer life.Stop()
	dropped := sub.Dropped()
	if replay {
		if err := s.catchUp(ctx); err != nil {
			return err
		}
	}
	agents, moved := a.presenceNow()
	if err := s.sendAgents(agents); err != nil {
		return err
	}
	beat := time.NewTicker(a.opts.Heartbeat)
	defer beat.Stop()
	defer s.stopStates()
	for {
		select {
		case <-s.stateDue():
			if err := s.sendStates(ctx); err != nil {
				return err
			}
		case <-moved:
			agents, moved = a.presenceNow()
			if err := s.sendAgents(agents); err != nil {
				return err
			}
		case e := <-sub.C:
			if e.Seq == 0 || e.Seq <= s.last {
				break
			}
			if e.Seq > s.last+1 {
				if err := s.catchUp(ctx); err != nil {
					return err
				}
			}
			if e.Seq > s.last {
				if err := s.send(ctx, e); err != nil {
					return err
				}
			}
		case <-beat.C:
			s.buf.WriteString(": ping\n\n")
			if err := s.flush(); err != nil {
				return err
			}
		case <-life.C:
			return errLifetime
		case <-s.ended:
			return errCrowded
		case <-s.back.done:
			return errDetached
		case <-ctx.Done():
			return ctx.Err()
		}
		// Events dropped at the end of a burst leave no later event to
		// reveal the gap: check whenever the buffer is drained.
		if n := sub.Dropped(); n != dropped && len(sub.C) == 0 {
			dropped = n
			if err := s.catchUp(ctx); err != nil {
				return err
			}
		}
	}
}

// catchUp sends every logged event after s.last, up to the newest.
func (s *stream) catchUp(ctx context.Context) error {
	return scanLog(ctx, s.back.store, s.last, func(e core.Event) error { return s.send(ctx, e) },
		func(from, to uint64) error {
			return s.resync(from, to, "events after the last one received are no longer in the event log; reload the snapshots")
		})
}

// send writes one event (unless filtered out) and marks it handled.
func (s *stream) send(ctx context.Context, e core.Event) error {
	s.last = e.Seq
	if e.Session == "" || s.filter != "" && e.Session != s.filter {
		return nil // filtered out, or a notice to a place no session lives in
	}
	m := sseMessage{Seq: e.Seq, Kind: e.Kind, Session: e.Session, Time: e.Time, Event: publicEvent(e)}
	s.back.states.waitApplied(ctx, e.Seq, uiWait)
	m.UI = s.uiOf(e)
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("web: encode event %d: %w", e.Seq, err)
	}
	fmt.Fprintf(&s.buf, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Kind, data)
	return s.flush()
}

// resync tells the client that events after from are not in the log and
// the stream goes on after to: its states must be reloaded.
func (s *stream) resync(from, to uint64, reason string) error {
	data, _ := json.Marshal(resyncMessage{Kind: "resync", After: from, Resume: to, Reason: reason})
	fmt.Fprintf(&s.buf, "id: %d\nevent: resync\ndata: %s\n\n", to, data)
	s.last = to
	return s.flush()
}

// flush writes the buffered message within the write timeout.
func (s *stream) flush() error { return s.flushBy(time.Now().Add(s.timeout)) }

// flushBy writes the buffered message by deadline.
func (s *stream) flushBy(deadline time.Time) error {
	if err := s.rc.SetWriteDeadline(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err != nil {
		return err
	}
	return s.rc.Flush()
}

// publicEvent is e without daemon-side file paths.
func publicEvent(e core.Event) core.Event {
	if e.Message != nil && len(e.Message.Attachments) > 0 {
		m := *e.Message
		m.Attachments = make([]core.Attachment, len(e.Message.Attachments))
		for i, at := range e.Message.Attachments {
			at.Path = ""
			m.Attachments[i] = at
		}
		e.Message = &m
	}
	return e
}
