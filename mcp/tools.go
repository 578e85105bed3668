package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// toolFunc is a tool's body: a JSON-able result (an object) or an error
// that becomes an IsError result the agent can read.
type toolFunc func(ctx context.Context, raw json.RawMessage) (any, error)

// addTool registers a tool under its dotted name and, when that has dots,
// under an underscore alias for clients that reject dots.
func (s *Server) addTool(name, description string, fn toolFunc, opts ...mcp.ToolOption) {
	register := func(toolName, desc string) {
		tool := mcp.NewTool(toolName, append([]mcp.ToolOption{mcp.WithDescription(desc)}, opts...)...)
		s.mcp.AddTool(tool, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			raw, err := rawArguments(req)
			if err != nil {
				return mcp.NewToolResultError(name + ": " + err.Error()), nil
			}
			// Bad text would reach the tool as U+FFFD: refuse it instead.
			if err := core.CheckJSONText(raw); err != nil {
				msg, _ := delivery.UserMessage(err)
				return mcp.NewToolResultError(name + ": arguments refused: " + msg), nil
			}
			res, err := fn(ctx, raw)
			if err != nil {
				return mcp.NewToolResultError(name + ": " + s.describe(name, err)), nil
			}
			return mcp.NewToolResultStructuredOnly(res), nil
		})
	}
	register(name, description)
	if alias := strings.ReplaceAll(name, ".", "_"); alias != name {
		register(alias, description+" (Alias of "+name+".)")
	}
}

func rawArguments(req mcp.CallToolRequest) (json.RawMessage, error) {
	if len(req.Params.RawArguments) > 0 {
		return req.Params.RawArguments, nil
	}
	if raw, ok := req.Params.Arguments.(json.RawMessage); ok {
		return raw, nil
	}
	b, err := json.Marshal(req.Params.Arguments)
	if err != nil {
		return nil, fmt.Errorf("bad arguments: %w", err)
	}
	return b, nil
}

// bind decodes a tool's arguments strictly, so a misspelt argument is an
// error rather than silently ignored.
func bind(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return toolError("bad arguments: " + core.JSONProblem(err))
	}
	return nil
}

// describe turns an error into the message an agent reads: the tool's own
// words (toolError), the Handler's words for a refusal (delivery.UserMessage),
// or, for anything else, what kind of failure it was.
func (s *Server) describe(tool string, err error) string {
	var te toolError
	if errors.As(err, &te) {
		return te.Error()
	}
	if msg, ok := delivery.UserMessage(err); ok {
		return msg
	}
	switch {
	case errors.Is(err, errUnknownSession), errors.Is(err, core.ErrInvalid):
		return err.Error()
	case errors.Is(err, core.ErrNotFound):
		return "not found: " + err.Error()
	case errors.Is(err, core.ErrUnauthorized):
		return "not allowed"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled: " + err.Error()
	}
	s.log.Warn("MCP tool failed", "tool", tool, "err", err)
	return "internal error: " + err.Error()
}

// handle runs cmd, turning the errors about its session into messages
// that name it.
func (s *Server) handle(ctx context.Context, cmd core.Command) (core.Result, error) {
	res, err := s.opts.Handler.Handle(ctx, cmd)
	switch {
	case errors.Is(err, core.ErrSessionClosed):
		return res, toolError(fmt.Sprintf("session %s is closed; start a new one with session.create", cmd.Session))
	case errors.Is(err, core.ErrNotFound) && cmd.Session != "":
		return res, toolError(fmt.Sprintf("unknown session %s", cmd.Session))
	}
	return res, err
}

// toolError is a message meant for the agent as it is.
type toolError string

func (e toolError) Error() string { return string(e) }

