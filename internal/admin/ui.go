package admin

import (
	"embed"
	"io/fs"
	"net/http"
)

// The status page: plain HTML, CSS and JavaScript, no framework, no
// external assets. index.html is served at /, the rest under /ui/.
//
//go:embed ui
var uiFS embed.FS

// contentSecurityPolicy allows the page nothing from elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func setPageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// uiFiles serves the page's assets under /ui/.
func uiFiles() http.Handler {
	files := http.FileServerFS(uiFS)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setPageHeaders(w.Header())
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// GET /
func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	page, err := fs.ReadFile(uiFS, "ui/index.html")
	if err != nil {
		s.writeError(w, http.StatusInternalServerError, "status page missing from the binary")
		return
	}
	setPageHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(page)
}
