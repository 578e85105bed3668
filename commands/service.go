package commands

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
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
}

var (
	_ core.Handler    = (*Service)(nil)
	_ core.Authorizer = (*Service)(nil)
	_ core.Pairer     = (*Service)(nil)
)

// New returns a Service over store and bus.
func New(store core.Store, bus core.Bus, opts Options) *Service {
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
	p, err := newPairing(context.Background(), store, opts.Pairing)
	if err != nil {
		s.log.Error("the people admitted by pairing could not be read; they are not admitted until a restart", "err", err)
	}
	s.pairing = p
	return s
}

// lockOpen takes sess's lock, re-reads sess under it (commands of one
// session decide on the state they change) and refuses a closed session,
// releasing the lock again on error.
func (s *Service) lockOpen(ctx context.Context, sess *core.Session) (unlock func(), err error) {
	unlock = s.lock(sess.ID)
	cur, err := s.store.Session(ctx, sess.ID)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("commands: %w", err)
	}
	*sess = cur
	if sess.Status == core.StatusClosed {
		unlock()
		return nil, refusal(core.ErrSessionClosed, "this session is closed", "session "+string(sess.ID))
	}
	return unlock, nil
}

func (s *Service) lock(id core.SessionID) func() {
	h := fnv.New32a()
	h.Write([]byte(id))
	m := &s.locks[h.Sum32()%uint32(len(s.locks))]
	m.Lock()
	return m.Unlock
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
	switch cmd.Kind {
	case core.SendMessage, core.Answer, core.Cancel, core.Close, core.AssistantPost, core.Ask, core.RequestApproval:
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

func dedupKey(cmd core.Command) string {
	if cmd.PlatformID == "" {
		return ""
	}
	return string(cmd.Origin) + "\x00" + cmd.PlatformID
}

// redelivered reports a command already handled (its dedup key is stored),
// so it is answered as a duplicate before any check that its own first
// delivery would now fail (a /close redelivered after it closed).
func (s *Service) redelivered(ctx context.Context, cmd core.Command) (core.Result, bool, error) {
	key := dedupKey(cmd)
	if key == "" {
		return core.Result{}, false, nil
	}
	m, ok, err := s.store.Deduped(ctx, key)
	if err != nil || !ok {
		return core.Result{}, false, err
	}
	return core.Result{Session: m.Session, Message: m, Duplicate: true}, true, nil
}

// resolve finds the session a command is for: by id, or by the binding at
// the place it came from.
func (s *Service) resolve(ctx context.Context, cmd core.Command) (core.Session, error) {
	if cmd.Session != "" {
		sess, err := s.store.Session(ctx, cmd.Session)
		switch {
		case errors.Is(err, core.ErrNotFound):
			return core.Session{}, &core.UserError{Msg: "unknown session " + string(cmd.Session),
				Err: fmt.Errorf("commands: session %s: %w", cmd.Session, err)}
		case err != nil:
			return core.Session{}, fmt.Errorf("commands: session %s: %w", cmd.Session, err)
		}
		return sess, nil
	}
	if cmd.Origin.IsUI() && !cmd.Place.IsZero() {
		sess, err := s.store.SessionAt(ctx, cmd.Origin.Adapter(), cmd.Place)
		switch {
		case errors.Is(err, core.ErrNotFound):
			return core.Session{}, &core.UserError{Msg: "there is no session here", Err: fmt.Errorf("commands: no session at this place: %w", err)}
		case err != nil:
			return core.Session{}, fmt.Errorf("commands: the session at this place: %w", err)
		}
		return sess, nil
	}
	return core.Session{}, invalid("%s needs a session id", cmd.Kind)
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

// ReservationPrefix starts the name of every store cursor that reserves a
// session id for a platform update creating a session. Its value is the
// session id, whose time says when it was made; like a dedup key it only
// needs to outlive the platform's redeliveries, so the daemon prunes these
// cursors with the dedup keys (bolt.PruneOptions.CursorPrefixes).
const ReservationPrefix = "create\x00"

// createSession makes a session. A platform update that creates a session
// (Telegram's /new) is deduplicated through a reservation cursor written
// before the session: a redelivery finds the reserved id and returns (or
// completes) that session instead of creating a second one.
func (s *Service) createSession(ctx context.Context, cmd core.Command) (core.Result, error) {
	now := s.opts.Now()
	id := core.NewSessionID(now)
	dup := false
	if key := dedupKey(cmd); key != "" {
		cursor := ReservationPrefix + key
		prev, err := s.store.Cursor(ctx, cursor)
		if err != nil {
			return core.Result{}, fmt.Errorf("commands: create session: %w", err)
		}
		if prev != "" {
			id, dup = core.SessionID(prev), true
		} else if err := s.store.SetCursor(ctx, cursor, string(id)); err != nil {
			return core.Result{}, fmt.Errorf("commands: create session: %w", err)
		}
	}
	if dup {
		if sess, err := s.store.Session(ctx, id); err == nil {
			return core.Result{Session: sess.ID, Duplicate: true}, nil
		}
	}
	sess, events, err := s.create(ctx, id, cmd, now)
	if err != nil {
		return core.Result{}, err
	}
	s.publish(events)
	return core.Result{Session: sess.ID}, nil
}

func (s *Service) create(ctx context.Context, id core.SessionID, cmd core.Command, now time.Time) (core.Session, []core.Event, error) {
	title := strings.TrimSpace(cmd.Title)
	if title == "" {
		title = placeholderTitle(now)
	}
	if len(title) > 256 {
		return core.Session{}, nil, invalid("the title is longer than 256 bytes")
	}
	sess := core.Session{ID: id, Title: title, Placeholder: placeholderOf(cmd, title), Status: core.StatusIdle, Created: now, Updated: now}
	if cmd.Origin.IsUI() && !cmd.Place.IsZero() {
		sess.Bindings = map[core.AdapterName]core.Binding{
			cmd.Origin.Adapter(): {Adapter: cmd.Origin.Adapter(), Place: cmd.Place},
		}
	}
	ev := core.Event{Kind: core.EventSessionCreated, Session: id, Origin: cmd.Origin, Status: sess.Status, Title: title}
	sess, events, err := s.store.CreateSession(ctx, sess, ev)
	if err != nil {
		return core.Session{}, nil, fmt.Errorf("commands: create session: %w", err)
	}
	return sess, events, nil
}

// sendMessage appends a person's message to the inbox.
func (s *Service) sendMessage(ctx context.Context, cmd core.Command) (core.Result, error) {
	if err := s.checkContent(cmd.Text, cmd.Attachments); err != nil {
		return core.Result{}, err
	}
	sess, err := s.resolve(ctx, cmd)
	if errors.Is(err, core.ErrNotFound) && cmd.Session == "" && cmd.Origin.IsUI() {
		sess, err = s.startAt(ctx, cmd)
	}
	if err != nil {
		return core.Result{}, err
	}
	unlock, err := s.lockOpen(ctx, &sess)
	if err != nil {
		return core.Result{Session: sess.ID}, err
	}
	defer unlock()
	if q, opt, ok := numberedAnswer(sess, cmd.Text); ok {
		cmd.QuestionID, cmd.Option, cmd.Text = q.ID, opt, ""
		return s.answerLocked(ctx, sess, cmd)
	}
	mime := cmd.Mime
	if mime == "" {
		mime = core.MimeMarkdown
	}
	msg := core.Message{Session: sess.ID, Role: core.RoleUser, Actor: cmd.Actor, Origin: cmd.Origin,
		Mime: mime, Content: cmd.Text, Attachments: cmd.Attachments, Ref: cmd.Ref}
	queued := sess.Status == core.StatusWorking
	title, retitle := autoTitle(sess, cmd.Text)
	if retitle {
		sess.Title = title
	}
	events := []core.Event{{Kind: core.EventHumanMessage, Session: sess.ID, Origin: cmd.Origin, Message: &msg}}
	if queued {
		events = append(events, core.Event{Kind: core.EventQueued, Session: sess.ID, Origin: cmd.Origin, Message: &msg})
	}
	if sess.Status != core.StatusWorking || retitle {
		events = append(events, statusEvent(sess, core.StatusWorking, cmd.Origin))
	}
	res, err := s.store.Append(ctx, core.Append{
		Message:  msg,
		DedupKey: dedupKey(cmd),
		Update: func(ss *core.Session) {
			s.noteInput(ss, cmd)
			ss.Status = core.StatusWorking
			if retitle {
				ss.Title = title
			}
		},
		Events:  events,
		Cleanup: inputCleanup(sess.ID, cmd, s.opts.Now()),
	})
	if err != nil {
		return core.Result{}, fmt.Errorf("commands: append: %w", err)
	}
	if res.Duplicate {
		return core.Result{Session: sess.ID, Message: res.Message, Duplicate: true}, nil
	}
	s.publish(res.Events)
	return core.Result{Session: sess.ID, Message: res.Message, Queued: queued}, nil
}

// startAt starts a session at the place a person wrote from when none lives
// there yet, or returns the one a concurrent message just started.
func (s *Service) startAt(ctx context.Context, cmd core.Command) (core.Session, error) {
	h := fnv.New32a()
	h.Write([]byte(string(cmd.Origin) + "\x00" + cmd.Place.Chat + "\x00" + cmd.Place.Thread))
	m := &s.placeLocks[h.Sum32()%uint32(len(s.placeLocks))]
	m.Lock()
	defer m.Unlock()
	if sess, err := s.resolve(ctx, cmd); !errors.Is(err, core.ErrNotFound) {
		return sess, err
	}
	now := s.opts.Now()
	sess, events, err := s.create(ctx, core.NewSessionID(now), core.Command{Origin: cmd.Origin, Place: cmd.Place}, now)
	if err != nil {
		return core.Session{}, err
	}
	s.publish(events)
	return sess, nil
}

// noteInput records where a person wrote from: the session's last input
// origin (UI origins only) and, for a place not yet bound, the binding.
func (s *Service) noteInput(ss *core.Session, cmd core.Command) {
	if !cmd.Origin.IsUI() {
		return
	}
	ss.LastInputOrigin = cmd.Origin
	ss.Updated = s.opts.Now()
	name := cmd.Origin.Adapter()
	if _, ok := ss.Bindings[name]; !ok && !cmd.Place.IsZero() {
		if ss.Bindings == nil {
			ss.Bindings = map[core.AdapterName]core.Binding{}
		}
		ss.Bindings[name] = core.Binding{Adapter: name, Place: cmd.Place, Output: core.OutputState{Turn: ss.Turn}}
	}
}

// inputCleanup is the ledger row for a person's own message, deleted at
// their next input.
func inputCleanup(id core.SessionID, cmd core.Command, now time.Time) []core.CleanupEntry {
	if cmd.Ref.IsZero() || !cmd.Origin.IsUI() {
		return nil
	}
	ref := cmd.Ref
	if ref.Adapter == "" {
		ref.Adapter = cmd.Origin.Adapter()
	}
	return []core.CleanupEntry{{Session: id, Ref: ref, Lifetime: core.LifetimeNextInput, Others: true, Created: now}}
}

func statusEvent(sess core.Session, st core.Status, origin core.Origin) core.Event {
	return core.Event{Kind: core.EventSessionUpdated, Session: sess.ID, Origin: origin, Status: st, Title: sess.Title}
}

// numberedAnswer recognises "2" as the answer to the newest open question.
func numberedAnswer(sess core.Session, text string) (core.Question, int, bool) {
	if len(sess.Questions) == 0 {
		return core.Question{}, 0, false
	}
	q := sess.Questions[len(sess.Questions)-1]
	n, err := strconv.Atoi(strings.TrimSpace(text))
	if err != nil || n < 1 || n > len(q.Options) {
		return core.Question{}, 0, false
	}
	return q, n, true
}

// answer records a person's answer to an open question.
func (s *Service) answer(ctx context.Context, cmd core.Command) (core.Result, error) {
	sess, err := s.resolve(ctx, cmd)
	if err != nil {
		return core.Result{}, err
	}
	unlock, err := s.lockOpen(ctx, &sess)
	if err != nil {
		return core.Result{Session: sess.ID}, err
	}
	defer unlock()
	return s.answerLocked(ctx, sess, cmd)
}

// answerLocked answers an open question; the caller holds the session's
// lock and has checked it is open.
func (s *Service) answerLocked(ctx context.Context, sess core.Session, cmd core.Command) (core.Result, error) {
	qi := -1
	for i, q := range sess.Questions {
		if q.ID == cmd.QuestionID {
			qi = i
		}
	}
	if qi < 0 {
		// A second click on an answered question, or a redelivered click:
		// nothing is appended twice, and the adapter can say so.
		return core.Result{Session: sess.ID}, refusal(core.ErrInvalid, "this question is no longer open",
			fmt.Sprintf("question %q is not open (already answered?)", cmd.QuestionID))
	}
	q := sess.Questions[qi]
	text := strings.TrimSpace(cmd.Text)
	if cmd.Option > 0 {
		if cmd.Option > len(q.Options) {
			return core.Result{Session: sess.ID}, refusal(core.ErrInvalid, fmt.Sprintf("the question has no option %d", cmd.Option),
				fmt.Sprintf("question %q has no option %d", q.ID, cmd.Option))
		}
		text = q.Options[cmd.Option-1]
	}
	if err := s.checkContent(text, nil); err != nil {
		return core.Result{}, err
	}
	decided, decide, err := approvalAnswer(sess, q, text, cmd)
	if err != nil {
		return core.Result{Session: sess.ID}, err
	}
	msg := core.Message{Session: sess.ID, Role: core.RoleUser, Actor: cmd.Actor, Origin: cmd.Origin,
		Mime: core.MimeAnswer, Content: text, Ref: cmd.Ref}
	events := []core.Event{
		{Kind: core.EventAnswer, Session: sess.ID, Origin: cmd.Origin, Message: &msg, QuestionID: q.ID, Options: q.Options},
	}
	events = append(events, decided...)
	if sess.Status != core.StatusWorking {
		events = append(events, statusEvent(sess, core.StatusWorking, cmd.Origin))
	}
	res, err := s.store.Append(ctx, core.Append{
		Message:  msg,
		DedupKey: dedupKey(cmd),
		Update: func(ss *core.Session) {
			s.noteInput(ss, cmd)
			ss.Status = core.StatusWorking
			ss.Questions = removeQuestion(ss.Questions, q.ID)
			decide(ss)
		},
		Events:  events,
		Cleanup: inputCleanup(sess.ID, cmd, s.opts.Now()),
	})
	if err != nil {
		return core.Result{}, fmt.Errorf("commands: answer: %w", err)
	}
	if res.Duplicate {
		return core.Result{Session: sess.ID, Message: res.Message, Duplicate: true}, nil
	}
	s.publish(res.Events)
	return core.Result{Session: sess.ID, Message: res.Message}, nil
}

func removeQuestion(qs []core.Question, id string) []core.Question {
	out := make([]core.Question, 0, len(qs))
	for _, q := range qs {
		if q.ID != id {
			out = append(out, q)
		}
	}
	return out
}

// control appends a person's /cancel or /close for the agent to read; close
// also closes the session.
func (s *Service) control(ctx context.Context, cmd core.Command) (core.Result, error) {
	sess, err := s.resolve(ctx, cmd)
	if err != nil {
		return core.Result{}, err
	}
	unlock, err := s.lockOpen(ctx, &sess)
	if err != nil {
		return core.Result{Session: sess.ID}, err
	}
	defer unlock()
	word := "cancel"
	if cmd.Kind == core.Close {
		word = "close"
	}
	// The agent's own control commands are recorded as the system's, and
	// are no human input: agents are not notified of what they did.
	byAgent := cmd.Origin == core.OriginMCP
	role := core.RoleUser
	if byAgent {
		role = core.RoleSystem
	}
	msg := core.Message{Session: sess.ID, Role: role, Actor: cmd.Actor, Origin: cmd.Origin,
		Mime: core.MimeControl, Content: word, Ref: cmd.Ref}
	var events []core.Event
	if !byAgent {
		kind := core.EventCancel
		if cmd.Kind == core.Close {
			kind = core.EventHumanMessage
		}
		events = append(events, core.Event{Kind: kind, Session: sess.ID, Origin: cmd.Origin, Message: &msg})
	}
	update := func(ss *core.Session) { s.noteInput(ss, cmd) }
	if cmd.Kind == core.Close {
		events = append(events, statusEvent(sess, core.StatusClosed, cmd.Origin))
		update = func(ss *core.Session) {
			s.noteInput(ss, cmd)
			ss.Status = core.StatusClosed
			ss.Questions = nil
		}
	}
	res, err := s.store.Append(ctx, core.Append{Message: msg, DedupKey: dedupKey(cmd), Update: update, Events: events,
		Cleanup: inputCleanup(sess.ID, cmd, s.opts.Now())})
	if err != nil {
		return core.Result{}, fmt.Errorf("commands: %s: %w", word, err)
	}
	if res.Duplicate {
		return core.Result{Session: sess.ID, Message: res.Message, Duplicate: true}, nil
	}
	s.publish(res.Events)
	if cmd.Kind == core.Close {
		s.withdrawAll(ctx, sess)
	}
	return core.Result{Session: sess.ID, Message: res.Message}, nil
}

// rename sets the session's title.
func (s *Service) rename(ctx context.Context, cmd core.Command) (core.Result, error) {
	title := strings.TrimSpace(cmd.Title)
	if title == "" {
		return core.Result{}, invalid("the title is empty")
	}
	if len(title) > 256 {
		return core.Result{}, invalid("the title is longer than 256 bytes")
	}
	return s.update(ctx, cmd, func(ss *core.Session) []core.Event {
		ss.Title = title
		return []core.Event{statusEvent(*ss, ss.Status, cmd.Origin)}
	})
}

// update changes a session under its lock and publishes the events fn
// returns (fn sees the session as stored and may run more than once).
func (s *Service) update(ctx context.Context, cmd core.Command, fn func(*core.Session) []core.Event) (core.Result, error) {
	sess, err := s.resolve(ctx, cmd)
	if err != nil {
		return core.Result{}, err
	}
	unlock, err := s.lockOpen(ctx, &sess)
	if err != nil {
		return core.Result{Session: sess.ID}, err
	}
	defer unlock()
	// Decide the events on a copy; the store applies the same assignments.
	cp := sess
	cp.Bindings = nil
	events := fn(&cp)
	sess, events, err = s.store.UpdateSession(ctx, sess.ID, func(ss *core.Session) error {
		fn(ss)
		return nil
	}, events...)
	if err != nil {
		return core.Result{}, fmt.Errorf("commands: %s: %w", cmd.Kind, err)
	}
	s.publish(events)
	return core.Result{Session: sess.ID}, nil
}

// assistantPost appends the agent's message; it is routed to people.
func (s *Service) assistantPost(ctx context.Context, cmd core.Command) (core.Result, error) {
	if err := s.checkContent(cmd.Text, cmd.Attachments); err != nil {
		return core.Result{}, err
	}
	sess, err := s.resolve(ctx, cmd)
	if err != nil {
		return core.Result{}, err
	}
	unlock, err := s.lockOpen(ctx, &sess)
	if err != nil {
		return core.Result{Session: sess.ID}, err
	}
	defer unlock()
	mime := cmd.Mime
	if mime == "" {
		mime = core.MimeMarkdown
	}
	msg := core.Message{Session: sess.ID, Role: core.RoleAssistant, Actor: cmd.Actor, Origin: cmd.Origin,
		Mime: mime, Content: cmd.Text, Attachments: cmd.Attachments}
	res, err := s.store.Append(ctx, core.Append{
		Message:  msg,
		DedupKey: dedupKey(cmd),
		Events:   []core.Event{{Kind: core.EventAssistant, Session: sess.ID, Origin: cmd.Origin, Message: &msg}},
	})
	if err != nil {
		return core.Result{}, fmt.Errorf("commands: assistant post: %w", err)
	}
	if res.Duplicate {
		return core.Result{Session: sess.ID, Message: res.Message, Duplicate: true}, nil
	}
	s.publish(res.Events)
	return core.Result{Session: sess.ID, Message: res.Message}, nil
}

// outputUpdate replaces the live output of the current turn.
func (s *Service) outputUpdate(ctx context.Context, cmd core.Command) (core.Result, error) {
	if len(cmd.Text) > s.opts.MaxContent*4 {
		return core.Result{}, invalid("the output is %d bytes, more than the limit of %d", len(cmd.Text), s.opts.MaxContent*4)
	}
	if !utf8.ValidString(cmd.Text) {
		return core.Result{}, invalid("the output is not valid UTF-8")
	}
	return s.update(ctx, cmd, func(ss *core.Session) []core.Event {
		events := []core.Event{{Kind: core.EventOutput, Session: ss.ID, Origin: cmd.Origin, Text: cmd.Text, Turn: ss.Turn, Final: cmd.Final}}
		if ss.Status == core.StatusIdle {
			events = append(events, statusEvent(*ss, core.StatusWorking, cmd.Origin))
			ss.Status = core.StatusWorking
		}
		ss.Output, ss.OutputFinal = cmd.Text, cmd.Final
		return events
	})
}

// yieldTurn completes the agent's turn: the live output becomes final (if
// the agent did not say so itself) and the session waits for the person.
func (s *Service) yieldTurn(ctx context.Context, cmd core.Command) (core.Result, error) {
	return s.update(ctx, cmd, func(ss *core.Session) []core.Event {
		var events []core.Event
		if ss.Output != "" && !ss.OutputFinal {
			events = append(events, core.Event{Kind: core.EventOutput, Session: ss.ID, Origin: cmd.Origin, Text: ss.Output, Turn: ss.Turn, Final: true})
		}
		events = append(events, core.Event{Kind: core.EventTurnComplete, Session: ss.ID, Origin: cmd.Origin, Turn: ss.Turn})
		if ss.Status != core.StatusIdle {
			events = append(events, statusEvent(*ss, core.StatusIdle, cmd.Origin))
		}
		ss.Turn++
		ss.Output, ss.OutputFinal = "", false
		ss.Status = core.StatusIdle
		return events
	})
}

// ask shows a question with options; the answer arrives as an Answer command.
func (s *Service) ask(ctx context.Context, cmd core.Command) (core.Result, error) {
	if err := s.checkContent(cmd.Text, nil); err != nil {
		return core.Result{}, err
	}
	if len(cmd.Options) == 0 || len(cmd.Options) > 20 {
		return core.Result{}, invalid("a question needs 1 to 20 options, got %d", len(cmd.Options))
	}
	for i, o := range cmd.Options {
		if strings.TrimSpace(o) == "" || len(o) > 200 {
			return core.Result{}, invalid("option %d must be 1 to 200 bytes", i+1)
		}
	}
	sess, err := s.resolve(ctx, cmd)
	if err != nil {
		return core.Result{}, err
	}
	unlock, err := s.lockOpen(ctx, &sess)
	if err != nil {
		return core.Result{Session: sess.ID}, err
	}
	defer unlock()
	qid := cmd.QuestionID
	if qid == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		qid = hex.EncodeToString(b[:])
	}
	if len(qid) > 32 {
		return core.Result{}, invalid("the question id is longer than 32 bytes")
	}
	q := core.Question{ID: qid, Text: cmd.Text, Options: append([]string(nil), cmd.Options...), Asked: s.opts.Now()}
	msg := core.Message{Session: sess.ID, Role: core.RoleAssistant, Origin: cmd.Origin, Mime: core.MimeQuestion, Content: cmd.Text}
	events := []core.Event{{Kind: core.EventQuestion, Session: sess.ID, Origin: cmd.Origin, Message: &msg, QuestionID: qid, Options: q.Options}}
	if sess.Status != core.StatusWaiting {
		events = append(events, statusEvent(sess, core.StatusWaiting, cmd.Origin))
	}
	res, err := s.store.Append(ctx, core.Append{
		Message:  msg,
		DedupKey: dedupKey(cmd),
		Update: func(ss *core.Session) {
			ss.Questions = append(removeQuestion(ss.Questions, qid), q)
			ss.Status = core.StatusWaiting
		},
		Events: events,
	})
	if err != nil {
		return core.Result{}, fmt.Errorf("commands: ask: %w", err)
	}
	s.publish(res.Events)
	return core.Result{Session: sess.ID, Message: res.Message}, nil
}

// notice publishes feedback for the person who caused it. Notices are not
// inbox messages (the agent has no use for "🎤 Transcribing…"), only events.
func (s *Service) notice(ctx context.Context, cmd core.Command) (core.Result, error) {
	if err := s.checkContent(cmd.Text, nil); err != nil {
		return core.Result{}, err
	}
	lt := cmd.Lifetime
	if lt == "" {
		lt = core.LifetimeNextNotice
	}
	e := core.Event{Kind: core.EventNotice, Origin: cmd.Origin, Lifetime: lt, SourceOnly: true}
	sess, err := s.resolve(ctx, cmd)
	switch {
	case errors.Is(err, core.ErrNotFound) && cmd.Session == "" && cmd.Origin.IsUI() && !cmd.Place.IsZero():
		// No session lives there (a forum's General topic, a private chat
		// before its first message): the notice is addressed to the
		// place, and delivered durably through the outbox all the same.
		place := cmd.Place
		e.Place = &place
	case err != nil:
		return core.Result{}, err
	}
	e.Session = sess.ID
	e.Message = &core.Message{Session: sess.ID, Role: core.RoleSystem, Origin: cmd.Origin, Mime: core.MimeMarkdown, Content: cmd.Text, Time: s.opts.Now()}
	events, err := s.store.AppendEvents(ctx, e)
	if err != nil {
		return core.Result{}, fmt.Errorf("commands: notice: %w", err)
	}
	s.publish(events)
	return core.Result{Session: sess.ID}, nil
}

// status answers /status with a notice for the person who asked.
func (s *Service) status(ctx context.Context, cmd core.Command) (core.Result, error) {
	sess, err := s.resolve(ctx, cmd)
	if err != nil {
		return core.Result{}, err
	}
	text := fmt.Sprintf("%s %s — %s, %d turn(s) completed", sess.Status.Emoji(), sess.Title, sess.Status, sess.Turn)
	if n := len(sess.Questions); n > 0 {
		text += fmt.Sprintf(", %d open question(s)", n)
	}
	cmd.Text, cmd.Kind = text, core.Notice
	return s.notice(ctx, cmd)
}
