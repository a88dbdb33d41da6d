package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/mcp"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/telemetry"
	"github.com/mementohq/memento/toolop"
)

// Options configure a Server.
type Options struct {
	// Runs, Ops, Sessions and Vault are the domain services the API
	// serves; all are required.
	Runs     *run.Service
	Ops      *toolop.Service
	Sessions *session.Service
	Vault    *pii.Vault
	// Memory is long-term memory; nil leaves its routes answering 404
	// not-found (they stay in the API document).
	Memory *memory.Service
	// Context builds model contexts (POST /v1/context); nil answers 404.
	Context *contextbuild.Builder
	// Summaries, when set, serves the summary routes (compaction).
	Summaries *compact.Service
	// Retrieval is documents and ACL-filtered retrieval; nil leaves its
	// routes answering 404 not-found.
	Retrieval *retrieval.Service
	// MCP, when set, is served at /mcp (streamable HTTP) with the same keys:
	// each tool call acts as the tenant of its key and the user the key is
	// bound to or the X-Memento-User header names (see HeaderUser).
	MCP *mcp.Server
	// MCPStateless serves /mcp without protocol sessions: each request
	// stands alone, so it may reach any instance behind a load balancer
	// without affinity (server-to-client requests are then impossible;
	// Memento's tools make none).
	MCPStateless bool
	// Ready reports whether every backend answers (GET /readyz); nil
	// means always ready.
	Ready func(context.Context) error
	// Backend names the store that holds runs, for /readyz and the log.
	Backend string
	// MaxStateBytes is the run state limit the services enforce; 0 means
	// run.DefaultMaxStateBytes. It sizes the default MaxBodyBytes.
	MaxStateBytes int
	// Keys are the API keys. Nil or empty means no authentication, one
	// default tenant, and a loopback-only listener.
	Keys *KeySet
	// Logger receives one line per request; nil means slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes caps request bodies; 0 means twice the engine's state
	// limit plus 64 KiB, room for a full state and its event payload.
	MaxBodyBytes int64
	// ShutdownTimeout bounds the graceful drain in Serve; 0 means 15s.
	ShutdownTimeout time.Duration
	// RequestTimeout bounds each request's work, store calls included, so
	// a hung database cannot apply a commit long after the client gave
	// up; 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxInFlight bounds the API requests served at once (health, metrics
	// and the API document are not counted); beyond it a request is
	// answered 503 overloaded at once. 0 means DefaultMaxInFlight.
	MaxInFlight int
	// Tracing, when set, makes every request a span (W3C traceparent is
	// honoured) carrying the route, status and request id; nil costs nothing.
	Tracing *telemetry.Tracing
}

// Server is the HTTP API. It is an http.Handler; Serve runs it on a listener.
type Server struct {
	runs            *run.Service
	ops             *toolop.Service
	sessions        *session.Service
	vault           *pii.Vault
	memory          *memory.Service
	retrieval       *retrieval.Service
	context         *contextbuild.Builder
	summaries       *compact.Service
	ready           func(context.Context) error
	backend         string
	keys            *KeySet
	log             *slog.Logger
	maxBody         int64
	shutdownTimeout time.Duration
	requestTimeout  time.Duration
	inFlight        chan struct{}
	metrics         *metrics
	mux             *http.ServeMux
	routes          []Route
	openapi         []byte
	tracing         *telemetry.Tracing
}

// HandlerFunc is a route handler: it writes a success response itself and
// returns an error to answer with a problem instead.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Route is one method and path of the API.
type Route struct {
	Method string // GET, POST, PUT, PATCH, DELETE
	Path   string // ServeMux pattern path, which is also the OpenAPI path template
	// Public routes need no API key (health, metrics, the API document).
	Public bool
	// Role is the least role a key needs; 0 means reader for GET, writer otherwise.
	Role    Role
	Handler HandlerFunc
	// IfMatch routes take an If-Match precondition; any other write with
	// one (or any write with If-None-Match) is refused, never carried out
	// as if it were unconditional.
	IfMatch bool
	// MaxBody, when > 0, is this route's body limit instead of the
	// server's (which follows the state limit): a document is not a state.
	MaxBody int64

	pathParams []string // the {wildcards} of Path, checked on every request
	// queryParams, on a write, are the query parameters the API document
	// gives it; any other is refused rather than ignored (a misspelt
	// filter on a delete would widen what it deletes).
	queryParams map[string]bool
}

// Pattern is the ServeMux pattern of the route, also its metrics label.
func (rt Route) Pattern() string { return rt.Method + " " + rt.Path }

