package postgres

import (
	"testing"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/storetest"
)

func TestMemoryStoreSuite(t *testing.T) {
	db := openTestDB(t) // subtests use random tenants: one schema serves them all
	storetest.MemoryStoreSuite(t, func(t *testing.T) memory.Store { return db })
}

// Every memory table is laid out for distribution by tenant: each primary
// and unique key starts with tenant_id (DESIGN.md, backends).
func TestMemoryKeysStartWithTenant(t *testing.T) {
	db := openTestDB(t)
	rows, err := db.pool.Query(ctxT(t), `SELECT c.relname, i.relname, a.attname
		FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = x.indkey[0]
		WHERE (x.indisprimary OR x.indisunique) AND c.relname LIKE 'memory\_%' AND c.relnamespace = current_schema()::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var table, index, first string
		if err := rows.Scan(&table, &index, &first); err != nil {
			t.Fatal(err)
		}
		n++
		if first != "tenant_id" {
			t.Errorf("%s: key %s starts with %s", table, index, first)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 8 { // seven primary keys and the one-current-per-key index
		t.Fatalf("found %d keys of memory tables", n)
	}
}