func (s *Server) addTools() {
	sessionArg := mcp.WithString("session_id", mcp.Description("The session; defaults to the session this connection is bound to."))
	idempotencyArg := mcp.WithString("idempotency_key", mcp.Description("Any string unique to this post (at most 128 bytes): a retry with the same key returns the first post instead of posting twice."))
	s.addTool("chat_read_since", "Read inbox messages strictly after a watermark (the last message id you processed), oldest first. "+
		"Stateless and exactly-once: after a restart, pass the last id you saw. Without after_id, reads from the beginning.",
		s.readSince,
		mcp.WithString("after_id", mcp.Description("The last message id already processed; omit to read from the start.")),
		mcp.WithInteger("limit", mcp.Description("At most this many messages (1 to 1000, default 100)."), mcp.Min(1), mcp.Max(1000)),
		mcp.WithString("session_id", mcp.Description("The session; defaults to the bound session, or all sessions on an unbound connection.")),
		mcp.WithString("author", mcp.Enum("user", "assistant", "system"), mcp.Description("Only messages of this author (user: what people wrote); omit for every message. last_id is then the last message read, kept or not.")),
		mcp.WithReadOnlyHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(false),
	)
	s.addTool("chat.human.post", "Post a message into the inbox on behalf of a person (origin mcp). Subscribers are notified as for any human message.",
		s.humanPost,
		mcp.WithString("content", mcp.Required(), mcp.Description("The message text.")),
		mcp.WithString("mime", mcp.Description("Content type (default text/markdown).")),
		idempotencyArg, sessionArg, mcp.WithDestructiveHintAnnotation(false),
	)
	s.addTool("chat.assistant.post", "Post the agent's message to the people of the session, as a new message on their platforms.",
		s.assistantPost,
		mcp.WithString("content", mcp.Required(), mcp.Description("The message, markdown by default.")),
		mcp.WithString("mime", mcp.Description("Content type (default text/markdown).")),
		mcp.WithArray("files", mcp.WithStringItems(), mcp.Description("Absolute paths of files on the daemon's machine to send with the message (as documents where the platform has them; at most 10, 50 MB each).")),
		idempotencyArg, sessionArg, mcp.WithDestructiveHintAnnotation(false),
	)
	s.addTool("session.output", "Replace the session's live output message (streamed progress, edited in place). Mark the last one final.",
		s.output,
		mcp.WithString("content", mcp.Required(), mcp.Description("The whole output so far; it replaces the previous one.")),
		mcp.WithBoolean("final", mcp.Description("This is the turn's final output.")),
		sessionArg, mcp.WithIdempotentHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false),
	)
	s.addTool("loop.yield_turn", "Mark the agent's turn complete: the output becomes final and the people are notified once.",
		s.yieldTurn, sessionArg, mcp.WithDestructiveHintAnnotation(false),
	)
	s.addTool("ui.ask", "Ask the people of the session a question with options (buttons where the platform has them, a numbered list where not) "+
		"and wait for the answer. Unanswered by the timeout (or cancelled), the question is withdrawn: its buttons go and a late answer is refused.",
		s.ask,
		mcp.WithString("question", mcp.Required(), mcp.Description("The question.")),
		mcp.WithArray("options", mcp.Required(), mcp.WithStringItems(), mcp.MinItems(1), mcp.MaxItems(20), mcp.Description("1 to 20 answers to choose from.")),
		mcp.WithNumber("timeout_s", mcp.Description("Seconds to wait for an answer (default 300, at most 3600).")),
		sessionArg, mcp.WithDestructiveHintAnnotation(false),
	)
	s.addTool("session.create", "Create a session.", s.createSession,
		mcp.WithString("title", mcp.Description("The title people see (optional).")),
		mcp.WithString("agent", mcp.Description("The agent parley runs the session with, by name (optional; default: the default agent). "+
			"An unknown name is refused with the list of names.")),
		mcp.WithDestructiveHintAnnotation(false),
	)
	s.addTool("session.list", "List the sessions, newest first, with their status, a page at a time: "+
		"pass the answer's next as cursor for the following page (absent on the last).", s.listSessions,
		mcp.WithNumber("limit", mcp.Description(fmt.Sprintf("Sessions per page (default %d, at most %d).", core.DefaultSessionPage, core.MaxSessionPage))),
		mcp.WithString("cursor", mcp.Description("The next of the previous page.")),
		mcp.WithString("status", mcp.Enum("idle", "working", "waiting", "closed"), mcp.Description("Only sessions with this status.")),
		mcp.WithReadOnlyHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(false),
	)
	s.addTool("session.get", "Read one session: its title, status, turns, open questions and the agent parley runs it with.", s.getSession,
		sessionArg, mcp.WithReadOnlyHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(false),
	)
	s.addTool("session.rename", "Set the session's title, which people see (a Telegram topic's name, a Slack thread's header, a Matrix room's name).",
		s.renameSession, mcp.WithString("title", mcp.Required(), mcp.Description("The new title (at most 256 bytes).")),
		sessionArg, mcp.WithIdempotentHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false),
	)
	s.addTool("session.close", "Close a session; later input to it is refused.", s.closeSession, sessionArg)
	s.addToolActivityTools()
	s.addAgentStateTool()
}

