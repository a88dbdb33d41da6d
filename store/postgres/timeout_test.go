package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

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
