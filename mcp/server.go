package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	lru "github.com/hashicorp/golang-lru/v2"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento/problem"

	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
)

// DefaultMaxArgumentBytes bounds one tool call's arguments: a model that
// pastes a whole document into a tool gets an error it can read, not a
// partial write.
const DefaultMaxArgumentBytes = 256 << 10

// Services are the domain services the tools call; a nil service leaves
// its tools out of the list.
type Services struct {
	Runs      *run.Service
	Sessions  *session.Service
	Memory    *memory.Service
	Context   *contextbuild.Builder
	Retrieval *retrieval.Service
}

// Binding is who every tool call of a connection acts as. It comes from
// the connection's credentials (an API key, a header the operator sets, a
// flag of `memento mcp`), so a model cannot change it with an argument.
type Binding struct {
	Tenant string
	User   string
}

// ErrUnbound is a connection with no user: user-scoped tools refuse.
var ErrUnbound = errors.New("this connection is bound to no user")

// Options tune the server.
type Options struct {
	// Name and Version are announced to clients ("memento" and "dev" when empty).
	Name, Version string
	// Classify turns a service error into a stable problem kind and a detail
	// a model can read; internal errors keep their text in the log. Nil
	// treats every error as internal.
	Classify func(error) (kind, detail string, internal bool)
	// OutcomeUnknown reports an error after which a write may or may not
	// have been applied (the store's connection broke after the write was
	// sent). A write tool answers it with commit-outcome-unknown, never
	// as a plain failure the model would retry blindly. Nil: never.
	OutcomeUnknown func(error) bool
	// Logger receives internal errors; nil discards them.
	Logger *slog.Logger
	// MaxArgumentBytes bounds one call's arguments (0: DefaultMaxArgumentBytes).
	MaxArgumentBytes int
	// LeaseTTLSeconds is how long run_checkpoint holds a run's lease (0: 30).
	LeaseTTLSeconds int
	// CallTimeout bounds one tool call, store calls included (0: 30s).
	CallTimeout time.Duration
}

// Server builds SDK servers whose tools call Services.
type Server struct {
	svc  Services
	opts Options
	log  *slog.Logger
}

// New returns a server over svc.
func New(svc Services, opts Options) *Server {
	if opts.Name == "" {
		opts.Name = "memento"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.MaxArgumentBytes <= 0 {
		opts.MaxArgumentBytes = DefaultMaxArgumentBytes
	}
	if opts.LeaseTTLSeconds <= 0 {
		opts.LeaseTTLSeconds = 30
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 30 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{svc: svc, opts: opts, log: log}
}

const instructions = `Memento keeps what this agent must remember. Session tools hold the state of the
current conversation (small, explicit: step, choices, ids) and its messages. Memory tools keep
confirmed long-term facts about the user, each with the message it came from; search before asking
the user something they may have told you before. context_build assembles what a model should see
under a token budget. run_checkpoint records a durable step of a workflow; run_restore returns the
state saved at the last (or a named) checkpoint, so work resumes where it stopped. Every tool acts
as the user of this connection: ids name things of that user only.`

// binder yields the binding of one call.
type binder func(*gomcp.CallToolRequest) (Binding, error)

// Server returns an SDK server whose tools act as b, for in-process use
// (gomcp.NewInMemoryTransports) and stdio.
func (s *Server) Server(b Binding) *gomcp.Server {
	return s.build(func(*gomcp.CallToolRequest) (Binding, error) { return b, nil })
}

// Handler serves streamable HTTP. resolve turns a request's headers into
// its binding; it runs for every HTTP request (a failure answers 401 with
// its error) and again for every tool call, so a session id presented with
// other credentials acts as those credentials, never as the session's first.
func (s *Server) Handler(resolve func(http.Header) (Binding, error), opts *gomcp.StreamableHTTPOptions) http.Handler {
	srv := s.build(func(req *gomcp.CallToolRequest) (Binding, error) {
		if req.Extra == nil || req.Extra.Header == nil {
			return Binding{}, errors.New("no credentials on this call")
		}
		return resolve(req.Extra.Header)
	})
	maxBody := int64(4 << 20)
	if opts != nil && opts.MaxRequestBodyBytes > 0 {
		maxBody = opts.MaxRequestBodyBytes
	}
	h := guardHTTP(gomcp.NewStreamableHTTPHandler(func(*http.Request) *gomcp.Server { return srv }, opts), maxBody)
	owners, _ := lru.New[string, Binding](maxSessionOwners)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := resolve(r.Header)
		if err == nil {
			// Any credentials may use a session (its calls act as them);
			// only those that opened it may end it.
			if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && r.Method == http.MethodDelete {
				if owner, ok := owners.Get(sid); ok && owner != b {
					err = fmt.Errorf("%w: this MCP session was opened with other credentials; only they may end it", ErrForbidden)
				}
			} else if sid == "" {
				w = &sessionRecorder{ResponseWriter: w, opened: func(id string) { owners.Add(id, b) }}
			}
		}
		if err != nil {
			kind, detail := problem.Unauthorized, err.Error()
			switch {
			case errors.Is(err, ErrForbidden):
				kind, detail = problem.Forbidden, strings.TrimPrefix(detail, ErrForbidden.Error()+": ")
			case errors.Is(err, run.ErrInvalidInput):
				// A malformed X-Memento-User is the request's fault, not
				// missing credentials.
				kind, detail = problem.InvalidRequest, strings.TrimPrefix(detail, run.ErrInvalidInput.Error()+": ")
			default:
				w.Header().Set("WWW-Authenticate", `Bearer realm="memento"`)
			}
			writeProblem(w, r, kind, 0, detail)
			return
		}
		pw := &problemWriter{ResponseWriter: w, r: r}
		h.ServeHTTP(pw, r)
		pw.finish()
		if r.Method == http.MethodDelete {
			owners.Remove(r.Header.Get("Mcp-Session-Id"))
		}
	})
}

