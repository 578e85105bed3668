package httpguard

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// queryTokenStreams are the routes where the token may come as
// ?access_token=: the event streams a browser opens with EventSource,
// which cannot set headers. Anywhere else a token in the URL would end up
// in logs and browser history for no reason, and a POST never needs it.
var queryTokenStreams = map[string]bool{"/api/events": true}

// requireToken guards h with the configured bearer token: a request passes
// with "Authorization: Bearer <token>" (the scheme in any case, as RFC 9110
// has it) or, on a GET of queryTokenStreams, "?access_token=<token>". The
// comparison takes constant time. An empty token disables the check (the
// configuration refuses an empty token on non-loopback addresses).
func requireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, fromHeader := bearer(r.Header.Get("Authorization"))
		queryOK := r.Method == http.MethodGet && queryTokenStreams[r.URL.Path]
		if !fromHeader && queryOK {
			got = r.URL.Query().Get("access_token")
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			msg := "missing or wrong bearer token: send Authorization: Bearer <http.token>"
			if !fromHeader && !queryOK && r.URL.Query().Has("access_token") {
				msg = "access_token in the URL is accepted only by GET /api/events (for EventSource): send Authorization: Bearer <http.token>"
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="parley"`)
			apiRefusal(w, r, http.StatusUnauthorized, msg)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// HasToken reports whether r carries token as its bearer credentials
// ("Authorization: Bearer <token>"), comparing in constant time; with no
// token configured every request has it. It lets a route that answers
// everyone (the liveness probe) say more to whoever proves the token.
func HasToken(token string, r *http.Request) bool {
	if token == "" {
		return true
	}
	got, _ := bearer(r.Header.Get("Authorization"))
	return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// bearer returns the credentials of an Authorization header of the Bearer
// scheme, and whether it was one.
func bearer(header string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(cred), true
}
