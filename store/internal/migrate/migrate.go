package migrate

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Migration is one SQL file; Version is its name without ".sql" ("0001_runs").
type Migration struct {
	Version string
	SQL     string
}

// Load reads dir/*.sql from fsys in lexical order (0001_, 0002_, ...).
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	sort.Strings(names)
	out := make([]Migration, 0, len(names))
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		out = append(out, Migration{Version: strings.TrimSuffix(path.Base(name), ".sql"), SQL: string(b)})
	}
	return out, nil
}

// Tx is the dialect of one open migration transaction.
type Tx interface {
	// Prepare takes the lock that serializes migrators (if the transaction
	// itself does not) and creates the bookkeeping table if missing.
	Prepare(ctx context.Context) error
	// Applied lists the versions already recorded.
	Applied(ctx context.Context) ([]string, error)
	// Exec runs one migration file, which may hold several statements.
	Exec(ctx context.Context, sql string) error
	// Record marks a version applied.
	Record(ctx context.Context, version string) error
}

// Apply runs, inside tx, every migration not yet recorded, in order. The
// caller commits tx only when Apply returns nil, so a failure leaves nothing
// half-applied and instances starting together apply each file once.
func Apply(ctx context.Context, tx Tx, migs []Migration) error {
	if err := tx.Prepare(ctx); err != nil {
		return fmt.Errorf("prepare migrations: %w", err)
	}
	applied, err := tx.Applied(ctx)
	if err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	done := make(map[string]bool, len(applied))
	for _, v := range applied {
		done[v] = true
	}
	for _, m := range migs {
		if done[m.Version] {
			continue
		}
		if err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("apply migration %s: %w", m.Version, err)
		}
		if err := tx.Record(ctx, m.Version); err != nil {
			return fmt.Errorf("record migration %s: %w", m.Version, err)
		}
	}
	return nil
}