// allRoutes is the one registration point: each domain contributes its routes
// from its own file (runs.go; sessions.go, operations.go, ... add a line here).
func (s *Server) allRoutes() []Route {
	var rs []Route
	rs = append(rs, s.systemRoutes()...)
	rs = append(rs, s.runRoutes()...)
	rs = append(rs, s.summaryRoutes()...)
	rs = append(rs, s.sessionRoutes()...)
	rs = append(rs, s.operationRoutes()...)
	rs = append(rs, s.workflowRoutes()...)
	rs = append(rs, s.memoryRoutes()...)
	rs = append(rs, s.contextRoutes()...)
	rs = append(rs, s.retrievalRoutes()...)
	return rs
}

// New builds a Server: routes, metrics and the OpenAPI document.
func New(opts Options) (*Server, error) {
	if opts.Runs == nil || opts.Ops == nil || opts.Sessions == nil || opts.Vault == nil {
		return nil, errors.New("server: the run, operation, session and vault services are required")
	}
	s := &Server{
		tracing:         opts.Tracing,
		runs:            opts.Runs,
		ops:             opts.Ops,
		sessions:        opts.Sessions,
		vault:           opts.Vault,
		memory:          opts.Memory,
		context:         opts.Context,
		summaries:       opts.Summaries,
		retrieval:       opts.Retrieval,
		ready:           opts.Ready,
		backend:         opts.Backend,
		keys:            opts.Keys,
		log:             opts.Logger,
		maxBody:         opts.MaxBodyBytes,
		shutdownTimeout: opts.ShutdownTimeout,
		requestTimeout:  opts.RequestTimeout,
		metrics:         newMetrics(),
		mux:             http.NewServeMux(),
	}
	if s.keys == nil {
		s.keys = NewKeySet()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.ready == nil {
		s.ready = func(context.Context) error { return nil }
	}
	if opts.MaxStateBytes <= 0 {
		opts.MaxStateBytes = run.DefaultMaxStateBytes
	}
	if s.maxBody <= 0 {
		s.maxBody = 2*int64(opts.MaxStateBytes) + 64<<10
	}
	if s.shutdownTimeout <= 0 {
		s.shutdownTimeout = 15 * time.Second
	}
	if s.requestTimeout <= 0 {
		s.requestTimeout = DefaultRequestTimeout
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	s.inFlight = make(chan struct{}, opts.MaxInFlight)
	doc, err := buildOpenAPI(openapiFS)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.openapi = doc
	queryParams, err := documentedQueryParams(doc)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.routes = s.allRoutes()
	for i := range s.routes {
		rt := &s.routes[i]
		if rt.Role == 0 {
			rt.Role = RoleWriter
			if rt.Method == http.MethodGet {
				rt.Role = RoleReader
			}
		}
		rt.pathParams = pathParams(rt.Path)
		if rt.Method != http.MethodGet {
			rt.queryParams = queryParams[rt.Pattern()]
		}
		s.mux.HandleFunc(rt.Pattern(), s.wrap(*rt))
	}
	if opts.MCP != nil {
		s.mux.Handle("/mcp", s.mcpHandler(opts.MCP, opts.MCPStateless))
	}
	return s, nil
}

// Routes lists the registered routes (for documentation and tests).
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

// AuthEnabled reports whether API keys are configured.
func (s *Server) AuthEnabled() bool { return s.keys.Len() > 0 }

// ListenAndServe listens on addr (refusing a non-loopback address when no
// API keys are configured) and serves until ctx is done.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	if err := CheckListenAddr(addr, s.AuthEnabled()); err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve answers on ln until ctx is done, then stops accepting and drains
// in-flight requests for at most the shutdown timeout. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := CheckListenAddr(ln.Addr().String(), s.AuthEnabled()); err != nil {
		_ = ln.Close()
		return err
	}
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute, // bodies are bounded; a trickled one is cut off
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.log.Info("listening", "addr", ln.Addr().String(), "backend", s.backend, "auth", s.AuthEnabled())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.shutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc // http.ErrServerClosed once Serve has returned
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	s.log.Info("stopped", "addr", ln.Addr().String())
	return nil
}

// reqInfo is filled in while a request is served and read by the request
// log line; a pointer in the context lets inner layers report to the outer.
type reqInfo struct {
	id      string
	tenant  string
	problem string
	// principal is who an authenticated request acts as (authed), kept
	// here rather than in a context of its own: one fewer request copy.
	principal Principal
	authed    bool
	// cause is the error behind a 5xx answer, for the request log line.
	cause string
	// traceID links the log line to the request's span when tracing is on.
	traceID string
}

type reqInfoKey struct{}

