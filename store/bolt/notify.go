package bolt

import (
	"context"

	"github.com/parley-chat/parley/store/follow"
)

// Listen implements follow.Listener for the one instance a bbolt file
// allows: every commit is this process's own and is published on its local
// bus, so there is nothing else to hear. It calls hint(0) and waits for ctx.
func (s *Store) Listen(ctx context.Context, hint func(seq uint64)) error {
	hint(0)
	<-ctx.Done()
	return nil
}

// Announce implements follow.Exchange: there is no other instance to tell.
func (s *Store) Announce(context.Context, follow.Announcement) error { return nil }

// ListenPresence implements follow.Exchange: there is no other instance to
// hear. It calls ready and waits for ctx.
func (s *Store) ListenPresence(ctx context.Context, ready func(), _ func(follow.Announcement)) error {
	ready()
	<-ctx.Done()
	return nil
}
