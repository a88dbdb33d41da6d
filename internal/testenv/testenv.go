package testenv

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
	goredis "github.com/redis/go-redis/v9"
)

// The servers the tests talk to when the environment names none.
const (
	defaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	defaultRedisURL    = "redis://127.0.0.1:6379/0"
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// PostgresURL returns a connection string to a schema of t's own on the
// tests' PostgreSQL (MEMENTO_TEST_POSTGRES_URL or the local default): every
// pooled connection uses it, and it is dropped when t ends. It fails t when
// PostgreSQL is unreachable; tests never skip for a missing service.
func PostgresURL(t testing.TB) string {
	t.Helper()
	_, conn := PostgresSchema(t)
	return conn
}

// PostgresSchema is PostgresURL that also names the schema, for tests that
// look inside it. Other tests run against the same server at the same time;
// a randomly named schema each keeps them apart.
func PostgresSchema(t testing.TB) (schema, conn string) {
	t.Helper()
	base := envOr("MEMENTO_TEST_POSTGRES_URL", defaultPostgresURL)
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
	// pgx sends parameters it does not know itself as runtime parameters.
	return schema, WithPostgresParam(base, "search_path", schema)
}

// WithPostgresParam sets a parameter of a PostgreSQL connection string, in
// URL or keyword/value form.
func WithPostgresParam(conn, key, value string) string {
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

// RedisURL returns the URL of the tests' Redis (MEMENTO_TEST_REDIS_URL or
// the local default) after checking that it answers; it fails t when it
// does not. Tests share that Redis: keep to random tenants or key prefixes
// and delete what you wrote (CleanupRedisKeys).
func RedisURL(t testing.TB) string {
	t.Helper()
	c, u := dialRedis(t)
	_ = c.Close()
	return u
}

// RedisClient is RedisURL with a client of that Redis, closed when t ends.
func RedisClient(t testing.TB) (*goredis.Client, string) {
	t.Helper()
	c, u := dialRedis(t)
	t.Cleanup(func() { _ = c.Close() })
	return c, u
}

func dialRedis(t testing.TB) (*goredis.Client, string) {
	t.Helper()
	u := envOr("MEMENTO_TEST_REDIS_URL", defaultRedisURL)
	opts, err := goredis.ParseURL(u)
	if err != nil {
		t.Fatalf("MEMENTO_TEST_REDIS_URL: %v", err)
	}
	c := goredis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		t.Fatalf("Redis is required and unreachable at %s (set MEMENTO_TEST_REDIS_URL): %v", u, err)
	}
	return c, u
}

// RedisClusterURL returns the cluster URL of the tests' Redis Cluster
// (MEMENTO_TEST_REDIS_CLUSTER_URL, go-redis's form with several seed
// addresses; scripts/test.sh starts one) after checking that the cluster is
// up. Without it, t fails when CI=true and is skipped with the reason
// elsewhere: a developer machine may have no cluster, CI always has one.
func RedisClusterURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("MEMENTO_TEST_REDIS_CLUSTER_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MEMENTO_TEST_REDIS_CLUSTER_URL is not set and CI=true: the Redis Cluster tests must run in CI (scripts/test.sh starts a cluster)")
		}
		t.Skip("no Redis Cluster: set MEMENTO_TEST_REDIS_CLUSTER_URL (scripts/test.sh starts one)")
	}
	opts, err := goredis.ParseClusterURL(u)
	if err != nil {
		t.Fatalf("MEMENTO_TEST_REDIS_CLUSTER_URL: %v", err)
	}
	c := goredis.NewClusterClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil || !strings.Contains(info, "cluster_state:ok") {
		t.Fatalf("Redis Cluster at %s is not usable (cluster_state:ok): %v %s", u, err, info)
	}
	return u
}

// CleanupRedisKeys deletes every key matching pattern when t ends, before
// any cleanup registered earlier (such as closing rdb) runs. On a cluster
// client it scans every master.
func CleanupRedisKeys(t testing.TB, rdb goredis.Cmdable, pattern string) {
	t.Cleanup(func() {
		ctx := context.Background()
		scan := func(c goredis.Cmdable) []string {
			var keys []string
			iter := c.Scan(ctx, 0, pattern, 500).Iterator()
			for iter.Next(ctx) {
				keys = append(keys, iter.Val())
			}
			return keys
		}
		if cc, ok := rdb.(*goredis.ClusterClient); ok {
			_ = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
				for _, k := range scan(c) {
					c.Del(ctx, k) // one a call: a node's keys span slots
				}
				return nil
			})
			return
		}
		if keys := scan(rdb); len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
}

// PIIKey is a vault key for tests on shared backends (PostgreSQL, Redis),
// which refuse to start without one; PIIKeyHex is it as MEMENTO_PII_KEY
// takes it. Never use it outside tests.
var PIIKey = []byte("memento-test-vault-key-32-bytes!")

// PIIKeyHex is PIIKey in hex.
const PIIKeyHex = "6d656d656e746f2d746573742d7661756c742d6b65792d33322d627974657321"

// RandomID returns prefix followed by 12 random hex digits, for tenants,
// key prefixes and ids that must not meet another test's.
func RandomID(prefix string) string { return prefix + randHex(6) }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