type readSinceArgs struct {
	AfterID   string `json:"after_id"`
	Limit     int    `json:"limit"`
	SessionID string `json:"session_id"`
	Author    string `json:"author"`
}

func (s *Server) readSince(ctx context.Context, raw json.RawMessage) (any, error) {
	var a readSinceArgs
	if err := bind(raw, &a); err != nil {
		return nil, err
	}
	if a.AfterID != "" && !core.ValidID(a.AfterID) {
		return nil, toolError(fmt.Sprintf("after_id %q is not a message id: pass the id of the last message you read, or omit it to read from the start", a.AfterID))
	}
	switch {
	case a.Limit == 0:
		a.Limit = 100
	case a.Limit < 0 || a.Limit > 1000:
		return nil, toolError(fmt.Sprintf("limit %d is out of range: 1 to 1000", a.Limit))
	}
	if err := validAuthor(a.Author); err != nil {
		return nil, err
	}
	id, err := s.sessionFor(ctx, "chat_read_since", a.SessionID, false)
	if err != nil {
		return nil, err
	}
	if a.Author != "" {
		msgs, last, err := s.readByAuthor(ctx, id, core.MessageID(a.AfterID), a.Limit, core.Role(a.Author))
		if err != nil {
			return nil, fmt.Errorf("reading the inbox: %w", err)
		}
		return InboxPage{LastID: last, Messages: toWireAll(msgs)}, nil
	}
	msgs, err := s.opts.Store.Inbox(ctx, id, core.MessageID(a.AfterID), a.Limit)
	if err != nil {
		return nil, fmt.Errorf("reading the inbox: %w", err)
	}
	body := InboxPage{LastID: core.MessageID(a.AfterID), Messages: toWireAll(msgs)}
	if len(msgs) > 0 {
		body.LastID = msgs[len(msgs)-1].ID
	}
	return body, nil
}

type postArgs struct {
	Content   string   `json:"content"`
	Mime      string   `json:"mime"`
	Files     []string `json:"files"`
	SessionID string   `json:"session_id"`
	// IdempotencyKey becomes the command's platform id, so the service's
	// dedup turns a retried post into the first one.
	IdempotencyKey string `json:"idempotency_key"`
}

type postResult struct {
	ID        core.MessageID `json:"id"`
	TS        time.Time      `json:"ts"`
	SessionID core.SessionID `json:"session_id"`
}

func (s *Server) humanPost(ctx context.Context, raw json.RawMessage) (any, error) {
	return s.post(ctx, raw, "chat.human.post", core.SendMessage)
}

func (s *Server) assistantPost(ctx context.Context, raw json.RawMessage) (any, error) {
	return s.post(ctx, raw, "chat.assistant.post", core.AssistantPost)
}

func (s *Server) post(ctx context.Context, raw json.RawMessage, tool string, kind core.CommandKind) (any, error) {
	var a postArgs
	if err := bind(raw, &a); err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Content) == "" {
		return nil, toolError("content is empty")
	}
	if len(a.Files) > 0 && kind != core.AssistantPost {
		return nil, toolError("files can only be sent with chat.assistant.post")
	}
	if len(a.IdempotencyKey) > 128 {
		return nil, toolError("idempotency_key is longer than 128 bytes")
	}
	id, err := s.sessionFor(ctx, tool, a.SessionID, true)
	if err != nil {
		return nil, err
	}
	// The files are copied before the message is appended, and held until
	// it is (files.go).
	atts, err := s.attachments(ctx, a.Files)
	if err != nil {
		return nil, err
	}
	if len(atts) > 0 {
		defer s.opts.Files.Release(atts...)
	}
	var platformID string
	if a.IdempotencyKey != "" {
		platformID = "idem:" + a.IdempotencyKey
	}
	res, err := s.handle(ctx, core.Command{Kind: kind, Session: id, Origin: core.OriginMCP, Text: a.Content, Mime: a.Mime,
		Attachments: atts, PlatformID: platformID})
	if err != nil {
		return nil, err
	}
	return postResult{ID: res.Message.ID, TS: res.Message.Time, SessionID: res.Session}, nil
}

