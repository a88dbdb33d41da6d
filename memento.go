package memento

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/llm/hashembed"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/memory/extract"
	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/search"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/store/sqlite"
	"github.com/mementohq/memento/store/tracestore"
	"github.com/mementohq/memento/tokens"
	"github.com/mementohq/memento/toolop"
)

// DefaultDataDir is where the embedded backend keeps its files unless configured.
const DefaultDataDir = "./memento-data"

// Config says which backends the engine uses. The zero value is the embedded
// default: SQLite in DefaultDataDir.
type Config struct {
	// DataDir holds the embedded SQLite database and its vault key file ("" means
	// DefaultDataDir). It is not opened when PostgresURL is set.
	DataDir string
	// PostgresURL, when set, keeps runs, operations and (without RedisURL)
	// sessions and the vault in PostgreSQL instead of SQLite.
	PostgresURL string
	// RedisURL, when set, is the session and vault backend: one server
	// (redis://host:port/db) or a Redis Cluster named by several seed
	// addresses (redis://h1:p1?addr=h2:p2&addr=h3:p3). Otherwise sessions live
	// with the runs (see engine_sessions.go).
	RedisURL string
	// Sessions tunes session memory (TTLs, caps, sizes); Open sets its Redactor.
	Sessions session.Options
	// PII configures the personal-data redactor (on by default) and its vault.
	PII PIIConfig
	// MaxStateBytes limits a run's state ("0" means run.DefaultMaxStateBytes).
	MaxStateBytes int
	// Registry holds workflow state schemas and migrations (nil means none).
	Registry *run.Registry
	// Tracer, when set, makes every store call a span (store/tracestore);
	// nil means the services call the stores directly.
	Tracer trace.Tracer
	// Memory tunes long-term memory (embedder, extractor, token counter);
	// Open fills in the offline defaults for what is left nil.
	Memory memory.Options
	// Compaction tunes summaries (an LLM compactor, the target model, the
	// text budget); the extractive compactor is always there.
	Compaction compact.Options
	// Retrieval tunes documents and retrieval (embedder, chunk sizes, TTL,
	// snapshot retention); Open sets the offline embedder when it is nil.
	Retrieval retrieval.Options
	// Now, when set, is the engine's clock (see Options.Now).
	Now func() time.Time
}

// setClock gives the services and every Clocked store o.Now.
func setClock(st Stores, o *Options) {
	for _, c := range []*func() time.Time{&o.Memory.Now, &o.Retrieval.Now, &o.Compaction.Now} {
		if *c == nil {
			*c = o.Now
		}
	}
	for _, s := range []any{st.Runs, st.Ops, st.Sessions, st.Vault, st.Memory, st.Summaries, st.Retrieval} {
		if c, ok := s.(Clocked); ok {
			c.SetClock(o.Now)
		}
	}
}

// Backend names the store that holds runs.
type Backend string

// The backends runs can live on.
const (
	BackendSQLite   Backend = "sqlite"
	BackendPostgres Backend = "postgres"
)

// Stores are the stores an engine serves from. Open builds them from URLs;
// a caller of New may pass its own, wrapped ones (fault injection, tracing).
type Stores struct {
	Runs     run.Store
	Ops      toolop.Store
	Sessions session.Store
	Vault    pii.Store
	// Memory holds long-term memory; nil leaves Engine.Memory nil.
	Memory memory.Store
	// Summaries holds compaction summaries; nil leaves Engine.Summaries nil.
	Summaries compact.Store
	// Retrieval holds documents and snapshots; nil leaves Engine.Retrieval nil.
	Retrieval retrieval.Store
}

