package memento_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/jackc/pgx/v5"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/sqlite"
)

// TestEmbeddedSessionsAndVaultKey: the embedded engine wires sessions with
// redaction on, generates a private vault key once and reuses it, so a
// reference still resolves after a restart.
func TestEmbeddedSessionsAndVaultKey(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	eng, err := memento.Open(ctx, memento.Config{DataDir: dir})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if eng.SessionBackend() != memento.BackendSQLite || !eng.Vault.Encrypted() {
		t.Fatalf("backend %s, encrypted %v", eng.SessionBackend(), eng.Vault.Encrypted())
	}
	if _, _, err := eng.Sessions.Put(ctx, "t", "s", session.PutRequest{UserID: "u", State: []byte(`{"email":"ann@example.org"}`)}); err != nil {
		t.Fatalf("put: %v", err)
	}
	s, err := eng.Sessions.Get(ctx, "t", "s", "u")
	if err != nil || strings.Contains(string(s.State), "ann@example.org") {
		t.Fatalf("get: %s %v", s.State, err)
	}
	ref := string(s.State)[strings.Index(string(s.State), "pii:") : strings.Index(string(s.State), "pii:")+len("pii:email:")+26]
	fi, err := os.Stat(filepath.Join(dir, memento.PIIKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if err := eng.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	eng, err = memento.Open(ctx, memento.Config{DataDir: dir})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer eng.Close()
	r, err := eng.Vault.Resolve(ctx, "t", ref)
	if err != nil || r.Value != "ann@example.org" {
		t.Fatalf("resolve after restart: %+v %v", r, err)
	}
}

func TestSessionsRedactionDisabled(t *testing.T) {
	eng, err := memento.Open(context.Background(), memento.Config{DataDir: t.TempDir(), PII: memento.PIIConfig{Disabled: true}})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer eng.Close()
	s, _, err := eng.Sessions.Put(context.Background(), "t", "s", session.PutRequest{UserID: "u", State: []byte(`{"email":"ann@example.org"}`)})
	if err != nil || !strings.Contains(string(s.State), "ann@example.org") {
		t.Fatalf("with redaction off the state is kept as given: %s %v", s.State, err)
	}
}

// TestSharedBackendsNeedAKey: sessions on PostgreSQL or Redis with
// redaction on and no vault key refuse to start, saying how to make one;
// with redaction off no key is needed.
func TestSharedBackendsNeedAKey(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		cfg  memento.Config
	}{
		{"postgres", memento.Config{DataDir: t.TempDir(), PostgresURL: testenv.PostgresURL(t)}},
		{"redis", memento.Config{DataDir: t.TempDir(), RedisURL: testenv.RedisURL(t)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := memento.Open(ctx, c.cfg)
			if !errors.Is(err, memento.ErrNoPIIKey) || !strings.Contains(err.Error(), "openssl rand -hex 32") || !strings.Contains(err.Error(), memento.EnvPIIKey) {
				t.Fatalf("open without a key: %v; want ErrNoPIIKey saying how to make one", err)
			}
			if strings.Contains(err.Error(), "sqlite") || strings.Contains(err.Error(), "postgres") || strings.Contains(err.Error(), "redis") {
				t.Fatalf("the key error names a backend: %v", err)
			}
			if entries, _ := os.ReadDir(c.cfg.DataDir); len(entries) != 0 {
				t.Fatalf("a refused open wrote to the data directory: %v", entries)
			}
			off := c.cfg
			off.PII.Disabled = true
			eng, err := memento.Open(ctx, off)
			if err != nil {
				t.Fatalf("open with redaction off: %v", err)
			}
			if eng.Vault.Encrypted() {
				t.Fatal("a vault without a key claims encryption")
			}
			_ = eng.Close()
		})
	}
}

func refIn(t *testing.T, state string) (ref, id string) {
	t.Helper()
	i := strings.Index(state, "pii:email:")
	if i < 0 {
		t.Fatalf("no reference in %s", state)
	}
	ref = state[i : i+len("pii:email:")+26]
	return ref, ref[len("pii:email:"):]
}

// TestVaultEncryptedAtRest reads the vault's storage itself on PostgreSQL
// and Redis: the stored value is not the plaintext, and the engine resolves it.
func TestVaultEncryptedAtRest(t *testing.T) {
	ctx := context.Background()
	const email = "ann.secret@example.org"
	t.Run("postgres", func(t *testing.T) {
		schema, url := testenv.PostgresSchema(t)
		eng, err := memento.Open(ctx, memento.Config{DataDir: t.TempDir(), PostgresURL: url, PII: memento.PIIConfig{Key: testenv.PIIKey}})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer eng.Close()
		if eng.SessionBackend() != memento.BackendPostgres || !eng.Vault.Encrypted() {
			t.Fatalf("session backend %s, encrypted %v", eng.SessionBackend(), eng.Vault.Encrypted())
		}
		s, _, err := eng.Sessions.Put(ctx, "t", "s", session.PutRequest{UserID: "u", State: []byte(`{"email":"` + email + `"}`)})
		if err != nil {
			t.Fatalf("put: %v", err)
		}
		ref, id := refIn(t, string(s.State))
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var sealed []byte
		if err := conn.QueryRow(ctx, `SELECT sealed FROM `+schema+`.pii_vault WHERE tenant_id = 't' AND ref_id = $1`, id).Scan(&sealed); err != nil {
			t.Fatalf("raw vault row: %v", err)
		}
		if len(sealed) == 0 || strings.Contains(string(sealed), email) || strings.Contains(string(sealed), "ann.secret") {
			t.Fatalf("stored vault value holds the plaintext: %q", sealed)
		}
		if r, err := eng.Vault.Resolve(ctx, "t", ref); err != nil || r.Value != email {
			t.Fatalf("resolve: %+v %v", r, err)
		}
	})
	t.Run("redis", func(t *testing.T) {
		rdb, url := testenv.RedisClient(t)
		tenant := testenv.RandomID("t-")
		testenv.CleanupRedisKeys(t, rdb, "memento:{t:"+tenant+":*")
		eng, err := memento.Open(ctx, memento.Config{DataDir: t.TempDir(), RedisURL: url, PII: memento.PIIConfig{Key: testenv.PIIKey}})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer eng.Close()
		s, _, err := eng.Sessions.Put(ctx, tenant, "s", session.PutRequest{UserID: "u", State: []byte(`{"email":"` + email + `"}`)})
		if err != nil {
			t.Fatalf("put: %v", err)
		}
		ref, id := refIn(t, string(s.State))
		raw, err := rdb.Get(ctx, "memento:{t:"+tenant+":v:"+id+"}").Result()
		if err != nil {
			t.Fatalf("raw vault key: %v", err)
		}
		var v struct {
			S []byte `json:"s"`
		}
		if err := json.Unmarshal([]byte(raw), &v); err != nil || len(v.S) == 0 {
			t.Fatalf("raw vault value %q: %v", raw, err)
		}
		if strings.Contains(raw, email) || strings.Contains(string(v.S), email) || strings.Contains(string(v.S), "ann.secret") {
			t.Fatalf("stored vault value holds the plaintext: %q", raw)
		}
		if r, err := eng.Vault.Resolve(ctx, tenant, ref); err != nil || r.Value != email {
			t.Fatalf("resolve: %+v %v", r, err)
		}
	})
}

// TestTwoInstancesOnOnePostgres: two engines on one PostgreSQL, as two
// servers behind a load balancer, with --postgres alone: each sees the
// other's sessions, messages and vault values, and nothing goes to a local file.
func TestTwoInstancesOnOnePostgres(t *testing.T) {
	ctx := context.Background()
	url := testenv.PostgresURL(t)
	open := func() (*memento.Engine, string) {
		dir := t.TempDir()
		e, err := memento.Open(ctx, memento.Config{DataDir: dir, PostgresURL: url, PII: memento.PIIConfig{Key: testenv.PIIKey}})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e, dir
	}
	a, dirA := open()
	b, dirB := open()
	s, _, err := a.Sessions.Put(ctx, "t", "chat-1", session.PutRequest{UserID: "u", State: []byte(`{"step":"start","email":"bo@example.org"}`)})
	if err != nil {
		t.Fatalf("put on a: %v", err)
	}
	got, err := b.Sessions.Get(ctx, "t", "chat-1", "u")
	if err != nil || got.Revision != 1 || string(got.State) != string(s.State) {
		t.Fatalf("get on b: %+v %v", got, err)
	}
	if _, err := b.Sessions.Patch(ctx, "t", "chat-1", "u", 1, []byte(`{"step":"pay"}`)); err != nil {
		t.Fatalf("patch on b: %v", err)
	}
	if _, err := a.Sessions.Patch(ctx, "t", "chat-1", "u", 1, []byte(`{"step":"lost"}`)); !errors.Is(err, session.ErrPreconditionFailed) {
		t.Fatalf("stale patch on a after b's: %v, want ErrPreconditionFailed", err)
	}
	if _, err := b.Sessions.Append(ctx, "t", "chat-1", "u", []session.MessageInput{{Role: "user", Content: "hello from b"}}); err != nil {
		t.Fatalf("append on b: %v", err)
	}
	ms, err := a.Sessions.Messages(ctx, "t", "chat-1", "u", session.MessageQuery{})
	if err != nil || len(ms) != 1 || ms[0].Content != "hello from b" {
		t.Fatalf("messages on a: %+v %v", ms, err)
	}
	ref, _ := refIn(t, string(s.State))
	if r, err := b.Vault.Resolve(ctx, "t", ref); err != nil || r.Value != "bo@example.org" {
		t.Fatalf("b resolves a's reference: %+v %v", r, err)
	}
	if list, err := b.Sessions.ListUser(ctx, "t", "u", 10); err != nil || len(list) != 1 || list[0].Revision != 2 {
		t.Fatalf("list on b: %+v %v", list, err)
	}
	if _, err := a.Sessions.Close(ctx, "t", "chat-1", "u"); err != nil {
		t.Fatalf("close on a: %v", err)
	}
	if _, err := b.Sessions.Get(ctx, "t", "chat-1", "u"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("get on b after a closed it: %v", err)
	}
	for _, dir := range []string{dirA, dirB} {
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("an instance on PostgreSQL wrote local files: %v", entries)
		}
	}
}

