package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testURL is the server the tests use: MEMENTO_TEST_POSTGRES_URL or the
// usual local address.
func testURL() string {
	if u := os.Getenv("MEMENTO_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return defaultTestURL
}

// withParam adds a parameter to a connection string, in URL or
// keyword/value form.
func withParam(conn, key, value string) string {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		if err == nil {
			q := u.Query()
			q.Set(key, value)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return conn + " " + key + "=" + value
}

// withSearchPath makes every pooled connection use schema: pgx sends
// parameters it does not know itself as runtime parameters.
func withSearchPath(conn, schema string) string { return withParam(conn, "search_path", schema) }

// newTestSchema creates a schema with a random name, dropped when the test
// ends, and returns its name and a connection string whose pooled
// connections all use it. Other helpers' tests run against the same server
// at the same time; a schema each keeps them apart.
func newTestSchema(t testing.TB) (schema, conn string) {
	t.Helper()
	base := testURL()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PostgreSQL is required and unreachable at %s (set MEMENTO_TEST_POSTGRES_URL): %v", base, err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema = "memento_t_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("PostgreSQL at %s: create schema %s: %v", base, schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer func() { _ = c.Close(context.Background()) }()
		if _, err := c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema, withSearchPath(base, schema)
}

// openTestDB opens a store on a fresh schema of its own; the store is
// closed and the schema dropped when the test ends.
func openTestDB(t testing.TB) *DB {
	t.Helper()
	_, conn := newTestSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := Open(ctx, conn)
	if err != nil {
		t.Fatalf("open postgres store: %v", err)
	}
	t.Cleanup(db.Close) // registered after the schema's cleanup, so it runs first
	return db
}