// Options tune the services New wires over Stores.
type Options struct {
	// MaxStateBytes limits a run's state ("0" means run.DefaultMaxStateBytes).
	MaxStateBytes int
	// Registry holds workflow state schemas and migrations (nil means none).
	Registry *run.Registry
	// Sessions tunes session memory; New sets its Redactor.
	Sessions session.Options
	// PII configures the redactor and the vault. With redaction on, PII.Key
	// is required: vault values are encrypted at rest on every backend.
	PII PIIConfig
	// Tracer, when set, wraps every store so that each call is a span.
	Tracer trace.Tracer
	// Memory tunes long-term memory (embedder, extractor, token counter).
	Memory memory.Options
	// Compaction tunes summaries (compactors, target model, budget); New
	// sets its sources to the engine's run and session stores.
	Compaction compact.Options
	// Retrieval tunes documents and retrieval.
	Retrieval retrieval.Options
	// Now, when set, is the clock of the services and of the stores that
	// keep time in Go (the embedded SQLite store, the in-memory twin; see
	// Clocked), for tests and demos that move time: a session that expired
	// a week ago, a memory past its TTL. PostgreSQL and Redis keep their
	// own server time. Nil is time.Now.
	Now func() time.Time
}

// Clocked is a store whose clock can be set before it is used.
type Clocked interface{ SetClock(now func() time.Time) }

// Engine holds the domain services wired to their stores. Fields are added per
// domain; Open fills them all and Close releases everything Open acquired.
type Engine struct {
	// Runs is the durable run service.
	Runs *run.Service
	// Ops is the operation ledger and approvals, on the same store as Runs.
	Ops *toolop.Service
	// Sessions is session memory, on Redis or the runs backend.
	Sessions *session.Service
	// Vault holds the personal data the redactor replaced by references.
	Vault *pii.Vault
	// Memory is long-term memory, on the runs backend (nil when no store
	// for it was given).
	Memory *memory.Service
	// Retrieval is documents with ACLs and retrieval with provenance, on
	// the runs backend (nil when no store for it was given).
	Retrieval *retrieval.Service
	// Context builds model contexts from the services above.
	Context *contextbuild.Builder
	// Summaries compacts run events and session messages into verifiable
	// summaries, on the runs backend (nil when no store for it was given).
	Summaries *compact.Service

	cfg     Config
	backend Backend
	// sessionBackend names the store that holds sessions.
	sessionBackend Backend
	// closers run in reverse order on Close; pingers must all answer for Ready.
	closeMu sync.Mutex
	closers []func() error
	pingers []namedPing
}

type namedPing struct {
	name string
	ping func(context.Context) error
}

// pinger is a store that can tell whether its backend answers.
type pinger interface {
	Ping(ctx context.Context) error
}

