package web

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Backups for the operator: `parley backup` of a running parley asks it
// for a copy of its database, since the daemon holds the file locked.
//
//	POST /api/backup → 200, the database file (application/octet-stream,
//	                   with its Content-Length)
//
// A database holds everything parley keeps, secrets included that no
// other route serves (a Matrix login's access token), so besides the
// token of every /api route the request must carry the data directory's
// backup key (BackupKeyHeader), which only a user who can read the data
// directory has: the route gives nobody more than reading the database
// file would. The key also ties the request to the data directory the
// client was configured with, so a backup is never taken from another
// parley that happens to answer at the address. It is a POST, so
// httpguard's checks against cross-site requests apply, and no web page
// can even start one. One backup is taken at a time (409 while one is);
// the copy is made into a local file first (Backups), so a slow client
// never holds the database's read transaction, and each write to the
// client has Options.WriteTimeout, so a stalled one is let go. Refusals
// are {"error": "…"} like the rest of /api.

// BackupKeyHeader is the request header carrying the backup key.
const BackupKeyHeader = "Parley-Backup-Key"

// Backups is what POST /api/backup asks for the copy.
type Backups interface {
	// Backup takes a consistent copy of the whole database and returns
	// it to be read from its start, with its size in bytes. It blocks
	// while the copy is made; the caller closes what it returns.
	Backup(ctx context.Context) (io.ReadCloser, int64, error)
}

type backupBox struct {
	b    Backups
	key  []byte
	busy chan struct{} // holds a token while a backup is taken
}

// SetBackup gives the adapter the backups /api/backup serves and the key a
// request must carry; an empty key (one that could not be written) refuses
// every request. cmd calls it once, before serving, when the store is a
// bbolt file; without it the route says that this parley takes none.
func (a *Adapter) SetBackup(b Backups, key string) {
	a.backup.Store(&backupBox{b: b, key: []byte(key), busy: make(chan struct{}, 1)})
}

// serveBackup serves POST /api/backup.
func (a *Adapter) serveBackup(w http.ResponseWriter, r *http.Request) {
	box := a.backup.Load()
	if box == nil {
		writeJSON(w, http.StatusNotFound, errorBody{"this parley takes no backups over HTTP: its state is in PostgreSQL ([store] url), back it up with pg_dump (parley backup prints the command)"})
		return
	}
	if len(box.key) == 0 {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{"this parley could not write its backup key into its data directory (its log says why): restart it once the directory is writable, or stop it and run parley backup then"})
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(BackupKeyHeader)), box.key) != 1 {
		writeJSON(w, http.StatusForbidden, errorBody{"missing or wrong " + BackupKeyHeader + ": run parley backup as the user parley runs as, with the data directory this parley uses (the key is its backup.key)"})
		return
	}
	select {
	case box.busy <- struct{}{}:
		// Released before the copy's last bytes go out, so a client that
		// has the whole copy can take the next backup at once.
		release := sync.OnceFunc(func() { <-box.busy })
		defer release()
		a.sendBackup(w, r, box, release)
		return
	default:
		writeJSON(w, http.StatusConflict, errorBody{"another backup is being taken; try again when it is done"})
		return
	}
}

// sendBackup takes the backup and sends it; release is called once the
// copy is read whole, before its last bytes are written.
func (a *Adapter) sendBackup(w http.ResponseWriter, r *http.Request, box *backupBox, release func()) {
	body, size, err := box.b.Backup(r.Context())
	if err != nil {
		a.log.Error("backup failed", "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{"taking the backup failed: " + err.Error()})
		return
	}
	defer body.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set("Content-Disposition", `attachment; filename="parley.db"`)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	buf := make([]byte, 1<<20)
	var sent int64
	for sent < size {
		n, err := body.Read(buf[:min(int64(len(buf)), size-sent)])
		if n > 0 {
			if sent+int64(n) == size {
				release()
			}
			if err := rc.SetWriteDeadline(time.Now().Add(a.opts.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
				return
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				a.log.Warn("backup not taken: the client stopped reading", "sent", sent, "size", size, "err", werr)
				return
			}
			sent += int64(n)
		}
		if err != nil {
			// The client sees a body shorter than its length.
			a.log.Error("backup failed while sending", "sent", sent, "size", size, "err", err)
			return
		}
	}
	// The connection may serve another request: no deadline left behind.
	_ = rc.SetWriteDeadline(time.Time{})
}

// BackupClient asks a running daemon for a backup; `parley backup` is
// built on it.
type BackupClient struct {
	// Base is the daemon's URL, like http://127.0.0.1:8765.
	Base string
	// Token is the bearer token ([http] token); empty sends none.
	Token string
	// Key is the data directory's backup key.
	Key string
	// HTTP is the client; nil means one that ignores proxies (the daemon
	// is parley's own address) and waits for the copy's first bytes for
	// at most 10 minutes.
	HTTP *http.Client
	// Idle bounds the wait for each read of the body; zero means a minute.
	Idle time.Duration
}

// Fetch takes a backup and writes it to w, returning its size. It fails
// unless the whole copy arrived; what was written to w is then to be
// thrown away.
func (c BackupClient) Fetch(ctx context.Context, w io.Writer) (int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.Base, "/")+"/api/backup", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json") // httpguard takes POSTs only as JSON
	req.Header.Set(BackupKeyHeader, c.Key)
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{Proxy: nil, ResponseHeaderTimeout: 10 * time.Minute}}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e errorBody
		if json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&e) == nil && e.Error != "" {
			return 0, fmt.Errorf("%s (%s)", e.Error, resp.Status)
		}
		return 0, fmt.Errorf("%s answered %s", c.Base, resp.Status)
	}
	if resp.ContentLength < 0 {
		return 0, fmt.Errorf("%s sent no Content-Length: not parley's backup", c.Base)
	}
	idle := c.Idle
	if idle <= 0 {
		idle = time.Minute
	}
	stall := time.AfterFunc(idle, func() { cancel(fmt.Errorf("nothing arrived for %s", idle)) })
	defer stall.Stop()
	n, err := io.Copy(w, readFunc(func(p []byte) (int, error) {
		stall.Reset(idle)
		return resp.Body.Read(p)
	}))
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	if err == nil && n != resp.ContentLength {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return n, fmt.Errorf("the copy broke off after %d of %d bytes: %w", n, resp.ContentLength, err)
	}
	return n, nil
}

type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }
