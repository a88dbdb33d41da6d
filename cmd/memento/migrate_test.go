package main

import (
	"context"
	"regexp"
	"testing"

	"github.com/mementohq/memento/internal/testenv"
)

// TestMigrate: migrate brings a new database to the schema, says which, and
// a second run finds nothing to do, on both databases; a bad URL fails.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	re := regexp.MustCompile(`^(sqlite .*|postgres): schema at (\d{4}_\w+) \((\d+) migrations? applied\)\n$`)
	for _, args := range [][]string{{"--data", t.TempDir()}, {"--postgres", testenv.PostgresURL(t)}} {
		out, _, err := execute(t, ctx, append([]string{"migrate"}, args...)...)
		m := re.FindStringSubmatch(out)
		if err != nil || m == nil || m[3] == "0" {
			t.Fatalf("migrate %v: %v\n%s", args, err, out)
		}
		again, _, err := execute(t, ctx, append([]string{"migrate"}, args...)...)
		if err != nil || again != out {
			t.Fatalf("second migrate %v: %v\n%s, want\n%s", args, err, again, out)
		}
	}
	if _, _, err := execute(t, ctx, "migrate", "--postgres", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"); err == nil {
		t.Fatal("migrate against an unreachable database succeeded")
	}
}
