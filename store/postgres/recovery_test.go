package postgres_test

import (
	"context"
	"testing"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/storetest"
	"github.com/mementohq/memento/toolop"
)

func TestRecoverySuite(t *testing.T) {
	db, err := postgres.Open(context.Background(), storetest.PostgresURL(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(db.Close)
	storetest.RecoverySuite(t, func(t *testing.T) (run.Store, toolop.Store) { return db, db })
}
