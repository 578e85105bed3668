package commands

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

// Options configure a Service.
type Options struct {
	// Allow maps a UI origin to the actor ids allowed to use it. An origin
	// with an entry admits only those ids (an empty list admits nobody);
	// an origin without an entry admits everyone (the local web page).
	Allow map[core.Origin][]string
	// MaxContent is the largest message content in bytes (default 64 KiB).
	MaxContent int
	// Agents are the agents parley runs, the default (named
	// core.DefaultAgent) first; none when it runs none (agent.go).
	Agents []Agent
	// Pairing admits people by one-time codes (pairing.go).
	Pairing PairingOptions
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Service executes commands. It implements core.Handler.
type Service struct {
	store core.Store
	bus   core.Bus
	opts  Options
	log   *slog.Logger
	allow map[core.Origin]map[string]bool
	locks [64]sync.Mutex
	// placeLocks serialise starting a session at a place, so concurrent
	// first messages there share one session. Separate from locks, which
	// are taken while one of these is held.
	placeLocks [64]sync.Mutex
	// pairing is nil when the store keeps no pairings.
	pairing *pairing
	// ids makes the ids of the sessions created here, ordered by the
	// Service's clock (opts.Now) alone.
	ids core.SessionIDs
}

var (
	_ core.Handler    = (*Service)(nil)
	_ core.Authorizer = (*Service)(nil)
	_ core.Pairer     = (*Service)(nil)
)

// New returns a Service over store and bus. It reads the people admitted
// by pairing from the store, and fails when they cannot be read.
func New(ctx context.Context, store core.Store, bus core.Bus, opts Options) (*Service, error) {
	if opts.MaxContent <= 0 {
		opts.MaxContent = 64 << 10
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{store: store, bus: bus, opts: opts, log: opts.Logger, allow: map[core.Origin]map[string]bool{}}
	for o, ids := range opts.Allow {
		set := map[string]bool{}
		for _, id := range ids {
			set[id] = true
		}
		s.allow[o] = set
	}
	p, err := newPairing(ctx, store, opts.Pairing)
	if err != nil {
		return nil, fmt.Errorf("commands: the people admitted by pairing: %w", err)
	}
	s.pairing = p
	return s, nil
}

// Authorized implements core.Authorizer: it reports whether actor may give
// commands from origin — by the configured list, or admitted by a pairing.
func (s *Service) Authorized(origin core.Origin, actor core.Actor) bool {
	set, listed := s.allow[origin]
	return !listed || set[actor.ID] || s.pairing.isAdmitted(origin, actor.ID)
}

// Handle implements core.Handler.
func (s *Service) Handle(ctx context.Context, cmd core.Command) (core.Result, error) {
	if cmd.Kind == core.Pair {
		return s.pair(ctx, cmd)
	}
	if cmd.Origin.IsUI() && !s.Authorized(cmd.Origin, cmd.Actor) {
		s.log.Debug("ignoring unauthorized input", "origin", cmd.Origin, "actor", cmd.Actor.ID, "kind", cmd.Kind)
		return core.Result{}, core.ErrUnauthorized
	}
	var (
		res core.Result
		err error
	)
	// The commands whose change appends an inbox message under their dedup
	// key (session.go) are answered as duplicates before any other check.
	switch cmd.Kind {
	case core.SendMessage, core.Answer, core.Cancel, core.Close, core.AssistantPost, core.Ask, core.RequestApproval, core.SetAgent:
		if res, dup, err := s.redelivered(ctx, cmd); err != nil || dup {
			return res, err
		}
	}
	switch cmd.Kind {
	case core.CreateSession:
		res, err = s.createSession(ctx, cmd)
	case core.SendMessage:
		res, err = s.sendMessage(ctx, cmd)
	case core.Answer:
		res, err = s.answer(ctx, cmd)
	case core.Cancel, core.Close:
		res, err = s.control(ctx, cmd)
	case core.Rename:
		res, err = s.rename(ctx, cmd)
	case core.SetAgent:
		res, err = s.setAgent(ctx, cmd)
	case core.CheckAgent:
		_, err = s.agentName(cmd.Agent)
	case core.AssistantPost:
		res, err = s.assistantPost(ctx, cmd)
	case core.OutputUpdate:
		res, err = s.outputUpdate(ctx, cmd)
	case core.YieldTurn:
		res, err = s.yieldTurn(ctx, cmd)
	case core.Ask:
		res, err = s.ask(ctx, cmd)
	case core.Withdraw:
		res, err = s.withdraw(ctx, cmd)
	case core.Notice:
		res, err = s.notice(ctx, cmd)
	case core.StatusQuery:
		res, err = s.status(ctx, cmd)
	case core.ToolCallStart:
		res, err = s.toolCall(ctx, cmd)
	case core.ToolCallOutput:
		res, err = s.toolOutput(ctx, cmd)
	case core.RequestApproval:
		res, err = s.requestApproval(ctx, cmd)
	default:
		err = invalid("unknown command kind %q", cmd.Kind)
	}
	return res, err
}

func (s *Service) publish(events []core.Event) {
	for _, e := range events {
		s.logEvent(e)
		s.bus.Publish(e)
	}
}

// logEvent is the operator's account of what happened, without content:
// sessions created and closed at info level, each message in and out at
// debug level.
func (s *Service) logEvent(e core.Event) {
	switch e.Kind {
	case core.EventSessionCreated:
		s.log.Info("session created", "session", e.Session, "origin", e.Origin)
	case core.EventSessionUpdated:
		if e.Status == core.StatusClosed {
			s.log.Info("session closed", "session", e.Session, "origin", e.Origin)
		}
	case core.EventHumanMessage, core.EventAnswer, core.EventCancel:
		s.log.Debug("message in", "session", e.Session, "origin", e.Origin, "kind", e.Kind, "bytes", messageSize(e))
	case core.EventAssistant, core.EventQuestion, core.EventNotice:
		s.log.Debug("message out", "session", e.Session, "origin", e.Origin, "kind", e.Kind, "bytes", messageSize(e))
	}
}

func messageSize(e core.Event) int {
	if e.Message == nil {
		return 0
	}
	return len(e.Message.Content)
}

// refusal is an error whose msg is told to the person (or agent) whose
// command was refused, as a core.UserError; detail, when given, replaces
// msg in the error's text for logs, which wraps sentinel for errors.Is.
func refusal(sentinel error, msg, detail string) error {
	if detail == "" {
		detail = msg
	}
	return &core.UserError{Msg: msg, Err: fmt.Errorf("commands: %s: %w", detail, sentinel)}
}

// invalid refuses a malformed command (core.ErrInvalid), with the same
// words for people and for logs.
func invalid(format string, args ...any) error {
	return refusal(core.ErrInvalid, fmt.Sprintf(format, args...), "")
}

func (s *Service) checkContent(text string, atts []core.Attachment) error {
	if strings.TrimSpace(text) == "" && len(atts) == 0 {
		return invalid("the message is empty")
	}
	if len(text) > s.opts.MaxContent {
		return invalid("the message is %d bytes, more than the limit of %d", len(text), s.opts.MaxContent)
	}
	if !utf8.ValidString(text) {
		return invalid("the message is not valid UTF-8")
	}
	return nil
}

func statusEvent(sess core.Session, st core.Status, origin core.Origin) core.Event {
	return core.Event{Kind: core.EventSessionUpdated, Session: sess.ID, Origin: origin, Status: st, Title: sess.Title}
}