func infoOf(r *http.Request) *reqInfo {
	if ri, ok := r.Context().Value(reqInfoKey{}).(*reqInfo); ok {
		return ri
	}
	return &reqInfo{}
}

// ServeHTTP is the outer layer: request id, panic recovery, one log line
// and metrics per request, and problem+json for unknown routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ri := &reqInfo{id: requestID(r)}
	w.Header().Set("X-Request-Id", ri.id)
	sw := &statusWriter{ResponseWriter: w, ri: ri}
	r = r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, ri))
	_, pat := s.mux.Handler(r)
	if s.tracing != nil {
		// Registered before the recovery below, so it ends the span after
		// the status (a panic's 500 included) is known.
		var end func()
		r, end = s.startSpan(r, sw, ri, pat)
		defer end()
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v) // net/http's own signal to abort the response
			}
			s.log.Error("panic serving request", "request_id", ri.id, "method", r.Method,
				"route", r.Pattern, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			ri.cause = "panic: " + fmt.Sprint(v)
			if !sw.wroteHeader {
				p, _ := problemFor(r, errors.New("panic"))
				p.RequestID = ri.id
				ri.problem = p.Kind()
				writeProblem(sw, p)
			}
		}
		s.observe(r, sw, ri, time.Since(start))
	}()
	if s.keys.Len() == 0 {
		if err := checkLocalRequest(r); err != nil {
			s.fail(sw, r, err)
			return
		}
	}
	if p := r.URL.Path; strings.Contains(p, "//") || strings.Contains(p+"/", "/./") || strings.Contains(p+"/", "/../") {
		// An empty or dot segment names no resource (an id left out); the
		// mux would answer a redirect to the cleaned path instead.
		s.fail(sw, r, newError(problem.NotFound, "no route matches "+p+": a path segment is empty or a dot"))
		return
	}
	if pat == "" {
		s.serveUnmatched(sw, r)
		return
	}
	s.mux.ServeHTTP(sw, r)
}

func (s *Server) observe(r *http.Request, sw *statusWriter, ri *reqInfo, d time.Duration) {
	route := r.Pattern
	if route == "" {
		route = "unmatched"
	}
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	series := s.metrics.seriesOf(route, status)
	series.requests.Inc()
	series.duration.Observe(d.Seconds())
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	attrs := []slog.Attr{
		slog.String("request_id", ri.id),
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.String("tenant", ri.tenant),
	}
	if ri.problem != "" {
		attrs = append(attrs, slog.String("problem", ri.problem))
	}
	if ri.cause != "" {
		attrs = append(attrs, slog.String("error", ri.cause))
	}
	if ri.traceID != "" {
		attrs = append(attrs, slog.String("trace_id", ri.traceID))
	}
	s.log.LogAttrs(r.Context(), level, "request", attrs...)
}

// serveUnmatched lets the mux decide (404, 405 with Allow, or a redirect to
// the clean path) and turns 404/405 into problems.
func (s *Server) serveUnmatched(w http.ResponseWriter, r *http.Request) {
	cw := &captureWriter{header: http.Header{}}
	h, _ := s.mux.Handler(r)
	h.ServeHTTP(cw, r)
	switch cw.status {
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		kind, detail := problem.NotFound, "no route matches "+r.URL.Path
		if cw.status == http.StatusMethodNotAllowed {
			kind = problem.MethodNotAllowed
			detail = fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, cw.header.Get("Allow"))
			w.Header().Set("Allow", cw.header.Get("Allow"))
		}
		s.fail(w, r, newError(kind, detail))
	default:
		for k, v := range cw.header {
			w.Header()[k] = v
		}
		if cw.status == 0 {
			cw.status = http.StatusOK
		}
		w.WriteHeader(cw.status)
		_, _ = w.Write(cw.body)
	}
}

// wrap adds authentication and error handling to a route handler.
func (s *Server) wrap(rt Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !rt.Public {
			select {
			case s.inFlight <- struct{}{}:
				defer func() { <-s.inFlight }()
			default:
				s.fail(w, r, newError(problem.Overloaded, fmt.Sprintf("more than %d requests are in flight; retry after a moment", cap(s.inFlight))))
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.requestTimeout)
		defer cancel()
		if rt.MaxBody > 0 {
			ctx = context.WithValue(ctx, bodyLimitKey{}, rt.MaxBody)
		}
		r = r.WithContext(ctx)
		if !rt.Public {
			p, err := s.authenticate(r, rt.Role)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			ri, ok := r.Context().Value(reqInfoKey{}).(*reqInfo)
			if !ok { // served without ServeHTTP around it
				ri = &reqInfo{}
				r = r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, ri))
			}
			ri.tenant, ri.principal, ri.authed = p.Tenant, p, true
		}
		if err := checkRequest(r, &rt); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := s.checkUnreadBody(w, r, &rt); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := rt.Handler(w, r); err != nil {
			s.fail(w, r, s.writeOutcome(&rt, r, err))
		}
	}
}

