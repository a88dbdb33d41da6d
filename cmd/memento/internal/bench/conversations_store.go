package bench

import (
	"context"
	"fmt"
	"os"
	"reflect"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/store/sqlite"
)

// The backends `bench locomo` can run on.
const (
	BackendMemstore = "memstore"
	BackendSQLite   = "sqlite"
	BackendPostgres = "postgres"
)

// OpenMemoryStore opens an empty long-term memory store on backend (a
// temporary SQLite directory, or a PostgreSQL schema of its own), and a
// function that closes and removes it.
func OpenMemoryStore(ctx context.Context, backend, postgresURL string) (memory.Store, func(), error) {
	switch backend {
	case BackendMemstore, "":
		return memstore.New().Memory(), func() {}, nil
	case BackendSQLite:
		dir, err := os.MkdirTemp("", "memento-bench-locomo-")
		if err != nil {
			return nil, nil, fmt.Errorf("open sqlite: %w", err)
		}
		db, err := sqlite.OpenDir(ctx, dir)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, nil, fmt.Errorf("open sqlite: %w", err)
		}
		closeAll := func() { _ = db.Close(); _ = os.RemoveAll(dir) }
		ms, err := memoryView(db)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		return ms, closeAll, nil
	case BackendPostgres:
		if postgresURL == "" {
			return nil, nil, fmt.Errorf("backend postgres: a PostgreSQL URL is required")
		}
		b, err := openPostgres(ctx, postgresURL, 4)
		if err != nil {
			return nil, nil, err
		}
		ms, err := memoryView(b.db)
		if err != nil {
			b.close()
			return nil, nil, err
		}
		return ms, b.close, nil
	}
	return nil, nil, fmt.Errorf("unknown backend %q (memstore, sqlite or postgres)", backend)
}

// memoryView returns db's long-term memory view (its Memory method), found
// by reflection so the bench builds whether or not the backend has one yet.
func memoryView(db any) (memory.Store, error) {
	m := reflect.ValueOf(db).MethodByName("Memory")
	if m.IsValid() && m.Type().NumIn() == 0 && m.Type().NumOut() == 1 {
		if ms, ok := m.Call(nil)[0].Interface().(memory.Store); ok {
			return ms, nil
		}
	}
	if ms, ok := db.(memory.Store); ok {
		return ms, nil
	}
	return nil, fmt.Errorf("this build's %T has no long-term memory store yet", db)
}
