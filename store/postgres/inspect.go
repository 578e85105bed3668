package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// MinServerVersion is the oldest PostgreSQL parley runs on, as
// server_version_num counts (15.0).
const MinServerVersion = 150000

// Info is what Inspect learnt of a database without changing it.
type Info struct {
	// ServerVersion is the server's version as server_version_num
	// counts it (150004 for 15.4); Server is its name for people.
	ServerVersion int
	Server        string
	// Schema is the database's schema version: 0 when parley has not
	// created its tables there yet, SchemaVersion when this parley wrote
	// it, less when Open will migrate it, more when Open refuses it.
	Schema int
}

// Inspect connects to the database at url and reads the server's version
// and the schema version parley left there, changing nothing (parley
// doctor). Its error is the connection's, whose message names the host,
// never the password.
func Inspect(ctx context.Context, url string) (Info, error) {
	var info Info
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return info, fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var num string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num'), current_setting('server_version')`).Scan(&num, &info.Server); err != nil {
		return info, fmt.Errorf("postgres: server version: %w", err)
	}
	if info.ServerVersion, err = strconv.Atoi(num); err != nil {
		return info, fmt.Errorf("postgres: server version %q: %w", num, err)
	}
	err = conn.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&info.Schema)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01", errors.Is(err, pgx.ErrNoRows):
		info.Schema = 0 // undefined_table: parley never opened it
	case err != nil:
		return info, fmt.Errorf("postgres: schema version: %w", err)
	}
	return info, nil
}
