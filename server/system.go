package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/mementohq/memento/problem"
)

// systemRoutes are the operational endpoints, open without an API key.
func (s *Server) systemRoutes() []Route {
	return []Route{
		{Method: http.MethodGet, Path: "/healthz", Public: true, Handler: s.healthz},
		{Method: http.MethodGet, Path: "/readyz", Public: true, Handler: s.readyz},
		{Method: http.MethodGet, Path: "/metrics", Public: true, Handler: s.serveMetrics},
		{Method: http.MethodGet, Path: "/openapi.json", Public: true, Handler: s.serveOpenAPI},
		{Method: http.MethodGet, Path: "/ui/", Public: true, Handler: s.serveUI},
	}
}

// healthz says the process serves HTTP; it does not touch the backends.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyz says every backend answers, so a load balancer can route here.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		s.log.Warn("not ready", "request_id", infoOf(r).id, "error", err.Error())
		// Which store and why is for the log, not for whoever asks.
		return newError(problem.NotReady, "a store does not answer; the server log has the details under this request_id")
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "backend": s.backend})
	return nil
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	s.metrics.handler().ServeHTTP(w, r)
	return nil
}

func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(s.openapi)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.openapi)
	return nil
}
