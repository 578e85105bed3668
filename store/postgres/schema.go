package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parley-chat/parley/core"
)

// migrations are the schema's versions: migrations[i] takes a database from
// version i to i+1. They are only ever appended to; a released one is never
// changed. Keys and platform ids are bytea, not text: they may hold any
// byte (dedup keys and cursor names hold NUL, which text refuses), and
// bytea compares bytewise whatever the database's collation, which is the
// order of ids that the watermark relies on.
var migrations = []string{
	// 1: everything of bbolt's layout, one table per bucket.
	`
CREATE TABLE counters (
	id          integer PRIMARY KEY CHECK (id = 1),
	last_id     bytea   NOT NULL, -- the last message id's 6-byte time and 10 bytes of entropy
	last_seq    bigint  NOT NULL, -- the last event's seq
	events_from bigint  NOT NULL  -- the oldest seq the event log holds (last_seq+1 when empty)
);
INSERT INTO counters VALUES (1, '', 0, 1);

CREATE TABLE sessions (
	id        bytea   PRIMARY KEY,
	status    text    NOT NULL,
	streaming boolean NOT NULL,
	data      bytea   NOT NULL -- Session JSON
);
CREATE INDEX sessions_by_status ON sessions (status, id);
CREATE INDEX sessions_streaming ON sessions (id) WHERE streaming;

CREATE TABLE places (
	adapter    bytea NOT NULL,
	chat       bytea NOT NULL,
	thread     bytea NOT NULL,
	session_id bytea NOT NULL,
	PRIMARY KEY (adapter, chat, thread)
);

CREATE TABLE messages (
	id         bytea PRIMARY KEY,
	session_id bytea NOT NULL,
	data       bytea NOT NULL -- Message JSON, its id left empty
);
CREATE INDEX messages_by_session ON messages (session_id, id);

CREATE TABLE dedup (
	key        bytea PRIMARY KEY,
	message_id bytea NOT NULL
);
CREATE INDEX dedup_by_message ON dedup (message_id);

CREATE TABLE events (
	seq        bigint PRIMARY KEY,
	message_id bytea, -- the inbox message the event carries, not copied into data
	data       bytea NOT NULL
);

CREATE TABLE journal (
	seq        bigint PRIMARY KEY,
	message_id bytea,
	data       bytea NOT NULL
);
CREATE TABLE journal_done (
	seq bigint NOT NULL REFERENCES journal ON DELETE CASCADE,
	key bytea  NOT NULL,
	PRIMARY KEY (seq, key)
);

CREATE TABLE ledger (
	adapter    bytea       NOT NULL,
	chat       bytea       NOT NULL,
	thread     bytea       NOT NULL,
	message    bytea       NOT NULL,
	session_id bytea       NOT NULL,
	created    timestamptz NOT NULL,
	data       bytea       NOT NULL, -- CleanupEntry JSON
	PRIMARY KEY (adapter, chat, thread, message)
);
CREATE INDEX ledger_by_session ON ledger (session_id);
CREATE INDEX ledger_by_created ON ledger (created);

CREATE TABLE cursors (
	name  bytea PRIMARY KEY,
	value bytea NOT NULL
);

CREATE TABLE pairing (
	code   bytea PRIMARY KEY,
	origin bytea NOT NULL,
	actor  bytea NOT NULL,
	data   bytea NOT NULL
);
CREATE TABLE admitted (
	origin bytea NOT NULL,
	actor  bytea NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (origin, actor)
);
`,
	// 2: leases with fencing (see lease.go). holder is NULL once released;
	// the row stays so that the token keeps increasing per name.
	`
CREATE TABLE leases (
	name    text        PRIMARY KEY,
	holder  text,
	token   bigint      NOT NULL,
	expires timestamptz NOT NULL -- by the database's clock
);
`,
	// 3: journal claims (claim.go): who delivers a journaled event, and
	// until when by the database clock.
	`
ALTER TABLE journal
	ADD COLUMN claimed_by  text,
	ADD COLUMN claim_until timestamptz;
`,
	// 4: pacing shared among instances (pace.go): per budget or pause
	// key, the slots taken within its window and the pause a platform
	// asked for, by the database clock; parley_pace_take takes slots in
	// several windows at once, all or none, in one round trip. Unlogged:
	// a take is on the path of every platform call and need not wait for
	// a WAL flush; what a crash of the database forgets is a minute of
	// counting at most.
	`
CREATE UNLOGGED TABLE pace (
	key          bytea         PRIMARY KEY,
	takes        timestamptz[] NOT NULL DEFAULT '{}', -- slots taken within the window, oldest first
	paused_until timestamptz,
	idle_at      timestamptz   NOT NULL -- from then on the row holds nothing: pruned
);
CREATE INDEX pace_idle ON pace (idle_at);

CREATE FUNCTION parley_pace_take(keys bytea[], ns integer[], pers bigint[], pauses bytea[], prune boolean)
RETURNS TABLE (held bytea, wait_us bigint, taken timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
	t       timestamptz;
	i       integer;
	kept    timestamptz[];
	locked  bigint;
	refused boolean := false;
BEGIN
	IF cardinality(keys) > 0 THEN
		-- Every window's row, locked in key order so that takers never
		-- deadlock; a row pruned between the insert and the lock is
		-- inserted again.
		LOOP
			INSERT INTO pace (key, idle_at)
				SELECT DISTINCT k, clock_timestamp() FROM unnest(keys) k ORDER BY 1
				ON CONFLICT (key) DO NOTHING;
			SELECT count(*) INTO locked
				FROM (SELECT 1 FROM pace WHERE key = ANY(keys) ORDER BY key FOR UPDATE) l;
			EXIT WHEN locked = (SELECT count(DISTINCT k) FROM unnest(keys) k);
		END LOOP;
	END IF;
	-- Judged once the rows are ours: a taker that waited for another
	-- comes after its slot.
	t := clock_timestamp();
	FOR i IN 1 .. coalesce(cardinality(keys), 0) LOOP
		SELECT coalesce(array_agg(x ORDER BY x), '{}') INTO kept
			FROM pace p, unnest(p.takes) x
			WHERE p.key = keys[i] AND x > t - pers[i] * interval '1 microsecond';
		IF cardinality(kept) >= ns[i] THEN
			held := keys[i];
			wait_us := ceil(extract(epoch FROM kept[cardinality(kept) - ns[i] + 1]
				+ pers[i] * interval '1 microsecond' - t) * 1000000)::bigint;
			refused := true;
			RETURN NEXT;
		END IF;
	END LOOP;
	FOR held, wait_us IN
		SELECT p.key, ceil(extract(epoch FROM p.paused_until - t) * 1000000)::bigint
		FROM pace p WHERE p.key = ANY(pauses) AND p.paused_until > t
	LOOP
		refused := true;
		RETURN NEXT;
	END LOOP;
	IF NOT refused THEN
		FOR i IN 1 .. coalesce(cardinality(keys), 0) LOOP
			UPDATE pace p SET
				takes = ARRAY(SELECT x FROM unnest(p.takes) x
					WHERE x > t - pers[i] * interval '1 microsecond' ORDER BY x) || t,
				idle_at = greatest(t + pers[i] * interval '1 microsecond', p.paused_until)
			WHERE p.key = keys[i];
		END LOOP;
		held := NULL;
		wait_us := NULL;
		taken := t;
		RETURN NEXT;
	END IF;
	IF prune THEN
		DELETE FROM pace WHERE key IN (
			SELECT key FROM pace WHERE idle_at < t ORDER BY idle_at LIMIT 1000
			FOR UPDATE SKIP LOCKED);
	END IF;
END
$$;
`,
	// 5: cleanup-ledger claims (ledgerclaim.go): who deletes a due row, and
	// until when by the database clock. due is derived from the row's JSON
	// (encoding/json writes the flag as "due":true, and a string value
	// cannot hold that text unescaped), so every writer (AddCleanup,
	// Append, parley migrate's copy) keeps it right without naming it.
	// IF NOT EXISTS: tests take a database back to an older version by
	// hand, leaving these columns in place.
	`
ALTER TABLE ledger
	ADD COLUMN IF NOT EXISTS due boolean GENERATED ALWAYS AS (position('"due":true'::bytea IN data) > 0) STORED,
	ADD COLUMN IF NOT EXISTS claimed_by  text,
	ADD COLUMN IF NOT EXISTS claim_until timestamptz;
CREATE INDEX IF NOT EXISTS ledger_due ON ledger (created) WHERE due;
`,
}

