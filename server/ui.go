package server

import (
	"embed"
	"net/http"
	"path"
	"strings"

	"github.com/mementohq/memento/problem"
)

// uiFS is the web inspector: one page and its script, read-only views of
// runs, sessions and memory over the same /v1 API (and the same API key).
//
//go:embed ui/index.html ui/app.js
var uiFS embed.FS

// uiTypes are the inspector's files and their content types.
var uiTypes = map[string]string{"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8"}

// serveUI serves the inspector under /ui/. The page holds no data: its
// script reads the API with the key typed into it, so the page itself
// needs none; a strict content security policy keeps it to this origin.
func (s *Server) serveUI(w http.ResponseWriter, r *http.Request) error {
	name := strings.TrimPrefix(r.URL.Path, "/ui/")
	if name == "" {
		name = "index.html"
	}
	ct, ok := uiTypes[name]
	if !ok || path.Clean(name) != name {
		return newError(problem.NotFound, "no inspector file "+r.URL.Path)
	}
	b, err := uiFS.ReadFile("ui/" + name)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}
