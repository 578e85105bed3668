package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notifications. Every group transaction that logs events notifies
// NotifyChannel from inside the transaction, with the new last seq as the
// payload: PostgreSQL delivers a notification at commit, to every session
// that listens, and never for a rollback, so a hint never announces what is
// not there. It is only a hint: a listener that was disconnected hears
// nothing of what was committed meanwhile, which is why store/follow also
// polls and reads the log as the truth. The notification costs the group a
// statement in its last batch (no round trip); PostgreSQL queues
// notifications under a lock taken at commit, which the counters row
// already serialises.

// NotifyChannel is the channel commits of events are notified on.
const NotifyChannel = "parley_events"

// Listening checks its connection when no notification came for
// listenCheck, and gives up when the check takes longer than
// listenCheckTimeout: a connection cut without a FIN (a dead host, a
// dropped NAT mapping) would otherwise keep a listener waiting for hours.
const (
	listenCheck        = 30 * time.Second
	listenCheckTimeout = 5 * time.Second
)

// queueNotify adds the notification of a group's commit to its batch.
func queueNotify(b *pgx.Batch, last uint64) {
	b.Queue(`SELECT pg_notify('`+NotifyChannel+`', $1)`, strconv.FormatUint(last, 10))
}

// Listen implements follow.Listener: it calls hint with the last seq of
// every commit of events, by any instance on this database, until ctx ends
// (it returns nil) or the connection fails (it returns the error). It uses
// a connection of its own, outside the pool, held for as long as it
// listens, and calls hint(0) once it listens. hint must not block: the
// server queues notifications for a session that reads them slowly, and
// gives up on it when its queue (8 GB) is full.
func (s *Store) Listen(ctx context.Context, hint func(seq uint64)) error {
	return s.listen(ctx, NotifyChannel, func() { hint(0) }, func(payload string) {
		seq, err := strconv.ParseUint(payload, 10, 64)
		if err != nil {
			seq = 0 // not ours: read anyway
		}
		hint(seq)
	})
}

// listen calls on with the payload of each notification on channel, after
// ready once it listens, until ctx ends or the connection fails.
func (s *Store) listen(ctx context.Context, channel string, ready func(), on func(payload string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return fmt.Errorf("postgres: listen: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, `LISTEN `+channel); err != nil {
		return listenErr(ctx, err)
	}
	ready()
	for {
		wctx, cancel := context.WithTimeout(ctx, listenCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			on(n.Payload)
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			cctx, cancel := context.WithTimeout(ctx, listenCheckTimeout)
			err := conn.Ping(cctx)
			cancel()
			if err != nil {
				return listenErr(ctx, err)
			}
		default:
			return listenErr(ctx, err)
		}
	}
}

func listenErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("postgres: listen: %w", err)
}
