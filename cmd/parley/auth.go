package main

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// requireToken guards h with the configured bearer token: a request passes
// with "Authorization: Bearer <token>" or, for EventSource which cannot set
// headers, "?access_token=<token>". An empty token disables the check (the
// configuration refuses an empty token on non-loopback addresses).
func requireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.URL.Query().Get("access_token")
		if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = strings.TrimSpace(auth)
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="parley"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"missing or wrong bearer token: send Authorization: Bearer <http.token>"}` + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}
