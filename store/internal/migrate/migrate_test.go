package migrate

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"
)

// memTx records what Apply asked of it.
type memTx struct {
	applied  []string
	executed []string
	failOn   string
}

func (t *memTx) Prepare(context.Context) error             { return nil }
func (t *memTx) Applied(context.Context) ([]string, error) { return t.applied, nil }
func (t *memTx) Exec(_ context.Context, sql string) error {
	if sql == t.failOn {
		return errors.New("boom")
	}
	t.executed = append(t.executed, sql)
	return nil
}
func (t *memTx) Record(_ context.Context, v string) error {
	t.applied = append(t.applied, v)
	return nil
}

func TestLoadOrdersAndApplyRunsEachOnce(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_b.sql":   {Data: []byte("B")},
		"m/0001_a.sql":   {Data: []byte("A")},
		"m/0003_c.sql":   {Data: []byte("C")},
		"m/README.txt":   {Data: []byte("not a migration")},
		"other/0009.sql": {Data: []byte("elsewhere")},
	}
	migs, err := Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(migs) != 3 || migs[0].Version != "0001_a" || migs[2].Version != "0003_c" {
		t.Fatalf("Load = %+v", migs)
	}
	tx := &memTx{applied: []string{"0002_b"}}
	if err := Apply(context.Background(), tx, migs); err != nil {
		t.Fatal(err)
	}
	if got := tx.executed; len(got) != 2 || got[0] != "A" || got[1] != "C" {
		t.Fatalf("executed %v, want [A C]", got)
	}
	// A second pass applies nothing.
	tx.executed = nil
	if err := Apply(context.Background(), tx, migs); err != nil || len(tx.executed) != 0 {
		t.Fatalf("second Apply: %v, executed %v", err, tx.executed)
	}
}

func TestApplyStopsAtAFailure(t *testing.T) {
	migs := []Migration{{"0001_a", "A"}, {"0002_b", "B"}, {"0003_c", "C"}}
	tx := &memTx{failOn: "B"}
	err := Apply(context.Background(), tx, migs)
	if err == nil || len(tx.executed) != 1 {
		t.Fatalf("Apply = %v, executed %v; want a failure after A", err, tx.executed)
	}
}
