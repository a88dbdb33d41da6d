package sqlite_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/sqlite"
	"github.com/mementohq/memento/storetest"
)

func openSessions(t *testing.T) (*sqlite.DB, *sqlite.SessionStore) {
	t.Helper()
	db := openTemp(t)
	s := sqlite.NewSessionStore(db, sqlite.SessionOptions{SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	return db, s
}

func TestSessionStoreSuite(t *testing.T) {
	storetest.SessionStoreSuite(t, func(t *testing.T) session.Store {
		_, s := openSessions(t)
		return s
	})
}

func TestPIIVaultSuite(t *testing.T) {
	storetest.PIIVaultSuite(t, func(t *testing.T) pii.Store {
		_, s := openSessions(t)
		return s
	})
}

// TestSessionSweepReclaims checks that expired sessions, their messages and
// expired vault values are deleted from disk, and live ones are kept.
func TestSessionSweepReclaims(t *testing.T) {
	db, st := openSessions(t)
	ctx := t.Context()
	vault, _ := pii.NewVault(st, pii.VaultOptions{Retention: 300 * time.Millisecond})
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
	if n := countRows(t, db, "session_messages"); n != 4 {
		t.Fatalf("%d message rows, want 4", n)
	}
	if n := countRows(t, db, "pii_vault"); n != 2 {
		t.Fatalf("%d vault rows, want 2", n)
	}
	time.Sleep(400 * time.Millisecond) // real TTL and retention expiry
	if n := countRows(t, db, "sessions"); n != 2 {
		t.Fatalf("expired row gone before the sweep? %d rows", n)
	}
	sessions, values, err := st.Sweep(ctx)
	if err != nil || sessions != 1 || values != 2 {
		t.Fatalf("sweep: %d sessions, %d values, %v; want 1, 2", sessions, values, err)
	}
	if n := countRows(t, db, "sessions"); n != 1 {
		t.Fatalf("%d session rows after sweep, want 1", n)
	}
	if n := countRows(t, db, "session_messages"); n != 2 {
		t.Fatalf("%d message rows after sweep, want the live session's 2", n)
	}
	if n := countRows(t, db, "pii_vault"); n != 0 {
		t.Fatalf("%d vault rows after sweep", n)
	}
	if _, err := svc.Get(ctx, "t", "kept", "u"); err != nil {
		t.Fatalf("live session after sweep: %v", err)
	}
}

// TestSessionSweeperRunsAndStops checks the background sweeper reclaims on
// its own and that Close stops it (Close waits for the goroutine to end).
func TestSessionSweeperRunsAndStops(t *testing.T) {
	db := openTemp(t)
	errs := make(chan error, 10)
	st := sqlite.NewSessionStore(db, sqlite.SessionOptions{SweepInterval: 50 * time.Millisecond, OnSweepError: func(err error) { errs <- err }})
	svc := session.NewService(st, session.Options{})
	if _, _, err := svc.Put(t.Context(), "t", "s", session.PutRequest{UserID: "u", TTL: 100 * time.Millisecond}); err != nil {
		t.Fatalf("put: %v", err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for countRows(t, db, "sessions") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sweeper did not reclaim the expired session within 3s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { st.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not stop the sweeper")
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	select {
	case err := <-errs:
		t.Fatalf("sweep error: %v", err)
	default:
	}
}

// TestSessionRawStorageHoldsReferences reads the rows themselves: a message
// with a card number and an e-mail is stored with references only.
func TestSessionRawStorageHoldsReferences(t *testing.T) {
	db, st := openSessions(t)
	ctx := t.Context()
	vault, _ := pii.NewVault(st, pii.VaultOptions{})
	svc := session.NewService(st, session.Options{Redactor: vault})
	if _, _, err := svc.Put(ctx, "t", "s", session.PutRequest{UserID: "u", State: json.RawMessage(`{"contact":"bob@example.org"}`)}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := svc.Append(ctx, "t", "s", "u", []session.MessageInput{{Role: "user", Content: "pay with 4111-1111-1111-1111, receipt to bob@example.org"}}); err != nil {
		t.Fatalf("append: %v", err)
	}
	var content, state string
	if err := db.SQL().QueryRowContext(ctx, `SELECT content FROM session_messages WHERE tenant_id = 't' AND session_id = 's'`).Scan(&content); err != nil {
		t.Fatalf("raw message: %v", err)
	}
	if err := db.SQL().QueryRowContext(ctx, `SELECT state FROM sessions WHERE tenant_id = 't' AND session_id = 's'`).Scan(&state); err != nil {
		t.Fatalf("raw state: %v", err)
	}
	for _, raw := range []string{"4111-1111-1111-1111", "4111111111111111", "bob@example.org"} {
		if strings.Contains(content, raw) || strings.Contains(state, raw) {
			t.Fatalf("raw %q on disk: %q %q", raw, content, state)
		}
	}
	if !strings.Contains(content, "pii:card:") || !strings.Contains(content, "pii:email:") || !strings.Contains(state, "pii:email:") {
		t.Fatalf("references missing on disk: %q %q", content, state)
	}
}

// TestSessionTwoHandles checks that the compare-and-set holds across two
// handles on one file (a CLI and a server): of two patches at the same
// revision, through different handles, exactly one wins.
func TestSessionTwoHandles(t *testing.T) {
	db1, st1 := openSessions(t)
	ctx := t.Context()
	db2, err := sqlite.Open(ctx, db1.Path())
	if err != nil {
		t.Fatalf("second handle: %v", err)
	}
	defer db2.Close()
	st2 := sqlite.NewSessionStore(db2, sqlite.SessionOptions{SweepInterval: -1})
	defer st2.Close()
	svc1 := session.NewService(st1, session.Options{})
	svc2 := session.NewService(st2, session.Options{})
	if _, _, err := svc1.Put(ctx, "t", "s", session.PutRequest{UserID: "u"}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := svc2.Patch(ctx, "t", "s", "u", 1, json.RawMessage(`{"a":1}`)); err != nil {
		t.Fatalf("patch through handle 2: %v", err)
	}
	if _, err := svc1.Patch(ctx, "t", "s", "u", 1, json.RawMessage(`{"b":1}`)); !errors.Is(err, session.ErrPreconditionFailed) {
		t.Fatalf("patch through handle 1 at the same revision: %v, want ErrPreconditionFailed", err)
	}
	got, err := svc1.Get(ctx, "t", "s", "u")
	if err != nil || got.Revision != 2 || string(got.State) != `{"a":1}` {
		t.Fatalf("after the race: %+v %v", got, err)
	}
}
