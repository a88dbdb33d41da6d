package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/postgres"
)

// TestStatementTimeout: the pool's connections have a statement_timeout,
// the default unless the URL names one, so a stuck statement cannot hold a
// pooled connection for ever.
func TestStatementTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := testenv.PostgresURL(t)
	for _, c := range []struct{ url, want string }{
		{url, postgres.DefaultStatementTimeout},
		{url + "&statement_timeout=2s", "2s"},
	} {
		db, err := postgres.Open(ctx, c.url)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if err := db.Pool().QueryRow(ctx, "SHOW statement_timeout").Scan(&got); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if got != c.want {
			t.Errorf("statement_timeout %q, want %q (url %s)", got, c.want, c.url)
		}
	}
}

// TestCancelledWriteDoesNotLandLater: a single-statement write whose
// context ends while it waits (here on a row lock) is cancelled by the
// server, not left running behind a dropped connection: once the caller
// has its error, the write has not happened and never will.
func TestCancelledWriteDoesNotLandLater(t *testing.T) {
	db, st := openSessions(t)
	ctx := t.Context()
	if _, _, err := st.Put(ctx, session.PutParams{TenantID: "t", SessionID: "s", UserID: "u", State: []byte(`{"n":0}`), TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	lock, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `SELECT 1 FROM sessions WHERE tenant_id = 't' AND session_id = 's' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = st.SetState(wctx, "t", "s", "u", 1, []byte(`{"n":1}`))
	cancel()
	if err == nil {
		t.Fatal("a write blocked on a lock past its deadline succeeded")
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a write left running would land now
	got, err := st.Get(ctx, "t", "s", "u")
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != 1 {
		t.Fatalf("the cancelled write landed after its error: revision %d, state %s", got.Revision, got.State)
	}
}