// countingSessions wraps a session store, as a fault-injecting or tracing
// wrapper would.
type countingSessions struct {
	session.Store
	puts int
}

func (c *countingSessions) Put(ctx context.Context, p session.PutParams) (session.Session, bool, error) {
	c.puts++
	return c.Store.Put(ctx, p)
}

// TestNewWithWrappedStores: New serves from the stores it is given, so a
// wrapper sees every call; it refuses a missing store or, with redaction
// on, a missing key.
func TestNewWithWrappedStores(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.OpenDir(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ss := sqlite.NewSessionStore(db, sqlite.SessionOptions{SweepInterval: -1})
	defer ss.Close()
	wrapped := &countingSessions{Store: ss}
	st := memento.Stores{Runs: db, Ops: db, Sessions: wrapped, Vault: ss}
	eng, err := memento.New(st, memento.Options{PII: memento.PIIConfig{Key: testenv.PIIKey}})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if _, _, err := eng.Sessions.Put(ctx, "t", "s", session.PutRequest{UserID: "u", State: []byte(`{"email":"x@example.org"}`)}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if wrapped.puts != 1 || !eng.Vault.Encrypted() {
		t.Fatalf("the wrapper saw %d puts (want 1), encrypted %v", wrapped.puts, eng.Vault.Encrypted())
	}
	if err := eng.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
	if err := eng.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("Close of a New engine closed the caller's store: %v", err)
	}
	if _, err := memento.New(st, memento.Options{}); !errors.Is(err, memento.ErrNoPIIKey) || !strings.Contains(err.Error(), "openssl rand -hex 32") {
		t.Fatalf("new without a key: %v", err)
	}
	if _, err := memento.New(memento.Stores{Runs: db, Ops: db}, memento.Options{PII: memento.PIIConfig{Disabled: true}}); err == nil {
		t.Fatal("new without session stores succeeded")
	}
}

// TestOpenRedisCluster: a cluster URL (several seed addresses) opens the
// engine's sessions on the Redis Cluster.
func TestOpenRedisCluster(t *testing.T) {
	url := testenv.RedisClusterURL(t)
	ctx := context.Background()
	tenant := testenv.RandomID("t-")
	eng, err := memento.Open(ctx, memento.Config{DataDir: t.TempDir(), RedisURL: url, PII: memento.PIIConfig{Key: testenv.PIIKey}})
	if err != nil {
		t.Fatalf("open on the cluster: %v", err)
	}
	defer eng.Close()
	if eng.SessionBackend() != memento.BackendRedis {
		t.Fatalf("session backend %s", eng.SessionBackend())
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		state := `{"n":1}`
		if id == "c" {
			state = `{"mail":"z@example.org"}`
		}
		if _, _, err := eng.Sessions.Put(ctx, tenant, id, session.PutRequest{UserID: "u", State: []byte(state)}); err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
		defer func() { _, _ = eng.Sessions.Close(ctx, tenant, id, "u") }()
	}
	s, err := eng.Sessions.Get(ctx, tenant, "c", "u")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	ref, _ := refIn(t, string(s.State))
	if r, err := eng.Vault.Resolve(ctx, tenant, ref); err != nil || r.Value != "z@example.org" {
		t.Fatalf("resolve on the cluster: %+v %v", r, err)
	}
	_ = eng.Vault.Forget(ctx, tenant, ref)
	if list, err := eng.Sessions.ListUser(ctx, tenant, "u", 10); err != nil || len(list) != 4 {
		t.Fatalf("list on the cluster: %d %v", len(list), err)
	}
	if err := eng.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
}
