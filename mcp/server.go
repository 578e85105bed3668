package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/parley-chat/parley/core"
)

// Options configure a Server.
type Options struct {
	// Handler executes the commands the tools issue (commands.Service).
	Handler core.Handler
	// Store is read for the inbox, sessions and watermark reads.
	Store core.Store
	// Bus feeds the notifications; New subscribes to it at once. Among
	// instances sharing a store it is the cluster feed: every instance's
	// events (store/follow).
	Bus core.Bus
	// Local, when set, carries only the events this instance committed
	// (the daemon's local bus): the no-agent notice is decided for those
	// alone, so that of the instances that hear of a message only the one
	// where the person wrote answers it. Nil decides it on Bus.
	Local core.Bus
	// Logger is scoped by the caller; nil discards.
	Logger *slog.Logger
	// Name and Version are reported to clients (defaults "parley", "dev").
	Name, Version string
	// Coalesce is the least time between two notifications to one
	// subscriber: a message after a quiet spell goes out at once, and the
	// messages arriving within Coalesce of it are sent together (default
	// 2ms).
	Coalesce time.Duration
	// NoAgentNotice is the notice a person gets who writes to a session no
	// agent listens to (presence.go); empty sends none.
	NoAgentNotice string
	// NoAgentNoticeSkip are origins that show presence themselves (the
	// web page) and get no such notice.
	NoAgentNoticeSkip []core.Origin
	// SendDirs are the directories agents may send files from
	// (files.go); nil means DefaultSendDirs, empty none.
	SendDirs []string
	// Protected are parley's own paths (the data directory, the config
	// file), never sent whatever SendDirs says.
	Protected []string
	// Files keeps the copies of the files agents send (files.go); nil
	// refuses every file.
	Files core.FileStore
	// MaxSessions bounds the MCP sessions and listen streams open at once
	// (conns.go); 0 means DefaultMaxSessions.
	MaxSessions int
}

// Server is parley's MCP chat server: the inbox resource, its
// notifications and the chat tools, over Streamable HTTP.
type Server struct {
	opts   Options
	log    *slog.Logger
	mcp    *server.MCPServer
	http   *server.StreamableHTTPServer
	sub    *core.Subscription
	cancel func()
	// localSub is Options.Local's subscription, for the no-agent notice.
	localSub    *core.Subscription
	cancelLocal func()
	// presence decides the no-agent notice (SetNoticePresence); nil
	// means the server's own.
	presence atomic.Pointer[presenceBox]
	subs     *registry
	agents   *agents
	conns    *conns
	// admitting counts the initialize and listen requests admitted and
	// not yet counted among the agents (guard.go's reservation).
	admitMu   sync.Mutex
	admitting int
	asks      *asks
	// known caches the session ids seen to exist (sessions are never
	// deleted), so binding checks cost one store read per session. It
	// holds the sessions agents named, not every session created: filled
	// from the bus, it grew by 15 MiB per 100,000 sessions people started.
	known     sync.Map
	closeOnce sync.Once
	// ready is true while Run delivers (presence.go).
	ready atomic.Bool
	// ownKey is the secret of the daemon's own client (OwnClientHeader).
	ownKey string
	// agentKey signs the credentials of the agents parley runs
	// (agentauth.go).
	agentKey []byte
	// pings numbers the GET streams' pings.
	pings atomic.Int64
	// streams are the GET streams on connections taken over (stream.go).
	streams streamSet
}

// A connection's session binding.
const (
	// SessionHeader binds a connection to one session, like ?session=ID.
	SessionHeader = "Parley-Session"
	// SessionParam is the URL query parameter that binds a connection.
	SessionParam = "session"
)

// Defaults and bounds.
const (
	busBuffer        = 4096
	defaultCoalesce  = 2 * time.Millisecond
	shutdownDeadline = 2 * time.Second
)

