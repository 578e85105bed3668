package web

import (
	"embed"
	"io/fs"
	"net/http"
)

// static holds the page: plain HTML, CSS and JavaScript, no build step and
// nothing loaded from elsewhere.
//
//go:embed static
var static embed.FS

// pageCSP allows the page its own files and its own API only. Markdown is
// rendered into DOM nodes by app.js, never through innerHTML, so no inline
// script or style is needed either.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func pageHandler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", pageCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The files change with the binary; embedded files have no
		// modification time to revalidate against, so always refetch.
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
