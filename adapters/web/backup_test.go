package web_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/adapters/web/httpguard"
)

// backups hands out a fixed copy; with hold set, each Backup waits for a
// value on it after saying on started that it began.
type backups struct {
	data    []byte
	hold    chan struct{}
	started chan struct{}
}

func (b *backups) Backup(ctx context.Context) (io.ReadCloser, int64, error) {
	if b.hold != nil {
		b.started <- struct{}{}
		select {
		case <-b.hold:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	return io.NopCloser(bytes.NewReader(b.data)), int64(len(b.data)), nil
}

// backupServer serves the adapter as cmd does: the browser guard in front
// of everything, the token and bounded bodies in front of /api/.
func backupServer(t *testing.T, a *web.Adapter) *httptest.Server {
	g := httpguard.New(httpguard.Options{Token: "s3cret"})
	mux := http.NewServeMux()
	mux.Handle("/api/", g.API(a.Handler()))
	srv := httptest.NewServer(g.Browser(mux))
	t.Cleanup(srv.Close)
	return srv
}

// TestBackupAPI: the copy goes only to a request with the token and the
// key, one at a time, never to a cross-site request, and a parley without
// backups (PostgreSQL) says what to use instead.
func TestBackupAPI(t *testing.T) {
	data := bytes.Repeat([]byte("parley database page "), 200000) // several chunks
	b := &backups{data: data}
	a := web.New(web.Options{})
	a.SetBackup(b, "the-key")
	srv := backupServer(t, a)
	ctx := context.Background()
	client := func(token, key string) web.BackupClient {
		return web.BackupClient{Base: srv.URL, Token: token, Key: key}
	}

	var got bytes.Buffer
	n, err := client("s3cret", "the-key").Fetch(ctx, &got)
	if err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("Fetch: %d bytes, %v; the copy matches: %v", n, err, bytes.Equal(got.Bytes(), data))
	}
	for _, c := range []struct {
		name, token, key, want string
	}{
		{"no token", "", "the-key", "bearer token"},
		{"wrong token", "nope", "the-key", "bearer token"},
		{"no key", "s3cret", "", "missing or wrong Parley-Backup-Key"},
		{"wrong key", "s3cret", "the-kez", "missing or wrong Parley-Backup-Key"},
	} {
		got.Reset()
		if _, err := client(c.token, c.key).Fetch(ctx, &got); err == nil || !strings.Contains(err.Error(), c.want) || got.Len() != 0 {
			t.Errorf("%s: %v, %d bytes; want a refusal saying %q and nothing written", c.name, err, got.Len(), c.want)
		}
	}

	// A page on another site posting to parley is refused before the
	// handler runs, token or not.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/backup", nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set(web.BackupKeyHeader, "the-key")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || bytes.Contains(body, data[:100]) {
		t.Errorf("cross-site POST: %s, want 403", resp.Status)
	}
	// A GET (what an <img> or a link makes) is not the route.
	resp, err = http.Get(srv.URL + "/api/backup")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("GET /api/backup: %s", resp.Status)
	}

	// One at a time.
	b.hold, b.started = make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := client("s3cret", "the-key").Fetch(ctx, io.Discard)
		first <- err
	}()
	<-b.started
	if _, err := client("s3cret", "the-key").Fetch(ctx, io.Discard); err == nil || !strings.Contains(err.Error(), "another backup is being taken") {
		t.Errorf("a second backup meanwhile: %v", err)
	}
	b.hold <- struct{}{}
	if err := <-first; err != nil {
		t.Errorf("the first backup: %v", err)
	}
	b.hold = nil
	if _, err := client("s3cret", "the-key").Fetch(ctx, io.Discard); err != nil {
		t.Errorf("a backup after it: %v", err)
	}

	nokey := web.New(web.Options{})
	nokey.SetBackup(b, "")
	if _, err := (web.BackupClient{Base: backupServer(t, nokey).URL, Token: "s3cret"}).Fetch(ctx, io.Discard); err == nil || !strings.Contains(err.Error(), "could not write its backup key") {
		t.Errorf("a parley without a key: %v", err)
	}
	none := backupServer(t, web.New(web.Options{}))
	if _, err := (web.BackupClient{Base: none.URL, Token: "s3cret", Key: "k"}).Fetch(ctx, io.Discard); err == nil || !strings.Contains(err.Error(), "pg_dump") {
		t.Errorf("a parley without backups: %v", err)
	}
}

// TestBackupClientBrokenCopy: a copy cut short, or one that stops
// arriving, is an error, never a success with part of the file.
func TestBackupClientBrokenCopy(t *testing.T) {
	release := make(chan struct{})
	half := func(stall bool) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(make([]byte, 500))
			w.(http.Flusher).Flush()
			if stall {
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
			// Returning ends the response short of its length.
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	cut, stalled := half(false), half(true)
	t.Cleanup(func() { close(release) })
	ctx := context.Background()
	if n, err := (web.BackupClient{Base: cut.URL}).Fetch(ctx, io.Discard); err == nil || !strings.Contains(err.Error(), "broke off after 500 of 1000 bytes") {
		t.Errorf("a copy cut short: %d, %v", n, err)
	}
	if n, err := (web.BackupClient{Base: stalled.URL, Idle: 50 * time.Millisecond}).Fetch(ctx, io.Discard); err == nil || !strings.Contains(err.Error(), "nothing arrived for 50ms") {
		t.Errorf("a copy that stopped arriving: %d, %v", n, err)
	}
}
