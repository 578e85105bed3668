package bolt

import "context"

// Listen implements follow.Listener for the one instance a bbolt file
// allows: every commit is this process's own and is published on its local
// bus, so there is nothing else to hear. It calls hint(0) and waits for ctx.
func (s *Store) Listen(ctx context.Context, hint func(seq uint64)) error {
	hint(0)
	<-ctx.Done()
	return nil
}