// SchemaVersion is the schema version this code writes: the number of
// migrations.
const SchemaVersion = 5

// migrateLock is the advisory lock key under which migrations run ("parley"
// in ASCII), so that instances starting at once migrate one after the
// other: the second finds the work done.
const migrateLock = 0x7061726c6579

// ErrSchemaTooNewFix says what to do about a database written by a newer
// parley.
const ErrSchemaTooNewFix = "run the parley version that wrote it (or a newer one); an older parley cannot go back to an older schema"

// migrate brings the database to SchemaVersion in one transaction, or
// refuses a database with a newer schema and leaves it untouched. The
// advisory lock is a transaction's, released with it, so a connection
// pooler or a dropped connection cannot leave it held.
func migrate(ctx context.Context, pool *pgxpool.Pool) (err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
		return fmt.Errorf("lock for migration: %w", err)
	}
	_, err = tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		one     boolean PRIMARY KEY DEFAULT true CHECK (one),
		version integer NOT NULL
	)`)
	if err != nil {
		return err
	}
	version := 0
	err = tx.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&version)
	fresh := errors.Is(err, pgx.ErrNoRows)
	if err != nil && !fresh {
		return err
	}
	if version > SchemaVersion {
		return fmt.Errorf("the database has schema version %d, this parley knows versions up to %d: %s: %w",
			version, SchemaVersion, ErrSchemaTooNewFix, core.ErrSchemaTooNew)
	}
	if version == SchemaVersion {
		return tx.Commit(ctx)
	}
	for v := version; v < SchemaVersion; v++ {
		if _, err := tx.Exec(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrate to schema version %d: %w", v+1, err)
		}
	}
	if fresh {
		_, err = tx.Exec(ctx, `INSERT INTO schema_version (version) VALUES ($1)`, SchemaVersion)
	} else {
		_, err = tx.Exec(ctx, `UPDATE schema_version SET version = $1`, SchemaVersion)
	}
	if err != nil {
		return err
	}
	return tx.Commit(ctx)
}
