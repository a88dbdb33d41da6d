package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mementohq/memento/store/sqlite"
	"github.com/mementohq/memento/storetest"
	"github.com/mementohq/memento/toolop"
)

func TestToolopStore(t *testing.T) {
	storetest.ToolopStoreSuite(t, func(t *testing.T) toolop.Store {
		db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "memento.db"))
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	})
}