// New builds a Server and subscribes it to opts.Bus, so that no event
// published before Run starts is missed. Run must then be called: the
// subscription is reliable, and an unread one eventually holds up the bus.
func New(opts Options) (*Server, error) {
	if opts.Handler == nil || opts.Store == nil || opts.Bus == nil {
		return nil, errors.New("mcp: Handler, Store and Bus are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Name == "" {
		opts.Name = "parley"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.SendDirs == nil {
		opts.SendDirs = DefaultSendDirs()
	}
	if opts.Coalesce <= 0 {
		opts.Coalesce = defaultCoalesce
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	s := &Server{opts: opts, log: opts.Logger, asks: newAsks(), ownKey: rand.Text(), agentKey: newAgentKey()}
	hooks := &server.Hooks{}
	s.mcp = server.NewMCPServer(opts.Name, opts.Version,
		server.WithResourceCapabilities(true, false),
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithHooks(hooks),
		server.WithInstructions(instructions),
		server.WithToolFilter(agentToolFilter),
	)
	s.subs = newRegistry(opts.Coalesce, s.log)
	s.conns = newConns(s.subs.poke, s.endIdle)
	// A 2025-11-25 subscriber (keyed by its session id) listens while its
	// client can hear (conns.go); a listen stream while it is open.
	s.subs.live = func(key any) bool {
		id, ok := key.(string)
		return !ok || s.conns.live(id)
	}
	s.agents = newAgents(s.log)
	s.addHooks(hooks)
	s.addResources()
	s.addStatusResource()
	s.addTools()
	s.http = server.NewStreamableHTTPServer(s.mcp,
		// Stateful ids, valid while parley keeps the session (conns.go):
		// after a daemon restart, or once the session ended, a client's
		// old id is answered 404, the transport's signal to initialize
		// again (and so to subscribe again), instead of silently serving a
		// session that has lost its subscriptions. The session's end,
		// idle or not, is parley's (conns.go), and so is its GET stream
		// and its heartbeat (stream.go): no idle TTL or heartbeat here.
		server.WithSessionIdManagerResolver(sessionIDs{s.conns}),
		server.WithStreamableHTTPLogger(s.log.With("part", "transport")),
		// cmd/parley checks the Host of every route, /mcp included,
		// against loopback names and [http] allowed_hosts; mcp-go's own
		// check knows only loopback and would refuse a configured name.
		server.WithDisableLocalhostProtection(true),
	)
	s.sub, s.cancel = opts.Bus.Subscribe(busBuffer, false)
	s.cancelLocal = func() {}
	if opts.Local != nil {
		s.localSub, s.cancelLocal = opts.Local.Subscribe(busBuffer, false)
	}
	return s, nil
}

const instructions = `parley connects you with people chatting on Telegram, Slack, Matrix or its web page.
Read ui://chat/inbox (or call chat_read_since with the last id you saw) for their messages; subscribe to it to be notified of new human messages.
Answer with chat.assistant.post, stream progress with session.output, ask with ui.ask, and call loop.yield_turn when your turn is done.`

// Handler returns the Streamable HTTP endpoint (POST for requests, GET for
// the server-initiated notification stream, DELETE to end a session).
// cmd mounts it at /mcp. It does not check the Host header against DNS
// rebinding: whoever serves it must (adapters/web/httpguard's Browser
// guard does, in front of every route cmd/parley mounts).
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.guard) }

// Run consumes the bus until ctx ends: it pushes notifications of human
// messages to subscribers and completes ui.ask calls with their answers.
func (s *Server) Run(ctx context.Context) {
	s.ready.Store(true)
	defer s.ready.Store(false)
	if s.localSub != nil {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			core.Consume(ctx, s.localSub, func(ctx context.Context, e core.Event) {
				if e.Kind == core.EventHumanMessage {
					s.noAgentNotice(ctx, e)
				}
			})
		})
	}
	core.Consume(ctx, s.sub, s.handleEvent)
}

func (s *Server) handleEvent(ctx context.Context, e core.Event) {
	switch e.Kind {
	case core.EventSessionUpdated:
		if e.Status == core.StatusClosed {
			s.asks.fail(e.Session, errAskClosed)
		}
	case core.EventAnswer:
		if e.Message != nil {
			s.asks.answer(e.QuestionID, *e.Message)
		}
	case core.EventCancel:
		s.asks.fail(e.Session, errAskCancelled)
	}
	if e.Kind == core.EventResync {
		// Events were missed: every subscriber re-reads its inbox.
		s.subs.resync()
		return
	}
	if !e.Human() || e.Message == nil {
		return
	}
	s.subs.publish(e.Session, toWire(*e.Message))
	if e.Kind == core.EventHumanMessage && s.localSub == nil {
		s.noAgentNotice(ctx, e)
	}
}

// Subscribers is the number of MCP connections subscribed to at least one
// inbox (for metrics).
func (s *Server) Subscribers() int { return s.subs.count() }

// Agents is the number of agents connected: 2025-11-25 clients that
// initialized and have not gone, and open 2026-07-28 listen streams.
func (s *Server) Agents() int { return s.agents.count() }