// New wires the domain services over st. Every store is required. Stores
// that have a Ping method are pinged by Ready; Close closes nothing of st
// (the caller owns them).
func New(st Stores, o Options) (*Engine, error) {
	if st.Runs == nil || st.Ops == nil || st.Sessions == nil || st.Vault == nil {
		return nil, errors.New("new memento: every store (runs, operations, sessions, vault) is required")
	}
	if o.MaxStateBytes < 0 {
		return nil, errors.New("new memento: max state bytes must not be negative")
	}
	if o.MaxStateBytes == 0 {
		o.MaxStateBytes = run.DefaultMaxStateBytes
	}
	if o.Registry == nil {
		o.Registry = run.NewRegistry()
	}
	if !o.PII.Disabled && len(o.PII.Key) == 0 {
		return nil, fmt.Errorf("new memento: %w", ErrNoPIIKey)
	}
	if o.Now != nil {
		setClock(st, &o)
	}
	e := &Engine{cfg: Config{MaxStateBytes: o.MaxStateBytes, Registry: o.Registry, Sessions: o.Sessions, PII: o.PII}}
	svc := st
	if o.Tracer != nil {
		svc = traced(st, o.Tracer)
	}
	vault, err := pii.NewVault(svc.Vault, pii.VaultOptions{
		Retention: o.PII.Retention,
		Key:       o.PII.Key,
		Redactor:  pii.NewRedactor(pii.Options{Disabled: o.PII.Disabled, Kinds: o.PII.Kinds}),
	})
	if err != nil {
		return nil, fmt.Errorf("new memento: %w", err)
	}
	so := o.Sessions
	if !o.PII.Disabled {
		so.Redactor = vault
	}
	e.Runs = run.NewService(svc.Runs, run.Options{MaxStateBytes: o.MaxStateBytes, Registry: o.Registry})
	e.Ops = toolop.NewService(svc.Ops, o.Now)
	e.Sessions = session.NewService(svc.Sessions, so)
	e.Vault = vault
	if svc.Memory != nil {
		mo := o.Memory
		if mo.DigestKey == nil && len(o.PII.Key) > 0 {
			// Tombstones keep keyed digests (see memory.Options.DigestKey),
			// under a key of their own derived from the one secret.
			m := hmac.New(sha256.New, o.PII.Key)
			m.Write([]byte("memento memory value digest v1"))
			mo.DigestKey = m.Sum(nil)
		}
		e.Memory = memory.NewService(svc.Memory, mo)
	}
	src := contextbuild.Sources{Runs: e.Runs, Sessions: e.Sessions, Memory: e.Memory}
	if st.Summaries != nil {
		co := o.Compaction
		co.Runs, co.Sessions = svc.Runs, svc.Sessions
		e.Summaries = compact.NewService(st.Summaries, co)
		src.Summaries = compact.ContextSource{S: e.Summaries}
	}
	if svc.Retrieval != nil {
		e.Retrieval = retrieval.NewService(svc.Retrieval, o.Retrieval)
		src.Retriever = retrieval.ContextSource{Service: e.Retrieval}
	}
	// Older history is ranked by full text, and by meaning too when the
	// configured embedder knows meanings: the offline hashing vectors
	// (lexical) lowered the evidence a LoCoMo context holds (bench context).
	if emb := o.Memory.Embedder; emb != nil && !search.IsLexical(emb) {
		src.Embedder = emb
	}
	e.Context = contextbuild.New(src)
	seen := map[any]bool{}
	for i, s := range []any{st.Runs, st.Ops, st.Sessions, st.Vault} {
		p, ok := s.(pinger)
		if !ok {
			continue
		}
		// One backend often serves several stores: ping it once. Only a
		// comparable value can be a map key.
		if reflect.TypeOf(s).Comparable() {
			if seen[s] {
				continue
			}
			seen[s] = true
		}
		e.pingers = append(e.pingers, namedPing{[]string{"runs", "operations", "sessions", "vault"}[i], p.Ping})
	}
	return e, nil
}

// traced wraps every store in a span per call (after New has looked for
// the stores' own Ping, which a wrapper hides).
func traced(st Stores, tr trace.Tracer) Stores {
	return Stores{
		Runs:     tracestore.Runs{Store: st.Runs, T: tr},
		Ops:      tracestore.Ops{Store: st.Ops, T: tr},
		Sessions: tracestore.WrapSessions(st.Sessions, tr),
		Vault:    tracestore.Vault{Store: st.Vault, T: tr},
		Memory:   traceMemory(st.Memory, tr),
		// Retrieval has no traced wrapper yet: its calls are not spans.
		Retrieval: st.Retrieval,
	}
}

func traceMemory(m memory.Store, tr trace.Tracer) memory.Store {
	if m == nil {
		return nil
	}
	return tracestore.Memory{Store: m, T: tr}
}

// Open connects the backends the config names, applies their schema
// migrations, builds the stores and wires them with New. On error nothing
// stays open.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.MaxStateBytes < 0 {
		return nil, fmt.Errorf("open memento: max state bytes must not be negative")
	}
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir
	}
	// Refuse before connecting anything: instances sharing a backend must
	// share the vault key, so none can be made up here.
	if (cfg.PostgresURL != "" || cfg.RedisURL != "") && !cfg.PII.Disabled && len(cfg.PII.Key) == 0 {
		return nil, fmt.Errorf("open memento: %w", ErrNoPIIKey)
	}
	b := &builder{cfg: cfg}
	e, err := b.open(ctx)
	if err != nil {
		b.close()
		return nil, fmt.Errorf("open memento: %w", err)
	}
	return e, nil
}

// builder holds what Open acquired, so a failure releases it.
type builder struct {
	cfg     Config
	closers []func() error
	pingers []namedPing
}

