package sqlite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/store/sqlite"
	"github.com/mementohq/memento/storetest"
)

func TestMemoryStoreSuite(t *testing.T) {
	db := openTemp(t) // subtests use random tenants: one file serves them all
	storetest.MemoryStoreSuite(t, func(t *testing.T) memory.Store { return db })
}

// TestForgetLeavesNoBytesOnDisk: after a forget, the claim's text is in
// neither the database file nor its WAL, not only gone from every query.
func TestForgetLeavesNoBytesOnDisk(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memento.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	svc := memory.NewService(db, memory.Options{})
	marker := "a cat named Zorrokwxq"
	prov := memory.Provenance{SourceType: "message", SourceID: "m1", ValidatedBy: "user_stated"}
	for _, k := range []string{"pets.cat", "pets.cat.name"} {
		v, _ := json.Marshal(marker)
		if _, err := svc.Add(ctx, "t1", memory.AddInput{SubjectID: "fz", Key: k, Value: v, Provenance: prov}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Add(ctx, "t1", memory.AddInput{SubjectID: "other", Key: "pets.dog", Value: json.RawMessage(`"Rex the dog"`), Provenance: prov}); err != nil {
		t.Fatal(err)
	}
	if rec, err := svc.Forget(ctx, "t1", "fz", "", "asked"); err != nil || rec.Claims != 2 {
		t.Fatalf("forget: %+v, %v", rec, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(path + "*")
	kept := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("Zorrokwxq")) {
			t.Errorf("%s still holds the forgotten text", filepath.Base(f))
		}
		kept = kept || bytes.Contains(b, []byte("Rex the dog"))
	}
	if !kept {
		t.Fatal("the other subject's claim is not on disk either: the check proves nothing")
	}
}
