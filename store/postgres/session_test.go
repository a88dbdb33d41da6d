package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/storetest"
)

// openSessions opens a session store on a schema of t's own, sweeper off.
func openSessions(t *testing.T) (*postgres.DB, *postgres.SessionStore) {
	t.Helper()
	db, err := postgres.Open(t.Context(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(db.Close)
	s := postgres.NewSessionStore(db, postgres.SessionOptions{SweepInterval: -1})
	t.Cleanup(func() { _ = s.Close() })
	return db, s
}

func TestSessionStoreSuite(t *testing.T) {
	_, s := openSessions(t) // subtests use random tenants: one schema serves them all
	storetest.SessionStoreSuite(t, func(t *testing.T) session.Store { return s })
}

func TestPIIVaultSuite(t *testing.T) {
	_, s := openSessions(t)
	storetest.PIIVaultSuite(t, func(t *testing.T) pii.Store { return s })
}

func countRows(t *testing.T, db *postgres.DB, table string) int {
	t.Helper()
	var n int
	if err := db.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// TestSessionSweep checks that a sweep deletes expired sessions, their
// messages and expired vault values and keeps live ones, and that a sweep
// finding another instance's pass in progress skips instead of waiting.
func TestSessionSweep(t *testing.T) {
	db, st := openSessions(t)
	ctx := t.Context()
	vault, _ := pii.NewVault(st, pii.VaultOptions{Retention: 300 * time.Millisecond, Key: make([]byte, 32)})
	svc := session.NewService(st, session.Options{Redactor: vault})
	for _, c := range []struct {
		id  string
		ttl time.Duration
	}{{"gone", 300 * time.Millisecond}, {"kept", time.Minute}} {
		if _, _, err := svc.Put(ctx, "t", c.id, session.PutRequest{UserID: "u", TTL: c.ttl}); err != nil {
			t.Fatalf("put %s: %v", c.id, err)
		}
		if _, err := svc.Append(ctx, "t", c.id, "u", []session.MessageInput{{Role: "user", Content: "mail a@b.io"}, {Role: "user", Content: "2"}}); err != nil {
			t.Fatalf("append %s: %v", c.id, err)
		}
	}
	time.Sleep(400 * time.Millisecond)

	// Another instance holds the sweep lock: this pass deletes nothing and returns.
	other, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '')))`, int32(0x53574550)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	n, v, err := st.Sweep(wctx)
	cancel()
	if err != nil || n != 0 || v != 0 {
		t.Fatalf("sweep while another instance sweeps: %d sessions, %d values, %v; want 0, 0, nil without waiting", n, v, err)
	}
	_ = other.Rollback(ctx)

	n, v, err = st.Sweep(ctx)
	if err != nil || n != 1 || v != 2 {
		t.Fatalf("sweep: %d sessions, %d vault values, %v; want 1 and 2", n, v, err)
	}
	if got := countRows(t, db, "sessions"); got != 1 {
		t.Fatalf("%d session rows, want 1", got)
	}
	if got := countRows(t, db, "session_messages"); got != 2 {
		t.Fatalf("%d message rows, want the 2 of the live session", got)
	}
	if _, err := svc.Get(ctx, "t", "kept", "u"); err != nil {
		t.Fatalf("live session after sweep: %v", err)
	}
}