func (b *builder) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		_ = b.closers[i]()
	}
}

func (b *builder) open(ctx context.Context) (*Engine, error) {
	var (
		st      Stores
		backend Backend
		pg      *postgres.DB
		lite    *sqlite.DB
	)
	if b.cfg.PostgresURL != "" {
		db, err := postgres.Open(ctx, b.cfg.PostgresURL)
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		pg, backend, st.Runs, st.Ops, st.Memory, st.Retrieval = db, BackendPostgres, db, db, db, db.Retrieval()
		st.Summaries = db.Summaries()
		b.closers = append(b.closers, func() error { db.Close(); return nil })
		b.pingers = append(b.pingers, namedPing{"postgres", db.Ping})
	} else {
		db, err := sqlite.OpenDir(ctx, b.cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("sqlite in %s: %w", b.cfg.DataDir, err)
		}
		lite, backend, st.Runs, st.Ops, st.Memory, st.Retrieval = db, BackendSQLite, db, db, db, db.Retrieval()
		st.Summaries = db.Summaries()
		b.closers = append(b.closers, db.Close)
		b.pingers = append(b.pingers, namedPing{"sqlite", db.Ping})
	}
	sessionBackend, key, err := b.openSessions(ctx, &st, pg, lite)
	if err != nil {
		return nil, err
	}
	o := Options{MaxStateBytes: b.cfg.MaxStateBytes, Registry: b.cfg.Registry, Sessions: b.cfg.Sessions, PII: b.cfg.PII, Tracer: b.cfg.Tracer, Memory: memoryDefaults(b.cfg.Memory), Retrieval: b.cfg.Retrieval, Now: b.cfg.Now}
	if o.Retrieval.Embedder == nil {
		o.Retrieval.Embedder = o.Memory.Embedder
	}
	o.Compaction = b.cfg.Compaction
	o.PII.Key = key
	e, err := New(st, o)
	if err != nil {
		return nil, err
	}
	e.cfg.DataDir, e.cfg.PostgresURL, e.cfg.RedisURL = b.cfg.DataDir, b.cfg.PostgresURL, b.cfg.RedisURL
	e.backend, e.sessionBackend = backend, sessionBackend
	// The backends' own pings name them better than the stores'.
	e.closers, e.pingers = b.closers, b.pingers
	return e, nil
}

// Config returns the configuration in effect, defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Backend names the store that holds runs ("" for an engine made by New).
func (e *Engine) Backend() Backend { return e.backend }

// Ready reports whether every backend answers; the error names the first that does not.
func (e *Engine) Ready(ctx context.Context) error {
	for _, p := range e.pingers {
		if err := p.ping(ctx); err != nil {
			return fmt.Errorf("%s not ready: %w", p.name, err)
		}
	}
	return nil
}

// Close releases every backend Open acquired, last opened first, and
// reports all failures.
func (e *Engine) Close() error {
	// Two goroutines closing at once: the second finds nothing left.
	e.closeMu.Lock()
	closers := e.closers
	e.closers = nil
	e.closeMu.Unlock()
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close memento: %w", err)
	}
	return nil
}

// memoryDefaults fills what a config leaves nil with the offline defaults:
// the hashing embedder, the rule-based extractor and exact token counts in o200k (the encoding of
// today's OpenAI models; other families are counted the same way, which a
// profile's tokenizer name says).
func memoryDefaults(o memory.Options) memory.Options {
	if o.Embedder == nil {
		o.Embedder = hashembed.New(hashembed.DefaultDim)
	}
	if _, hashed := o.Embedder.(*hashembed.Embedder); hashed && o.DefaultMode == "" {
		o.DefaultMode = memory.ModeFulltext // see memory.Options.DefaultMode
	}
	if o.Extractor == nil {
		o.Extractor = extract.Rules{}
	}
	if o.CountTokens == nil {
		c := tokens.ForModel("gpt-4o")
		o.CountTokens, o.TokenizerName = c.Count, c.Name()
	}
	return o
}
