package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/follow"
)

// Presence between instances (store/follow's Exchange) goes over
// PresenceChannel, never into a table: it is about who can hear now. A
// notification's payload is limited to 8000 bytes, which a status with a
// few hundred sessions exceeds, so an announcement is sent as numbered
// parts in one transaction (delivered together at its commit) and put
// together again by the listener.

// PresenceChannel is the channel agent presence is announced on.
const PresenceChannel = "parley_presence"

// maxPresencePart bounds the sessions' share of one part's payload, well
// below PostgreSQL's 8000 bytes.
const maxPresencePart = 6000

// presencePart is one notification of an announcement.
type presencePart struct {
	follow.Announcement
	// Gen numbers the announcements of one Store; Part counts from 0 to
	// Parts-1. Part 0 carries Ready and All, every part some sessions.
	Gen   uint64 `json:"gen"`
	Part  int    `json:"part"`
	Parts int    `json:"parts"`
}

// Announce implements follow.Exchange.
func (s *Store) Announce(ctx context.Context, a follow.Announcement) error {
	parts := splitAnnouncement(a, s.presenceGen.Add(1))
	payloads := make([]string, len(parts))
	for i, p := range parts {
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("postgres: announce: %w", err)
		}
		payloads[i] = string(b)
	}
	_, err := s.pool.Exec(ctx, `SELECT pg_notify('`+PresenceChannel+`', p) FROM unnest($1::text[]) p`, payloads)
	if err != nil {
		return fmt.Errorf("postgres: announce: %w", err)
	}
	return nil
}

func splitAnnouncement(a follow.Announcement, gen uint64) []presencePart {
	ids := make([]core.SessionID, 0, len(a.Status.Sessions))
	for id := range a.Status.Sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	first := presencePart{Announcement: a, Gen: gen}
	first.Status.Sessions = map[core.SessionID]int{}
	parts := []presencePart{first}
	size := 0
	for _, id := range ids {
		n := len(id) + 24 // quotes, colon, count, comma: generously
		if size+n > maxPresencePart {
			next := presencePart{Announcement: follow.Announcement{Instance: a.Instance}, Gen: gen, Part: len(parts)}
			next.Status.Sessions = map[core.SessionID]int{}
			parts = append(parts, next)
			size = 0
		}
		parts[len(parts)-1].Status.Sessions[id] = a.Status.Sessions[id]
		size += n
	}
	for i := range parts {
		parts[i].Parts = len(parts)
	}
	return parts
}

// ListenPresence implements follow.Exchange on a connection of its own.
func (s *Store) ListenPresence(ctx context.Context, ready func(), hear func(follow.Announcement)) error {
	pending := map[string]*presencePending{} // by instance
	return s.listen(ctx, PresenceChannel, ready, func(payload string) {
		var p presencePart
		dec := json.NewDecoder(strings.NewReader(payload))
		if err := dec.Decode(&p); err != nil || p.Parts < 1 || p.Part < 0 || p.Part >= p.Parts {
			return // not an announcement of this parley
		}
		if p.Parts == 1 {
			hear(p.Announcement)
			return
		}
		pp := pending[p.Instance]
		if pp == nil || pp.gen != p.Gen {
			pp = &presencePending{gen: p.Gen, got: map[int]bool{}}
			pending[p.Instance] = pp
		}
		if p.Part == 0 {
			pp.a.Instance, pp.a.Gone = p.Instance, p.Gone
			pp.a.Status.Ready, pp.a.Status.All = p.Status.Ready, p.Status.All
		}
		if pp.a.Status.Sessions == nil {
			pp.a.Status.Sessions = map[core.SessionID]int{}
		}
		for id, n := range p.Status.Sessions {
			pp.a.Status.Sessions[id] = n
		}
		pp.got[p.Part] = true
		if len(pp.got) == p.Parts {
			delete(pending, p.Instance)
			hear(pp.a)
		}
	})
}

// presencePending is an announcement whose parts are coming in.
type presencePending struct {
	gen uint64
	got map[int]bool
	a   follow.Announcement
}