// writeOutcome answers a write whose statement may have reached the store
// although no answer came back as commit-outcome-unknown, naming the read
// that settles it; 503 unavailable would say nothing was done. Handlers
// that know a more precise read answer so themselves first.
func (s *Server) writeOutcome(rt *Route, r *http.Request, err error) error {
	if rt.Method == http.MethodGet || rt.Role == RoleReader || !outcomeUnknown(err) {
		return err
	}
	if _, _, _, ok := classify(err); ok {
		return err
	}
	return writeOutcomeUnknown(err, s.rereadOf(r))
}

// rereadOf is the nearest resource at or above the request's path that a
// GET serves (with the user_id a session path needs).
func (s *Server) rereadOf(r *http.Request) string {
	p := r.URL.Path
	for strings.Count(p, "/") > 2 {
		probe := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: p}, Host: r.Host, Header: http.Header{}}
		if _, pat := s.mux.Handler(probe); strings.HasPrefix(pat, http.MethodGet+" ") {
			break
		}
		p = p[:strings.LastIndexByte(p, '/')]
	}
	if u := r.URL.Query().Get("user_id"); u != "" {
		p += "?user_id=" + url.QueryEscape(u)
	}
	return p
}

// fail answers with the problem for err; an unexpected error is logged in
// full, since the response only carries the request id.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	ri := infoOf(r)
	p, internal := problemFor(r, err)
	if internal && s.backendDown(r) {
		// An unexpected error while the backend does not answer its
		// readiness check is the backend's absence (a closed pool, say).
		k, _ := problem.Lookup(problem.Unavailable)
		p.Type, p.Title, p.Status = problem.Type(problem.Unavailable), k.Title, k.Status
		p.Detail = "the store is unavailable; retry after a moment"
	}
	p.RequestID = ri.id
	ri.problem = p.Kind()
	if internal || p.Status >= 500 {
		ri.cause = err.Error()
		s.log.Error("request failed", "request_id", ri.id, "method", r.Method, "route", r.Pattern, "problem", p.Kind(), "error", err.Error())
	}
	switch p.Status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="memento"`)
	case http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	writeProblem(w, p)
}

// backendDown asks the readiness check, briefly, whether the backends answer.
func (s *Server) backendDown(r *http.Request) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Second)
	defer cancel()
	return s.ready(ctx) != nil
}

// requestID keeps a caller's X-Request-Id if it is short and printable, so
// logs correlate across services; otherwise it makes one.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 128 && !strings.ContainsFunc(id, func(c rune) bool {
		return c < 0x21 || c > 0x7e
	}) {
		return id
	}
	return newRequestID()
}

// Request ids this process makes are a random prefix drawn once and a
// counter: unique across instances and restarts (64 random bits) without
// reading the system's randomness on every request, as a random UUID
// each time would. An id has to be unique, not secret.
var (
	requestIDPrefix = func() string {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b) + "-"
	}()
	requestIDSeq atomic.Uint64
)

func newRequestID() string {
	return requestIDPrefix + strconv.FormatUint(requestIDSeq.Add(1), 36)
}

// statusWriter records the status for logs and metrics.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	ri          *reqInfo // for a failure found while writing the answer
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// captureWriter buffers a response the mux produces for an unmatched route.
type captureWriter struct {
	header http.Header
	status int
	body   []byte
}

func (w *captureWriter) Header() http.Header { return w.header }
func (w *captureWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *captureWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body = append(w.body, b...)
	return len(b), nil
}

// startSpan opens the request's server span, continuing the caller's trace
// if it sent a traceparent; end closes it with the answer's status.
func (s *Server) startSpan(r *http.Request, sw *statusWriter, ri *reqInfo, pattern string) (*http.Request, func()) {
	name := pattern
	if name == "" {
		name = "unmatched"
	}
	ctx := s.tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := s.tracing.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", pattern),
			attribute.String("memento.request_id", ri.id),
		))
	ri.traceID = span.SpanContext().TraceID().String()
	return r.WithContext(ctx), func() {
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if ri.tenant != "" {
			span.SetAttributes(attribute.String("memento.tenant_id", ri.tenant))
		}
		if ri.problem != "" {
			span.SetAttributes(attribute.String("memento.problem", ri.problem))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, ri.cause)
		}
		span.End()
	}
}
