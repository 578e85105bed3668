package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// socketPath is where apps.connections.open points clients.
const socketPath = "/link/"

const (
	// pingEvery is how often the server pings each connection. slack-go's
	// client reconnects when no ping came for its ping interval (30s by
	// default, or less with socketmode.OptionPingInterval).
	pingEvery = time.Second
	// disconnectGrace is how long a connection stays open after the
	// disconnect message, so that acks already on their way arrive; Slack
	// waits about ten seconds, slack-go closes at once.
	disconnectGrace = time.Second
	writeTimeout    = 5 * time.Second
)

// wsConn is one open Socket Mode connection.
type wsConn struct {
	n       int // 1 for the first connection the server accepted
	ws      *websocket.Conn
	mu      sync.Mutex
	out     [][]byte
	signal  chan struct{}
	closing bool // sent disconnect or being dropped: takes no new envelopes
	gone    chan struct{}
	once    sync.Once
}

// send queues a frame for the connection's writer.
func (c *wsConn) send(frame []byte) {
	c.mu.Lock()
	c.out = append(c.out, frame)
	c.mu.Unlock()
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// close closes the connection without a close frame, like a dropped
// network connection.
func (c *wsConn) close() {
	c.once.Do(func() {
		close(c.gone)
		_ = c.ws.Close()
	})
}

// Connections is how many websocket connections the server has accepted so
// far.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sock.opened
}

// Disconnect sends every open connection {"type":"disconnect","reason":
// reason,…}, as Slack does before it closes one (reason
// "refresh_requested" for its periodic refresh, "link_disabled", …), and
// closes it shortly after. slack-go's client then opens a new connection
// with apps.connections.open; envelopes sent meanwhile wait for it, and
// envelopes not acked are redelivered when their ack deadline passes.
func (s *Server) Disconnect(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed() {
		return
	}
	for _, c := range s.sock.conns {
		if c.closing {
			continue
		}
		c.closing = true
		frame, _ := json.Marshal(obj{"type": "disconnect", "reason": reason, "debug_info": obj{"host": hostName(c.n)}})
		c.send(frame)
		t := time.AfterFunc(disconnectGrace, c.close)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			select {
			case <-c.gone:
				t.Stop()
			case <-s.done:
				t.Stop()
				c.close()
			}
		}()
	}
	s.changed()
}

// DropConnection closes every open connection abruptly, with no disconnect
// message and no close frame, as when the network fails.
func (s *Server) DropConnection() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.sock.conns {
		c.closing = true
		c.close()
	}
	s.changed()
}

// connectionsOpen answers apps.connections.open with a single-use
// websocket URL.
func (s *Server) connectionsOpen(r *request) (obj, *apiError) {
	ticket := newUUID()
	s.sock.tickets[ticket] = true
	u := "ws" + strings.TrimPrefix(s.base, "http") + socketPath + "?ticket=" + url.QueryEscape(ticket) + "&app_id=" + appID
	return obj{"url": u}, nil
}

var upgrader = websocket.Upgrader{
	// slack-go sends "Origin: https://api.slack.com".
	CheckOrigin: func(*http.Request) bool { return true },
}

// serveSocket accepts a websocket connection with a ticket from
// apps.connections.open, says hello, sends what is queued and then reads
// acks until the connection ends.
func (s *Server) serveSocket(w http.ResponseWriter, hr *http.Request) {
	ticket := hr.URL.Query().Get("ticket")
	s.mu.Lock()
	ok := s.sock.tickets[ticket] && !s.closed()
	delete(s.sock.tickets, ticket)
	s.mu.Unlock()
	if !ok {
		http.Error(w, "invalid ticket", http.StatusUnauthorized)
		return
	}
	ws, err := upgrader.Upgrade(w, hr, nil)
	if err != nil {
		return
	}
	s.mu.Lock()
	if s.closed() {
		s.mu.Unlock()
		_ = ws.Close()
		return
	}
	s.sock.opened++
	c := &wsConn{n: s.sock.opened, ws: ws, signal: make(chan struct{}, 1), gone: make(chan struct{})}
	s.sock.conns = append(s.sock.conns, c)
	live := 0
	for _, o := range s.sock.conns {
		if !o.closing {
			live++
		}
	}
	hello, _ := json.Marshal(obj{
		"type": "hello", "num_connections": live,
		"debug_info":      obj{"host": hostName(c.n), "build_number": 1, "approximate_connection_time": 18060},
		"connection_info": obj{"app_id": appID},
	})
	c.send(hello)
	s.pump()
	s.changed()
	s.wg.Add(2) // the writer and this reader
	s.mu.Unlock()

	go func() {
		defer s.wg.Done()
		s.writeLoop(c)
	}()
	defer s.wg.Done()
	s.readLoop(c)
}

// readLoop reads acks until the connection fails, then forgets it.
func (s *Server) readLoop(c *wsConn) {
	defer func() {
		c.close()
		s.mu.Lock()
		for i, o := range s.sock.conns {
			if o == c {
				s.sock.conns = append(s.sock.conns[:i], s.sock.conns[i+1:]...)
				break
			}
		}
		s.changed()
		s.mu.Unlock()
	}()
	for {
		kind, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		if kind != websocket.TextMessage {
			continue
		}
		var ack struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(data, &ack) == nil && ack.EnvelopeID != "" {
			s.ack(ack.EnvelopeID, ack.Payload)
		}
	}
}

// writeLoop writes queued frames in order and pings, until the connection
// is gone.
func (s *Server) writeLoop(c *wsConn) {
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-c.gone:
			return
		case <-c.signal:
			c.mu.Lock()
			frames := c.out
			c.out = nil
			c.mu.Unlock()
			for _, f := range frames {
				_ = c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
				if err := c.ws.WriteMessage(websocket.TextMessage, f); err != nil {
					c.close()
					return
				}
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(writeTimeout)); err != nil {
				c.close()
				return
			}
		}
	}
}

// stopSocketsLocked closes every connection and stops every ack deadline.
// Callers hold s.mu.
func (s *Server) stopSocketsLocked() {
	for _, c := range s.sock.conns {
		c.close()
	}
	for _, d := range s.sock.pending {
		d.timer.Stop()
	}
}

// liveConn is the newest open connection not being closed, or nil.
// Callers hold s.mu.
func (s *Server) liveConn() *wsConn {
	for i := len(s.sock.conns) - 1; i >= 0; i-- {
		if c := s.sock.conns[i]; !c.closing {
			return c
		}
	}
	return nil
}

func hostName(n int) string { return fmt.Sprintf("applink-fake-%d", n) }