type okResult struct {
	OK        bool           `json:"ok"`
	SessionID core.SessionID `json:"session_id"`
}

type outputArgs struct {
	Content   string `json:"content"`
	Final     bool   `json:"final"`
	SessionID string `json:"session_id"`
}

func (s *Server) output(ctx context.Context, raw json.RawMessage) (any, error) {
	var a outputArgs
	if err := bind(raw, &a); err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Content) == "" {
		return nil, toolError("content is empty (to end the turn without output, call loop.yield_turn)")
	}
	id, err := s.sessionFor(ctx, "session.output", a.SessionID, true)
	if err != nil {
		return nil, err
	}
	res, err := s.handle(ctx, core.Command{Kind: core.OutputUpdate, Session: id, Origin: core.OriginMCP, Text: a.Content, Final: a.Final})
	if err != nil {
		return nil, err
	}
	return okResult{OK: true, SessionID: res.Session}, nil
}

type sessionArgs struct {
	SessionID string `json:"session_id"`
}

func (s *Server) yieldTurn(ctx context.Context, raw json.RawMessage) (any, error) {
	return s.sessionCommand(ctx, raw, "loop.yield_turn", core.YieldTurn)
}

func (s *Server) closeSession(ctx context.Context, raw json.RawMessage) (any, error) {
	return s.sessionCommand(ctx, raw, "session.close", core.Close)
}

func (s *Server) sessionCommand(ctx context.Context, raw json.RawMessage, tool string, kind core.CommandKind) (any, error) {
	var a sessionArgs
	if err := bind(raw, &a); err != nil {
		return nil, err
	}
	id, err := s.sessionFor(ctx, tool, a.SessionID, true)
	if err != nil {
		return nil, err
	}
	res, err := s.handle(ctx, core.Command{Kind: kind, Session: id, Origin: core.OriginMCP})
	if err != nil {
		return nil, err
	}
	return okResult{OK: true, SessionID: res.Session}, nil
}

type createArgs struct {
	Title string `json:"title"`
	Agent string `json:"agent"`
}

func (s *Server) createSession(ctx context.Context, raw json.RawMessage) (any, error) {
	var a createArgs
	if err := bind(raw, &a); err != nil {
		return nil, err
	}
	if b := bindingFrom(ctx); b.id != "" {
		return nil, toolError(fmt.Sprintf("this connection is bound to session %s by %s and acts on that session only; "+
			"create sessions on a connection that is not bound to one", b.id, b.source))
	}
	res, err := s.handle(ctx, core.Command{Kind: core.CreateSession, Origin: core.OriginMCP, Title: a.Title, Agent: a.Agent})
	if err != nil {
		return nil, err
	}
	s.known.Store(res.Session, struct{}{})
	sess, err := s.opts.Store.Session(ctx, res.Session)
	if err != nil {
		return nil, fmt.Errorf("reading the new session: %w", err)
	}
	created := map[string]any{"session_id": sess.ID, "title": sess.Title, "inbox": SessionInboxURI(sess.ID)}
	if sess.Agent != "" {
		created["agent"] = sess.Agent
	}
	return created, nil
}

type sessionInfo struct {
	ID              core.SessionID `json:"id"`
	Title           string         `json:"title"`
	Status          core.Status    `json:"status"`
	Created         time.Time      `json:"created"`
	Updated         time.Time      `json:"updated"`
	Turn            uint64         `json:"turn"`
	LastInputOrigin core.Origin    `json:"last_input_origin,omitempty"`
	OpenQuestions   int            `json:"open_questions,omitempty"`
	Inbox           string         `json:"inbox"`
	// Agent names the agent parley runs the session with; absent for
	// the default one.
	Agent string `json:"agent,omitempty"`
}

