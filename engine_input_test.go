package memento_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/retrieval"
)

// TestLibraryRefusesWhatNoStoreKeeps: the memory and retrieval services
// refuse, as ErrInvalidInput, the input the HTTP API refuses before any
// store (a NUL character, invalid UTF-8, a lone surrogate escape), so that a
// Go caller gets the same answer on every backend. SQLite kept such claims
// and documents, and PostgreSQL answered its own encoding error.
func TestLibraryRefusesWhatNoStoreKeeps(t *testing.T) {
	ctx := context.Background()
	prov := memory.Provenance{SourceType: memory.SourceMessage, SourceID: "m-1", ValidatedBy: memory.ValidatedUserStated}
	claims := map[string]memory.AddInput{
		"a NUL escaped in the value":     {Value: json.RawMessage(`"a\u0000b"`)},
		"invalid UTF-8 in the value":     {Value: json.RawMessage("\"a\xffb\"")},
		"a lone surrogate in the value":  {Value: json.RawMessage(`{"k":"\ud800"}`)},
		"a NUL in the text":              {Value: json.RawMessage(`"ok"`), Text: "a\x00b"},
		"a NUL in the category":          {Value: json.RawMessage(`"ok"`), Category: "a\x00b"},
		"invalid UTF-8 in the category":  {Value: json.RawMessage(`"ok"`), Category: "a\xffb"},
		"a NUL in the consent basis":     {Value: json.RawMessage(`"ok"`), ConsentBasis: "opt-in\x00"},
		"invalid UTF-8 in consent basis": {Value: json.RawMessage(`"ok"`), ConsentBasis: "opt-in\xff"},
	}
	docs := map[string]retrieval.PutRequest{
		"a NUL in the content":        {Content: "a\x00b"},
		"a NUL in the source uri":     {Content: "ok", SourceURI: "kb://a\x00b"},
		"a NUL in the source version": {Content: "ok", SourceVersion: "v\x001"},
		"a NUL escaped in metadata":   {Content: "ok", Metadata: json.RawMessage(`{"k":"a\u0000b"}`)},
	}
	for _, backend := range []memento.Backend{memento.BackendSQLite, memento.BackendPostgres} {
		t.Run(string(backend), func(t *testing.T) {
			cfg := memento.Config{DataDir: t.TempDir(), PII: memento.PIIConfig{Key: testenv.PIIKey}}
			if backend == memento.BackendPostgres {
				cfg.PostgresURL = testenv.PostgresURL(t)
			}
			eng, err := memento.Open(ctx, cfg)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer eng.Close()
			tenant := testenv.RandomID("lib-")
			for name, in := range claims {
				in.SubjectID, in.Key, in.Provenance = "ann", "k", prov
				if _, err := eng.Memory.Add(ctx, tenant, in); !errors.Is(err, memory.ErrInvalidInput) {
					t.Errorf("claim with %s: %v, want ErrInvalidInput", name, err)
				}
			}
			if cs, _, err := eng.Memory.List(ctx, tenant, memory.Query{SubjectID: "ann"}); err != nil || len(cs) != 0 {
				t.Errorf("claims kept: %+v %v", cs, err)
			}
			for name, in := range docs {
				in.DocumentID, in.ACL = "doc", []string{"tenant"}
				if _, _, err := eng.Retrieval.Put(ctx, tenant, in); !errors.Is(err, retrieval.ErrInvalidInput) {
					t.Errorf("document with %s: %v, want ErrInvalidInput", name, err)
				}
			}
			if _, err := eng.Retrieval.Get(ctx, tenant, "doc"); !errors.Is(err, retrieval.ErrNotFound) {
				t.Errorf("a refused document was kept: %v", err)
			}
		})
	}
}