// writeProblem answers a problem as the rest of the API does (RFC 9457,
// with the request id the server's outer layer set); status 0 is the
// kind's own.
func writeProblem(w http.ResponseWriter, r *http.Request, kind string, status int, detail string) {
	info, _ := problem.Lookup(kind)
	if status == 0 {
		status = info.Status
	}
	body := map[string]any{"type": problem.Type(kind), "title": info.Title, "status": status, "detail": detail, "instance": r.URL.Path}
	if id := w.Header().Get("X-Request-Id"); id != "" {
		body["request_id"] = id
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// problemWriter turns the SDK transport's plain-text errors (a missing or
// unknown session, a wrong Content-Type, a body too large) into problems;
// JSON-RPC answers and streams pass through untouched.
type problemWriter struct {
	http.ResponseWriter
	r          *http.Request
	status     int
	converting bool
	text       bytes.Buffer
}

func (p *problemWriter) WriteHeader(code int) {
	if code >= 400 && strings.HasPrefix(p.Header().Get("Content-Type"), "text/plain") {
		p.status, p.converting = code, true
		return
	}
	p.ResponseWriter.WriteHeader(code)
}

func (p *problemWriter) Write(b []byte) (int, error) {
	if p.converting {
		if p.text.Len() < 1024 {
			p.text.Write(b[:min(len(b), 1024-p.text.Len())])
		}
		return len(b), nil
	}
	return p.ResponseWriter.Write(b)
}

// Flush passes a stream's flushes on.
func (p *problemWriter) Flush() {
	if f, ok := p.ResponseWriter.(http.Flusher); ok && !p.converting {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (p *problemWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

func (p *problemWriter) finish() {
	if !p.converting {
		return
	}
	kind := map[int]string{http.StatusNotFound: problem.NotFound, http.StatusMethodNotAllowed: problem.MethodNotAllowed,
		http.StatusRequestEntityTooLarge: problem.RequestTooLarge, http.StatusUnsupportedMediaType: problem.UnsupportedMediaType,
		http.StatusForbidden: problem.Forbidden, http.StatusUnauthorized: problem.Unauthorized}[p.status]
	if kind == "" {
		kind = problem.InvalidRequest
		if p.status >= 500 {
			kind = problem.Internal
		}
	}
	detail := strings.TrimSpace(p.text.String())
	if detail == "" {
		detail = http.StatusText(p.status)
	}
	writeProblem(p.ResponseWriter, p.r, kind, p.status, "MCP transport: "+detail)
}

// maxSessionOwners bounds how many MCP sessions' openers Handler keeps (a
// session it no longer knows may be ended by any credentials, as before).
const maxSessionOwners = 100_000

// sessionRecorder reports the session id a response opens.
type sessionRecorder struct {
	http.ResponseWriter
	opened func(id string)
	done   bool
}

func (s *sessionRecorder) WriteHeader(code int) {
	if !s.done {
		s.done = true
		if id := s.Header().Get("Mcp-Session-Id"); id != "" && code < 300 {
			s.opened(id)
		}
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionRecorder) Write(b []byte) (int, error) {
	if !s.done {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

// Flush passes on to the connection: the SDK streams events.
func (s *sessionRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *sessionRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// RunStdio serves one client on stdin/stdout until it disconnects or ctx ends.
func (s *Server) RunStdio(ctx context.Context, b Binding) error {
	return s.Serve(ctx, b, os.Stdin, os.Stdout)
}

// Serve serves one client on newline-delimited JSON-RPC over in and out
// (stdio): a line that cannot be read is answered with an error and the
// rest are still served; requests read before the end of in are answered.
func (s *Server) Serve(ctx context.Context, b Binding, in io.Reader, out io.Writer) error {
	g := newStdioGuard(in, out, gomcp.DefaultMaxLineLength)
	return s.Server(b).Run(ctx, &gomcp.IOTransport{Reader: g, Writer: g, MaxLineLength: -1})
}

func (s *Server) build(bind binder) *gomcp.Server {
	srv := gomcp.NewServer(&gomcp.Implementation{Name: s.opts.Name, Title: "Memento", Version: s.opts.Version},
		&gomcp.ServerOptions{Instructions: instructions, Logger: s.opts.Logger})
	t := &toolset{s: s, bind: bind}
	if s.svc.Sessions != nil {
		t.sessionTools(srv)
	}
	if s.svc.Memory != nil {
		t.memoryTools(srv)
	}
	if s.svc.Context != nil {
		t.contextTools(srv)
	}
	if s.svc.Runs != nil {
		t.runTools(srv)
	}
	if s.svc.Retrieval != nil {
		t.retrievalTools(srv)
	}
	return srv
}

// toolset is the tools of one SDK server.
type toolset struct {
	s    *Server
	bind binder
}

// ToolError is the body of a tool error: a stable kind a program can branch
// on and a detail a model can act on.
type ToolError struct {
	Type   string `json:"type"`
	Detail string `json:"detail"`
}

// call is what every handler gets: the binding, checked to name a user.
type call struct {
	Binding
}

// requireNonNull drops "null" from the types of the required properties
// of s: the schema inferred from a Go slice allows null, which every tool
// refuses for a required argument, so a client validating before it sends
// would learn that only from the tool's error.
func requireNonNull(s *jsonschema.Schema) {
	for _, name := range s.Required {
		p := s.Properties[name]
		if p == nil || len(p.Types) == 0 {
			continue
		}
		types := slices.DeleteFunc(slices.Clone(p.Types), func(t string) bool { return t == "null" })
		if len(types) == 1 {
			p.Type, p.Types = types[0], nil
		} else {
			p.Types = types
		}
	}
}

// add registers a tool whose input is In: the schema is inferred from In,
// and the handler runs with the call's binding. Every failure, from an
// argument that does not match the schema to a panic, is a tool error in
// one shape ({"error": {"type", "detail"}}) the model reads, never a
// protocol error or a crash; a refused call has written nothing.
func add[In any](t *toolset, srv *gomcp.Server, tool *gomcp.Tool, h func(context.Context, call, In) (any, error)) {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: tool %s: input schema: %v", tool.Name, err)) // a defect of this package
	}
	requireNonNull(schema)
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: tool %s: resolve input schema: %v", tool.Name, err))
	}
	tool.InputSchema = schema
	srv.AddTool(tool, func(ctx context.Context, req *gomcp.CallToolRequest) (res *gomcp.CallToolResult, err error) {
		defer func() {
			if p := recover(); p != nil {
				t.s.log.Error("mcp tool panicked", "tool", tool.Name, "panic", p, "stack", string(debug.Stack()))
				res, err = errorResult(ToolError{Type: "internal", Detail: "internal error; the server log has the details"}), nil
			}
		}()
		in, te := decodeArgs[In](req.Params.Arguments, resolved, t.s.opts.MaxArgumentBytes)
		if te != nil {
			return errorResult(*te), nil
		}
		b, err := t.bind(req)
		if err != nil {
			return errorResult(ToolError{Type: "unauthorized", Detail: err.Error()}), nil
		}
		if b.Tenant == "" {
			return errorResult(ToolError{Type: "unauthorized", Detail: "this connection is bound to no tenant"}), nil
		}
		if b.User == "" {
			return errorResult(ToolError{Type: "unauthorized", Detail: ErrUnbound.Error() + ": use a user-bound API key or the X-Memento-User header"}), nil
		}
		if err := retrieval.ValidPrincipal(Principal(b.User)); err != nil {
			// Refused for every tool, not only those that retrieve as the
			// user: a connection some tools cannot serve is a broken one.
			return errorResult(ToolError{Type: "unauthorized", Detail: fmt.Sprintf("this connection's user cannot read documents as %s: %v; bind a shorter user id", Principal("<user>"), err)}), nil
		}
		ctx, cancel := context.WithTimeout(ctx, t.s.opts.CallTimeout)
		defer cancel()
		v, err := h(ctx, call{b}, in)
		if err != nil {
			return errorResult(t.classifyCall(tool, err)), nil
		}
		out, err := json.Marshal(v)
		if err != nil {
			return errorResult(t.classify(tool.Name, fmt.Errorf("encode the result: %w", err))), nil
		}
		return &gomcp.CallToolResult{StructuredContent: json.RawMessage(out), Content: []gomcp.Content{&gomcp.TextContent{Text: string(out)}}}, nil
	})
}

// decodeArgs checks a call's arguments (size, JSON object, schema) and
// decodes them.
func decodeArgs[In any](raw json.RawMessage, schema *jsonschema.Resolved, limit int) (In, *ToolError) {
	var in In
	if n := len(raw); n > limit {
		return in, &ToolError{Type: "invalid-request", Detail: fmt.Sprintf("the arguments are %d bytes, over the limit of %d: keep large content out of tool calls", n, limit)}
	}
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return in, &ToolError{Type: "invalid-request", Detail: "the arguments must be a JSON object"}
	}
	if err := schema.Validate(generic); err != nil {
		// The validator prints a JSON null as Go's "<invalid reflect.Value>".
		detail := strings.ReplaceAll(err.Error(), "<invalid reflect.Value> has type", "null has type")
		return in, &ToolError{Type: "invalid-request", Detail: "the arguments do not match the tool's input schema: " + detail}
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return in, &ToolError{Type: "invalid-request", Detail: "the arguments do not match the tool's input schema: " + decodeProblem(err)}
	}
	return in, nil
}

// decodeProblem says what a decode error means in the arguments' terms,
// not in Go's ("Go struct field addIn.message_seqs of type int64").
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return "the arguments are not valid JSON for this tool"
	}
	want := "another type"
	switch te.Type.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		want = fmt.Sprintf("an integer within [%d, %d]", int64(math.MinInt64), int64(math.MaxInt64))
		if te.Type.Kind() == reflect.Int32 {
			want = fmt.Sprintf("an integer within [%d, %d]", math.MinInt32, math.MaxInt32)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		want = "a number"
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "true or false"
	case reflect.Slice, reflect.Array:
		want = "an array"
	case reflect.Map, reflect.Struct:
		want = "an object"
	}
	field := te.Field
	if field == "" {
		field = "the arguments"
	}
	return fmt.Sprintf("%s: %s is not %s", field, te.Value, want)
}

// classifyCall is classify for a tool's own failure: a write tool whose
// outcome is unknown says so, with how to settle it.
func (t *toolset) classifyCall(tool *gomcp.Tool, err error) ToolError {
	var te *ToolError
	readOnly := tool.Annotations != nil && tool.Annotations.ReadOnlyHint
	if !errors.As(err, &te) && !readOnly && t.s.opts.OutcomeUnknown != nil && t.s.opts.OutcomeUnknown(err) {
		t.s.log.Warn("mcp tool outcome unknown", "tool", tool.Name, "err", err)
		return ToolError{Type: problem.CommitOutcomeUnknown, Detail: "the connection to the store broke after the write was sent, so it may or may not have been applied: read it back with the matching read tool before calling " + tool.Name + " again"}
	}
	return t.classify(tool.Name, err)
}

func (t *toolset) classify(tool string, err error) ToolError {
	var te *ToolError
	if errors.As(err, &te) {
		return *te
	}
	if t.s.opts.Classify != nil {
		kind, detail, internal := t.s.opts.Classify(err)
		if !internal {
			return ToolError{Type: kind, Detail: detail}
		}
	}
	t.s.log.Error("mcp tool failed", "tool", tool, "err", err)
	return ToolError{Type: "internal", Detail: "internal error; the server log has the details"}
}

func (e *ToolError) Error() string { return e.Detail }

// invalid is a tool error for an argument the model must fix.
func invalid(format string, args ...any) error {
	return &ToolError{Type: "invalid-request", Detail: fmt.Sprintf(format, args...)}
}

func errorResult(te ToolError) *gomcp.CallToolResult {
	b, _ := json.Marshal(map[string]ToolError{"error": te})
	return &gomcp.CallToolResult{IsError: true, Content: []gomcp.Content{&gomcp.TextContent{Text: string(b)}}}
}

// RunID is the run id behind a user's run name: runs are per tenant, so
// the name is prefixed with a digest of the user, and no name one user can
// pass reaches another user's run.
func RunID(user, name string) (string, error) {
	if err := run.ValidID("run", name); err != nil {
		return "", invalid("%v", err)
	}
	sum := sha256.Sum256([]byte(user))
	id := "mcp-" + hex.EncodeToString(sum[:10]) + "-" + name
	if len(id) > run.MaxIDLength {
		return "", invalid("run is longer than %d bytes", run.MaxIDLength-len(id)+len(name))
	}
	return id, nil
}

// object checks that a JSON value given as an argument is an object.
func object(field string, v map[string]any) (json.RawMessage, error) {
	if v == nil {
		return nil, invalid("%s must be a JSON object", field)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, invalid("%s: %v", field, err)
	}
	return b, nil
}
