package commands

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/parley-chat/parley/core"
)

// Every command that changes a session runs in it through inSession, which
// holds the rules they share: find the session (by id, or by the binding at
// the place the command came from), take its lock and re-read it there, so
// the command decides on the state it changes, refuse a closed one, write
// the change in one store transaction — with the command's dedup key when
// it appends an inbox message — and publish the stored events only once
// that write is durable. What a command does is a change, decided by the
// command's own function under the lock; the write, the duplicate and the
// publishing are the same for all of them.

// A change is what a command does to its session, decided on the session
// as stored, under its lock.
type change struct {
	// op names the write in errors ("commands: <op>: …").
	op string
	// msg, when set, is appended to the session's inbox under the
	// command's dedup key, with the cleanup rows: a second delivery of the
	// command finds its first message and is a duplicate, writing and
	// publishing nothing. Without msg only the session and events are
	// written.
	msg     *core.Message
	cleanup []core.CleanupEntry
	// update changes the session in the same transaction. The store may run
	// it more than once on the session it holds, so it only assigns.
	update func(*core.Session)
	// moved, for a change without msg, returns an error when the session
	// the store holds is no longer the one the change was decided on (it
	// changed outside the lock): the change is then decided again on it,
	// at most maxRedecide times.
	moved func(core.Session) error
	// events are logged with the write and published after it. A change
	// with neither msg nor events repeats what was done before: nothing is
	// written and the result is a duplicate.
	events []core.Event
	// queued becomes the Result's Queued.
	queued bool
	// after runs once the events are published, still under the lock; not
	// for a duplicate.
	after func()
}

// maxRedecide bounds how often a change is decided again because the
// session moved under it (change.moved).
const maxRedecide = 10

// inSession runs the command cmd on its session: decide returns the
// change for the session as stored; it runs under the session's lock,
// once the session is known to be open, and its error refuses the
// command. Errors finding the session, or writing, leave the Result empty;
// a refusal once the session is known names it.
func (s *Service) inSession(ctx context.Context, cmd core.Command, decide func(core.Session) (change, error)) (core.Result, error) {
	sess, err := s.find(ctx, cmd)
	if err != nil {
		return core.Result{}, err
	}
	unlock, err := s.lockOpen(ctx, &sess)
	if err != nil {
		return core.Result{Session: sess.ID}, err
	}
	defer unlock()
	for attempt := 0; ; attempt++ {
		c, err := decide(sess)
		if err != nil {
			return core.Result{Session: sess.ID}, err
		}
		if c.msg != nil {
			return s.appendChange(ctx, cmd, sess.ID, c)
		}
		if len(c.events) == 0 {
			return core.Result{Session: sess.ID, Duplicate: true}, nil
		}
		var (
			cur   core.Session
			moved bool
		)
		_, events, err := s.store.UpdateSession(ctx, sess.ID, func(ss *core.Session) error {
			if c.moved != nil {
				if err := c.moved(*ss); err != nil {
					cur, moved = *ss, true
					return err
				}
			}
			if c.update != nil {
				c.update(ss)
			}
			return nil
		}, c.events...)
		if moved && err != nil && attempt < maxRedecide {
			sess = cur
			continue
		}
		if err != nil {
			return core.Result{}, fmt.Errorf("commands: %s: %w", c.op, err)
		}
		s.published(events, c)
		return core.Result{Session: sess.ID}, nil
	}
}

// appendChange writes a change with an inbox message, deduplicated by
// cmd's platform message id.
func (s *Service) appendChange(ctx context.Context, cmd core.Command, id core.SessionID, c change) (core.Result, error) {
	res, err := s.store.Append(ctx, core.Append{
		Message:  *c.msg,
		DedupKey: dedupKey(cmd),
		Update:   c.update,
		Events:   c.events,
		Cleanup:  c.cleanup,
	})
	if err != nil {
		return core.Result{}, fmt.Errorf("commands: %s: %w", c.op, err)
	}
	if res.Duplicate {
		return core.Result{Session: id, Message: res.Message, Duplicate: true}, nil
	}
	s.published(res.Events, c)
	return core.Result{Session: id, Message: res.Message, Queued: c.queued}, nil
}

// published publishes the stored events of c, then runs its after.
func (s *Service) published(events []core.Event, c change) {
	s.publish(events)
	if c.after != nil {
		c.after()
	}
}

// update changes the session cmd is for by fn, which returns the events
// of the change: they are decided on a scratch copy of the session, and
// the store runs fn again on the session it holds (so fn only assigns).
func (s *Service) update(ctx context.Context, cmd core.Command, fn func(*core.Session) []core.Event) (core.Result, error) {
	return s.inSession(ctx, cmd, func(sess core.Session) (change, error) {
		cp := scratch(sess)
		return change{op: string(cmd.Kind), events: fn(&cp), update: func(ss *core.Session) { fn(ss) }}, nil
	})
}

// scratch is a copy of sess to decide a change on: changing it leaves
// sess, and the store's copy, as they are.
func scratch(sess core.Session) core.Session {
	cp := sess
	cp.Bindings = nil
	cp.Tools = append([]core.ToolState(nil), sess.Tools...)
	return cp
}

// find resolves the session cmd is for. A person's message at a place
// where no session lives starts one there.
func (s *Service) find(ctx context.Context, cmd core.Command) (core.Session, error) {
	sess, err := s.resolve(ctx, cmd)
	if errors.Is(err, core.ErrNotFound) && cmd.Kind == core.SendMessage && cmd.Session == "" && cmd.Origin.IsUI() {
		return s.startAt(ctx, cmd)
	}
	return sess, err
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
