package commands

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
)

// Pairing lets the operator admit people without looking up their numeric
// ids. A person not on an origin's allow-list who writes to the bot in a
// private chat (the adapter sends core.Pair) is given a one-time code; the
// operator approves it (`parley pairing approve CODE`) and the person is
// admitted to that origin from then on, kept in the store beside the
// configured list, which still applies. Until then their messages reach
// nothing, as before. Codes expire after TTL; at most MaxPending wait per
// origin, so a crowd of strangers cannot flood the operator or the store;
// a person who writes again is told their code again at most every Retell.
// Strangers in groups are never told anything: adapters send Pair only
// from private chats.

// PairingOptions configure pairing.
type PairingOptions struct {
	// Enabled turns pairing on.
	Enabled bool
	// TTL is how long a code stays valid (default one hour).
	TTL time.Duration
	// MaxPending bounds the codes waiting per origin (default 3).
	MaxPending int
	// Retell is the least time between two replies to one person who
	// keeps writing while their code waits (default ten minutes).
	Retell time.Duration
}

// codeAlphabet has no letters or digits that read alike (0/O, 1/I/L).
const codeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

// newCode returns a random code like "K7QM-3XRD": 40 bits, told to one
// person and valid for an hour.
func newCode() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	return string(b[:4]) + "-" + string(b[4:])
}

// normalizeCode accepts a code as people type it: any case, with or
// without the dash, with spaces around.
func normalizeCode(code string) string {
	c := strings.ToUpper(strings.NewReplacer("-", "", " ", "").Replace(code))
	if len(c) == 8 {
		c = c[:4] + "-" + c[4:]
	}
	return c
}

// pairing is the Service's pairing state: the admitted people, read from
// the store at start and kept in step with it.
type pairing struct {
	store core.PairingStore
	opts  PairingOptions
	mu    sync.Mutex // serialises requests and approvals
	// admitted is read by Authorized on every command.
	admittedMu sync.RWMutex
	admitted   map[core.Origin]map[string]bool
}

func newPairing(ctx context.Context, store core.Store, opts PairingOptions) (*pairing, error) {
	ps, ok := store.(core.PairingStore)
	if !ok {
		return nil, nil
	}
	if opts.TTL <= 0 {
		opts.TTL = time.Hour
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 3
	}
	if opts.Retell <= 0 {
		opts.Retell = 10 * time.Minute
	}
	p := &pairing{store: ps, opts: opts, admitted: map[core.Origin]map[string]bool{}}
	all, err := ps.Admissions(ctx)
	if err != nil {
		return p, err
	}
	for _, a := range all {
		p.admit(a)
	}
	return p, nil
}

func (p *pairing) admit(a core.Admission) {
	p.admittedMu.Lock()
	defer p.admittedMu.Unlock()
	set := p.admitted[a.Origin]
	if set == nil {
		set = map[string]bool{}
		p.admitted[a.Origin] = set
	}
	set[a.Actor.ID] = true
}

func (p *pairing) isAdmitted(o core.Origin, id string) bool {
	if p == nil {
		return false
	}
	p.admittedMu.RLock()
	defer p.admittedMu.RUnlock()
	return p.admitted[o][id]
}

// Pairing implements core.Pairer.
func (s *Service) Pairing() bool { return s.pairing != nil && s.pairing.opts.Enabled }