// Close ends the bus subscription, the open sessions and streams and the
// pending ui.ask calls. Call it after Run returned.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.cancelLocal()
		s.asks.failAll(errAskShutdown)
		s.subs.close()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownDeadline)
		defer cancel()
		_ = s.http.Shutdown(ctx)
		s.conns.closeAll()
		s.streams.close()
	})
}

// addHooks tracks sessions and subscriptions: mcp-go acknowledges
// resources/subscribe and subscriptions/listen but leaves delivery to the
// server.
func (s *Server) addHooks(h *server.Hooks) {
	h.AddOnRequestInitialization(s.checkRequest)
	h.AddAfterSubscribe(func(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		sess := server.ClientSessionFromContext(ctx)
		if sess == nil || sess.SessionID() == "" {
			s.log.Warn("resources/subscribe without an MCP session; nothing to notify", "uri", req.Params.URI)
			return
		}
		scope, err := s.scopeOf(ctx, req.Params.URI)
		if err != nil { // checkRequest refused it already
			return
		}
		id := sess.SessionID()
		wake, _, ok := s.conns.channels(id)
		if !ok {
			return // the session ended meanwhile
		}
		s.subs.add(id, wake, req.Params.URI, scope)
	})
	h.AddAfterUnsubscribe(func(ctx context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		if sess := server.ClientSessionFromContext(ctx); sess != nil {
			s.subs.remove(sess.SessionID(), req.Params.URI)
		}
	})
	h.AddAfterInitialize(func(ctx context.Context, _ any, req *mcp.InitializeRequest, _ *mcp.InitializeResult) {
		sess := server.ClientSessionFromContext(ctx)
		init, _ := ctx.Value(initKey{}).(*initState)
		if sess == nil || sess.SessionID() == "" || init == nil {
			return
		}
		// Before the answer goes out: the binding is fixed, and the id
		// valid, from the session's first request on.
		id := sess.SessionID()
		own := ownFrom(ctx)
		s.conns.opened(id, bindingFrom(ctx), own)
		init.id = id
		s.agents.initialized(id, req.Params.ClientInfo.Name, req.Params.ClientInfo.Version, req.Params.ProtocolVersion, own)
		reservationFrom(ctx).release() // counted among the agents now
	})
	h.AddOnUnregisterSession(func(_ context.Context, sess server.ClientSession) {
		s.forgetSession(sess.SessionID())
	})
	h.AddBeforeSubscriptionsListen(func(ctx context.Context, _ any, req *mcp.SubscriptionsListenRequest) {
		sess := server.ClientSessionFromContext(ctx)
		uris := req.Params.Notifications.ResourceSubscriptions
		if sess == nil || len(uris) == 0 {
			return
		}
		// The listen stream's session lives as long as this request; its
		// context ends when the client cancels it or goes away. Its
		// binding is this request's, fixed now.
		key := sess
		wake := make(chan struct{}, 1)
		added := false
		for _, uri := range uris {
			scope, err := s.scopeOf(ctx, uri)
			if err != nil {
				continue
			}
			s.subs.add(key, wake, uri, scope)
			added = true
		}
		if added {
			ended := s.agents.listening(uris)
			reservationFrom(ctx).release() // counted among the agents now
			go func() {
				defer ended()
				defer s.subs.removeAll(key)
				_ = s.subs.deliver(key, wake, ctx.Done(), s.subs.closing, listenSender(sess.NotificationChannel(), ctx.Done()), nil, nil)
				<-ctx.Done()
			}()
		}
	})
}

// listenSender delivers to a 2026-07-28 subscriptions/listen stream, which
// mcp-go's broadcasts do not reach: straight into the stream's channel,
// which mcp-go's handler of the listen request writes.
func listenSender(ch chan<- mcp.JSONRPCNotification, done <-chan struct{}) batchSender {
	return func(uri string, msgs []wireMsg) error {
		params := map[string]any{"uri": uri}
		if msgs != nil {
			params["messages"] = json.RawMessage(appendMessages(nil, msgs))
		}
		n := mcp.JSONRPCNotification{
			JSONRPC: mcp.JSONRPC_VERSION,
			Notification: mcp.Notification{
				Method: mcp.MethodNotificationResourceUpdated,
				Params: mcp.NotificationParams{AdditionalFields: params},
			},
		}
		select {
		case <-done:
			return errGone
		default:
		}
		select {
		case ch <- n:
			return nil
		case <-done:
			return errGone
		default:
			return errBlocked
		}
	}
}