// infoOf is what session.list and session.get say of ss.
func infoOf(ss core.Session) sessionInfo {
	return sessionInfo{ID: ss.ID, Title: ss.Title, Status: ss.Status, Created: ss.Created, Updated: ss.Updated,
		Turn: ss.Turn, LastInputOrigin: ss.LastInputOrigin, OpenQuestions: len(ss.Questions), Inbox: SessionInboxURI(ss.ID),
		Agent: ss.Agent}
}

type renameArgs struct {
	Title     string `json:"title"`
	SessionID string `json:"session_id"`
}

// renameSession is session.rename.
func (s *Server) renameSession(ctx context.Context, raw json.RawMessage) (any, error) {
	var a renameArgs
	if err := bind(raw, &a); err != nil {
		return nil, err
	}
	id, err := s.sessionFor(ctx, "session.rename", a.SessionID, true)
	if err != nil {
		return nil, err
	}
	res, err := s.handle(ctx, core.Command{Kind: core.Rename, Session: id, Origin: core.OriginMCP, Title: a.Title})
	if err != nil {
		return nil, err
	}
	return okResult{OK: true, SessionID: res.Session}, nil
}

type getArgs struct {
	SessionID string `json:"session_id"`
}

// getSession is session.get: one session, the bound one on a bound
// connection.
func (s *Server) getSession(ctx context.Context, raw json.RawMessage) (any, error) {
	var a getArgs
	if err := bind(raw, &a); err != nil {
		return nil, err
	}
	id, err := s.sessionFor(ctx, "session.get", a.SessionID, true)
	if err != nil {
		return nil, err
	}
	ss, err := s.opts.Store.Session(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading the session: %w", err)
	}
	return infoOf(ss), nil
}

type listArgs struct {
	Limit  int    `json:"limit"`
	Cursor string `json:"cursor"`
	Status string `json:"status"`
}

// listSessions is session.list: a page of sessions, newest first, read
// from the store alone (core.Store.SessionsPage), with the cursor of the
// next page when there is one.
func (s *Server) listSessions(ctx context.Context, raw json.RawMessage) (any, error) {
	var args listArgs
	if err := bind(raw, &args); err != nil {
		return nil, err
	}
	q := core.SessionQuery{Limit: core.DefaultSessionPage, After: core.SessionID(args.Cursor), Status: core.Status(args.Status)}
	switch {
	case args.Limit < 0 || args.Limit > core.MaxSessionPage:
		return nil, toolError(fmt.Sprintf("limit %d is not from 1 to %d", args.Limit, core.MaxSessionPage))
	case args.Limit > 0:
		q.Limit = args.Limit
	}
	if args.Cursor != "" && !core.ValidID(args.Cursor) {
		return nil, toolError(fmt.Sprintf("cursor %q is not one session.list gave (pass the next of the previous page)", args.Cursor))
	}
	if args.Status != "" && !q.Status.Valid() {
		return nil, toolError(fmt.Sprintf("status %q is not one of idle, working, waiting, closed", args.Status))
	}
	var page []core.Session
	var next core.SessionID
	var err error
	if b := bindingFrom(ctx); b.id != "" {
		// A bound connection sees its own session only.
		page, err = s.boundPage(ctx, b.id, q)
	} else {
		page, next, err = s.opts.Store.SessionsPage(ctx, q)
	}
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	out := make([]sessionInfo, 0, len(page))
	for _, ss := range page {
		out = append(out, infoOf(ss))
	}
	answer := map[string]any{"sessions": out}
	if next != "" {
		answer["next"] = next
	}
	return answer, nil
}

// boundPage is session.list on a connection bound to id: that session, if
// it passes the query's filter and lies after its cursor.
func (s *Server) boundPage(ctx context.Context, id core.SessionID, q core.SessionQuery) ([]core.Session, error) {
	sess, err := s.opts.Store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	if (q.Status != "" && sess.Status != q.Status) || q.After != "" {
		return nil, nil
	}
	return []core.Session{sess}, nil
}
