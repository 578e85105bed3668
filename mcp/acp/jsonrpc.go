package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"
)

// ACP is JSON-RPC 2.0 (https://www.jsonrpc.org/specification), one message
// a line on the agent's stdin and stdout
// (https://agentclientprotocol.com/protocol/transports). Both sides send
// requests; conn is parley's end: it numbers its own requests, matches
// their responses, and hands the agent's requests and notifications to a
// handler, in the order they came.

// JSON-RPC's error codes that parley sends or reads.
const (
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	// codeAuthRequired is ACP's "authentication required"
	// (https://agentclientprotocol.com/protocol/schema#errorcode).
	codeAuthRequired = -32000
)

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	s := fmt.Sprintf("%s (%d)", e.Message, e.Code)
	if len(e.Data) > 0 && len(e.Data) < 300 {
		s += ": " + string(e.Data)
	}
	return s
}

// message is any JSON-RPC message: a request has Method and ID, a
// notification Method only, a response ID and Result or Error.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// handler takes what the agent sends other than responses. Both methods
// run on conn's reader, in order, and must not block: a request is
// answered later with conn.reply.
type handler interface {
	notification(method string, params json.RawMessage)
	request(id json.RawMessage, method string, params json.RawMessage)
}

// reply is the response to one of parley's requests.
type reply struct {
	result json.RawMessage
	err    error // an *rpcError, or why no response came
}

// pendingCall is one of parley's requests waiting for its response.
type pendingCall struct {
	ch chan reply // buffered: the reader never waits for it
	// onReply, when set, runs on the reader with the response before
	// anything after it is read: what it does comes before the agent's
	// next message is handled.
	onReply func(reply)
}

// conn is parley's end of one agent's JSON-RPC connection.
type conn struct {
	w   *os.File
	h   handler
	log *slog.Logger
	// lineRead, when set, is told of each line read (for measurements).
	lineRead func([]byte)

	wmu sync.Mutex // one line at a time
	// replies counts respondLater's writers, which may log after the
	// reader ended; none is added once err is set (under mu).
	replies sync.WaitGroup

	mu      sync.Mutex
	next    int64
	pending map[int64]*pendingCall
	err     error         // why the connection ended, once it did
	done    chan struct{} // closed when it ended
}

func newConn(w *os.File, h handler, log *slog.Logger) *conn {
	return &conn{w: w, h: h, log: log, pending: map[int64]*pendingCall{}, done: make(chan struct{})}
}

// call sends a request and waits for its response, ctx's end or the
// connection's. An error response is an *rpcError. onReply, when set, runs
// on the reader with the response (see pendingCall).
func (c *conn) call(ctx context.Context, method string, params any, onReply func(reply)) (json.RawMessage, error) {
	id, ch, err := c.start(ctx, method, params, onReply)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		c.forget(id)
		return nil, fmt.Errorf("acp: %s: %w", method, ctx.Err())
	}
}

// start sends a request and returns without waiting: its response comes
// on the channel (and to onReply), or the connection's end does.
func (c *conn) start(ctx context.Context, method string, params any, onReply func(reply)) (int64, <-chan reply, error) {
	pc := &pendingCall{ch: make(chan reply, 1), onReply: onReply}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, nil, fmt.Errorf("acp: %s: %w", method, err)
	}
	c.next++
	id := c.next
	c.pending[id] = pc
	c.mu.Unlock()
	if err := c.write(ctx, message{JSONRPC: "2.0", ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: mustJSON(params)}); err != nil {
		c.forget(id)
		return 0, nil, fmt.Errorf("acp: %s: %w", method, err)
	}
	return id, pc.ch, nil
}

// forget drops a request whose response nobody waits for any more.
func (c *conn) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// notify sends a notification.
func (c *conn) notify(ctx context.Context, method string, params any) error {
	if err := c.write(ctx, message{JSONRPC: "2.0", Method: method, Params: mustJSON(params)}); err != nil {
		return fmt.Errorf("acp: %s: %w", method, err)
	}
	return nil
}

// replyTimeout bounds the write of a response, which has no caller's
// context.
const replyTimeout = 10 * time.Second

// respond answers the agent's request id with result, or with rerr.
func (c *conn) respond(id json.RawMessage, result any, rerr *rpcError) error {
	ctx, cancel := context.WithTimeout(context.Background(), replyTimeout)
	defer cancel()
	m := message{JSONRPC: "2.0", ID: id}
	if rerr != nil {
		m.Error = rerr
	} else {
		m.Result = mustJSON(result)
	}
	return c.write(ctx, m)
}

// respondLater is respond on a goroutine of its own, for the reader, which
// must never wait on a write (the agent may be blocked writing to us).
// Once the connection ended there is nobody to answer: nothing is sent,
// and no writer is added after the process's watcher waited for them.
func (c *conn) respondLater(id json.RawMessage, result any, rerr *rpcError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.replies.Go(func() {
		if err := c.respond(id, result, rerr); err != nil {
			c.log.Debug("acp: a response to the agent was not sent", "err", err)
		}
	})
}

// errWriteFailed is what a write to the agent's stdin failed with, ctx's
// end aside: the agent closed it (EPIPE), so its process is ending.
var errWriteFailed = errors.New("writing to the agent failed")

// write puts one message on the agent's stdin; ctx bounds a write that
// blocks because the agent does not read. A write that failed otherwise
// wraps errWriteFailed.
func (c *conn) write(ctx context.Context, m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return c.closedErr()
	default:
	}
	if dl, ok := ctx.Deadline(); ok {
		c.w.SetWriteDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.w.SetWriteDeadline(time.Unix(1, 0)) })
	_, err = c.w.Write(b)
	stop()
	c.w.SetWriteDeadline(time.Time{})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errWriteFailed, err)
	}
	return nil
}

func (c *conn) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// read reads the agent's stdout until it ends, then ends the connection:
// every request still waiting fails with err.
func (c *conn) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 64*1024)
	var err error
	for {
		// No line limit: a session/load replays whole tool outputs.
		var line []byte
		line, err = br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if c.lineRead != nil {
				c.lineRead(line)
			}
			c.dispatch(line)
		}
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
		err = errors.New("the agent closed its output")
	}
	c.close(err)
}

// close ends the connection with err; waiting requests fail with it.
func (c *conn) close(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = map[int64]*pendingCall{}
	close(c.done)
	c.mu.Unlock()
	for _, pc := range pending {
		pc.ch <- reply{err: err}
	}
}

// dispatch handles one line of the agent's.
func (c *conn) dispatch(line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		c.log.Debug("acp: skipped a line that is not JSON-RPC", "err", err, "line", truncate(string(line), 200))
		return
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case m.Method != "" && hasID:
		c.h.request(m.ID, m.Method, m.Params)
	case m.Method != "":
		c.h.notification(m.Method, m.Params)
	case hasID:
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		c.mu.Lock()
		pc := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if err != nil || pc == nil {
			c.log.Debug("acp: a response to no request of parley's", "id", string(m.ID))
			return
		}
		r := reply{result: m.Result}
		if m.Error != nil {
			r.err = m.Error
		}
		if pc.onReply != nil {
			pc.onReply(r)
		}
		pc.ch <- r
	default:
		c.log.Debug("acp: skipped a message without method or id", "line", truncate(string(line), 200))
	}
}

func mustJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Only parley's own types are marshalled here.
		panic(fmt.Sprintf("acp: %v", err))
	}
	return b
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
