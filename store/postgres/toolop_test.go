package postgres_test

import (
	"context"
	"testing"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/storetest"
	"github.com/mementohq/memento/toolop"
)

func TestToolopStore(t *testing.T) {
	db, err := postgres.Open(context.Background(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(db.Close)
	storetest.ToolopStoreSuite(t, func(t *testing.T) toolop.Store { return db })
}