// pair handles core.Pair.
func (s *Service) pair(ctx context.Context, cmd core.Command) (core.Result, error) {
	p := s.pairing
	if p == nil || !p.opts.Enabled {
		return core.Result{}, core.ErrUnauthorized
	}
	if !cmd.Origin.IsUI() || cmd.Actor.ID == "" || cmd.Place.IsZero() {
		return core.Result{}, invalid("pairing needs a platform, a person and a private chat")
	}
	if s.Authorized(cmd.Origin, cmd.Actor) {
		return core.Result{}, invalid("%s is allowed already", cmd.Actor.ID)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := s.opts.Now()
	reqs, err := p.store.Pairings(ctx)
	if err != nil {
		return core.Result{}, fmt.Errorf("commands: pair: %w", err)
	}
	var mine *core.PairingRequest
	pending := 0
	for _, r := range reqs {
		switch {
		case now.Sub(r.Created) >= p.opts.TTL:
			if _, err := p.store.DeletePairing(ctx, r.Code); err != nil && !errors.Is(err, core.ErrNotFound) {
				return core.Result{}, fmt.Errorf("commands: pair: %w", err)
			}
		case r.Origin == cmd.Origin && r.Actor.ID == cmd.Actor.ID:
			mine = &r
			pending++
		case r.Origin == cmd.Origin:
			pending++
		}
	}
	switch {
	case mine != nil && now.Sub(mine.Told) < p.opts.Retell:
		return core.Result{}, core.ErrUnauthorized // told recently: silence
	case mine != nil:
		mine.Told, mine.Place = now, cmd.Place
	case pending >= p.opts.MaxPending:
		s.log.Info("pairing request ignored: too many codes wait for the operator (parley pairing list)",
			"origin", cmd.Origin, "user", cmd.Actor.ID, "pending", pending)
		return core.Result{}, core.ErrUnauthorized
	default:
		mine = &core.PairingRequest{Code: newCode(), Origin: cmd.Origin, Actor: cmd.Actor, Place: cmd.Place, Created: now, Told: now}
		s.log.Info("pairing requested", "origin", cmd.Origin, "user", cmd.Actor.ID, "name", cmd.Actor.Name, "code", mine.Code)
	}
	if err := p.store.PutPairing(ctx, *mine); err != nil {
		return core.Result{}, fmt.Errorf("commands: pair: %w", err)
	}
	left := mine.Created.Add(p.opts.TTL).Sub(now).Round(time.Minute)
	text := fmt.Sprintf("🔑 You are not on this bot's list yet. Your pairing code is `%s`: give it to whoever runs this parley, "+
		"who can let you in with `parley pairing approve %s`. The code expires in %s.", mine.Code, mine.Code, minutes(left))
	return s.notice(ctx, core.Command{Kind: core.Notice, Origin: cmd.Origin, Place: cmd.Place, Text: text, Lifetime: core.LifetimeManual})
}

func minutes(d time.Duration) string {
	if m := int(d.Minutes()); m != 1 {
		return fmt.Sprintf("%d minutes", m)
	}
	return "1 minute"
}

// Pairings returns the codes waiting for the operator, oldest first, and
// the people admitted so far.
func (s *Service) Pairings(ctx context.Context) ([]core.PairingRequest, []core.Admission, error) {
	p := s.pairing
	if p == nil {
		return nil, nil, nil
	}
	reqs, err := p.store.Pairings(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("commands: pairings: %w", err)
	}
	now := s.opts.Now()
	live := reqs[:0]
	for _, r := range reqs {
		if now.Sub(r.Created) < p.opts.TTL {
			live = append(live, r)
		}
	}
	adm, err := p.store.Admissions(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("commands: pairings: %w", err)
	}
	return live, adm, nil
}

// ApprovePairing admits the person who was given code: from now on they
// are allowed on that code's platform, and they are told so.
func (s *Service) ApprovePairing(ctx context.Context, code string) (core.Admission, error) {
	p := s.pairing
	r, unlock, err := s.livePairing(ctx, code)
	if err != nil {
		return core.Admission{}, err
	}
	a, err := p.store.ApprovePairing(ctx, r.Code, s.opts.Now())
	unlock()
	if err != nil {
		return core.Admission{}, fmt.Errorf("commands: approve pairing: %w", err)
	}
	p.admit(a)
	s.log.Info("pairing approved", "origin", a.Origin, "user", a.Actor.ID, "name", a.Actor.Name, "code", a.Code)
	if _, err := s.notice(ctx, core.Command{Kind: core.Notice, Origin: r.Origin, Place: r.Place, Lifetime: core.LifetimeManual,
		Text: "✅ You're in: write your message again to start a session."}); err != nil {
		s.log.Warn("pairing approved, but the person could not be told", "origin", a.Origin, "user", a.Actor.ID, "err", err)
	}
	return a, nil
}

// DenyPairing drops the request with code; the person is not told.
func (s *Service) DenyPairing(ctx context.Context, code string) (core.PairingRequest, error) {
	r, unlock, err := s.livePairing(ctx, code)
	if err != nil {
		return core.PairingRequest{}, err
	}
	defer unlock()
	if _, err := s.pairing.store.DeletePairing(ctx, r.Code); err != nil {
		return core.PairingRequest{}, fmt.Errorf("commands: deny pairing: %w", err)
	}
	s.log.Info("pairing denied", "origin", r.Origin, "user", r.Actor.ID, "code", r.Code)
	return r, nil
}

// livePairing finds the request with code, holding the pairing lock
// until unlock, or returns a UserError saying why there is none (an
// expired one is removed).
func (s *Service) livePairing(ctx context.Context, code string) (core.PairingRequest, func(), error) {
	p := s.pairing
	if p == nil || !p.opts.Enabled {
		return core.PairingRequest{}, nil, refusal(core.ErrInvalid, "pairing is off: set [access] pairing = true", "")
	}
	p.mu.Lock()
	code = normalizeCode(code)
	reqs, err := p.store.Pairings(ctx)
	if err != nil {
		p.mu.Unlock()
		return core.PairingRequest{}, nil, fmt.Errorf("commands: pairing %s: %w", code, err)
	}
	for _, r := range reqs {
		if r.Code != code {
			continue
		}
		if s.opts.Now().Sub(r.Created) < p.opts.TTL {
			return r, p.mu.Unlock, nil
		}
		_, _ = p.store.DeletePairing(ctx, code)
		p.mu.Unlock()
		return r, nil, refusal(core.ErrNotFound, "pairing code "+code+" has expired; ask them to write to the bot again for a new one", "")
	}
	p.mu.Unlock()
	return core.PairingRequest{}, nil, refusal(core.ErrNotFound, "no pairing code "+code+" is waiting (parley pairing list shows them)", "")
}
