package main

import (
	"fmt"
	"io"
	"net/url"
	"strings"
)

// pgAdvice says how to back up (or, with restore, restore) the PostgreSQL
// database of [store] url, which parley backup does not copy: the exact
// pg_dump or pg_restore command for the configured database, with file.
// The url's password is never printed (it is a secret like the url
// itself, see config.Store): it is left out of the command, which says so.
func pgAdvice(w io.Writer, storeURL, file string, restore bool) {
	shown, hidden := withoutPassword(storeURL)
	var b strings.Builder
	if restore {
		b.WriteString("parley keeps its state in PostgreSQL ([store] url): parley restore puts back only bbolt files.\n")
		b.WriteString("Stop every parley that uses the database, then restore a pg_dump backup with pg_restore:\n\n")
		fmt.Fprintf(&b, "  pg_restore --clean --if-exists --no-owner --dbname=%s %s\n\n", shellQuote(shown), shellQuote(file))
	} else {
		b.WriteString("parley keeps its state in PostgreSQL ([store] url): parley backup copies only the bbolt file.\n")
		b.WriteString("Back the database up with pg_dump (it takes a consistent copy while parley runs):\n\n")
		fmt.Fprintf(&b, "  pg_dump --format=custom --file=%s %s\n\n", shellQuote(file), shellQuote(shown))
		b.WriteString("parley restore prints the pg_restore command that puts it back.\n")
	}
	if hidden {
		b.WriteString("The password in [store] url is not shown: the command asks for it, or takes it from PGPASSWORD or ~/.pgpass.\n")
	}
	b.WriteString("Received and generated files stay in data_dir: copy that directory too.\n")
	_, _ = io.WriteString(w, b.String())
}

// withoutPassword returns the url without its password, in the user info
// or as a password parameter, and whether it had one. A url that does not
// parse (the configuration refuses it) is not shown at all.
func withoutPassword(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return "URL", true
	}
	hidden := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.User(u.User.Username())
			hidden = true
		}
	}
	if q := u.Query(); q.Has("password") {
		q.Del("password")
		u.RawQuery = q.Encode()
		hidden = true
	}
	return u.String(), hidden
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
