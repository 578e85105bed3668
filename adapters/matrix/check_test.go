package matrix_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parley-chat/parley/adapters/matrix"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
)

// TestCheckSaysDownOrRefused: the daemon starts the adapter with Check and
// retries it while parley serves on; what Check returns tells it how. A
// homeserver that does not answer (here a 502 of the proxy in front of it)
// is transient, with a fix; one that does not know the access token is a
// refusal (core.Permanent), retried slowly. Neither error quotes the token.
func TestCheckSaysDownOrRefused(t *testing.T) {
	var up atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case !up.Load():
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("<html>502 Bad Gateway</html>"))
		case strings.HasSuffix(r.URL.Path, "/versions"):
			w.Write([]byte(`{"versions":["v1.11"]}`))
		default: // whoami
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"errcode":"M_UNKNOWN_TOKEN","error":"Unknown access token"}`))
		}
	}))
	defer hs.Close()
	const token = "syt_secret_token"
	cur := newCursors()
	a, err := matrix.New(matrix.Options{Homeserver: hs.URL, UserID: "@parley:example.org", AccessToken: token,
		Cursors: cur, Leases: cur, Authorizer: adaptertest.Everyone, Files: tempFiles(t)})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Check(t.Context())
	if err == nil || core.IsPermanent(err) || core.FixOf(err) == "" || !strings.Contains(err.Error(), "cannot reach the homeserver") {
		t.Errorf("homeserver down: %v (permanent %v, fix %q)", err, core.IsPermanent(err), core.FixOf(err))
	}
	up.Store(true)
	err = a.Check(t.Context())
	if err == nil || !core.IsPermanent(err) || !strings.Contains(err.Error(), "access_token") {
		t.Errorf("token unknown: %v (permanent %v)", err, core.IsPermanent(err))
	}
	if err != nil && strings.Contains(err.Error()+core.FixOf(err), token) {
		t.Errorf("error quotes the token: %v", err)
	}
}
