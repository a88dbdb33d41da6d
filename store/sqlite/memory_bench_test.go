package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"fmt"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/storetest"
)

// BenchmarkMemorySearchText ranks the full text of 100,000 current claims of
// one subject (beside 1,000 of another). Each query reports its ns/op and
// x-get, its cost over a point read (Get) of one claim measured in the same run.
//
//	go test -run '^$' -bench MemorySearchText -benchtime 200x ./store/sqlite/
func BenchmarkMemorySearchText(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(b.TempDir(), "memento.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	n := benchClaims
	rowid := int64(0)
	benchLoad(b, db, &rowid, storetest.BenchClaims("t", "big", n, 1))
	benchLoad(b, db, &rowid, storetest.BenchClaims("t", "small", 1000, 2))
	get := func() {
		if _, err := db.Get(ctx, "t", fmt.Sprintf("mem-big-%07d", n/3)); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range storetest.BenchQueries() {
		b.Run(q.Name, func(b *testing.B) {
			tq := memory.TextQuery{TenantID: "t", SubjectID: "big", Terms: q.Terms, Limit: 20, Now: time.Now()}
			hits, err := db.SearchText(ctx, tq)
			if err != nil || len(hits) == 0 {
				b.Fatalf("search %v: %d hits, %v", q.Terms, len(hits), err)
			}
			base := perOp(b, 1000, get) // measured next to the searches: the machine may be busy
			start := time.Now()
			for b.Loop() {
				if _, err := db.SearchText(ctx, tq); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start))/float64(b.N)/float64(base), "x-get")
		})
	}
}

// perOp is the mean time of n calls of f.
func perOp(b *testing.B, n int, f func()) time.Duration {
	b.Helper()
	start := time.Now()
	for range n {
		f()
	}
	return time.Since(start) / time.Duration(n)
}

// benchClaims is the size of the big subject (a var so a profile can shrink it).
var benchClaims = 100_000

// benchLoad writes claims as current ones; it goes around Insert's checks, with prepared statements: the
// rows are the ones Insert writes, 20 times faster to write.
func benchLoad(b testing.TB, db *DB, rowid *int64, claims []memory.Claim) {
	ctx := context.Background()
	{
		err := db.writeTx(ctx, func(tx *sql.Tx) error {
			fts, err := tx.PrepareContext(ctx, `INSERT INTO memory_fts (rowid, scope, body, tenant_id, memory_id) VALUES (?, ?, ?, ?, ?)`)
			if err != nil {
				return err
			}
			defer fts.Close()
			cl, err := tx.PrepareContext(ctx, `INSERT INTO memory_claims (`+claimColumns+`, fts_rowid)
				VALUES (?, ?, ?, ?, ?, ?, 1, ?, '', '{}', 1, ?, NULL, 'current', NULL, '', '', '', NULL, '', ?, ?, ?, 0, ?, ?)`)
			if err != nil {
				return err
			}
			defer cl.Close()
			for i, c := range claims {
				*rowid++
				scope, body := ftsRow(c)
				if _, err := fts.ExecContext(ctx, *rowid, scope, body, c.TenantID, c.MemoryID); err != nil {
					return err
				}
				if _, err := cl.ExecContext(ctx, c.TenantID, c.MemoryID, c.SubjectID, c.Namespace, c.Key, string(c.Value), c.Text,
					c.ValidFrom.UnixMicro(), c.ValueDigest, c.CreatedAt.UnixMicro(), c.ConfirmedAt.UnixMicro(), i+1, *rowid); err != nil {
					return err
				}
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO memory_subjects (tenant_id, subject_id, version) VALUES (?, ?, ?)`,
				claims[0].TenantID, claims[0].SubjectID, len(claims))
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
