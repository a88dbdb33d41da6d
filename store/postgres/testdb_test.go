package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"
)

// openTestDB opens a store on a fresh schema of its own; the store is
// closed and the schema dropped when the test ends.
func openTestDB(t testing.TB) *DB {
	t.Helper()
	conn := testenv.PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := Open(ctx, conn)
	if err != nil {
		t.Fatalf("open postgres store: %v", err)
	}
	t.Cleanup(db.Close) // registered after the schema's cleanup, so it runs first
	return db
}
