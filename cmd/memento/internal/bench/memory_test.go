package bench

import (
	"context"
	"encoding/json"
	"math/rand"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mementohq/memento/llm/hashembed"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/memory/extract"
	"github.com/mementohq/memento/store/memstore"
)

// TestRunMemorySmoke runs the whole harness at a tiny size on every
// backend and checks the report's shape, not its speed.
func TestRunMemorySmoke(t *testing.T) {
	for _, backend := range []string{BackendMemstore, BackendSQLite, BackendPostgres} {
		t.Run(backend, func(t *testing.T) {
			url := ""
			if backend == BackendPostgres {
				url = testPostgresURL(t)
			}
			st, closeStore, err := OpenMemoryStore(t.Context(), backend, url)
			if err != nil {
				t.Fatal(err)
			}
			defer closeStore()
			rep, err := RunMemory(t.Context(), MemoryConfig{
				Backend: backend, Store: st, Embedder: hashembed.New(64), Extractor: extract.Rules{},
				Sizes: []int{120, 300}, Subjects: 40, OneSubject: 200, Queries: 5, AddSamples: 30, ExtractSamples: 8, Workers: 2,
			})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Ingest.AddClaims != 30 || rep.Ingest.AddPerSec <= 0 || rep.Ingest.InsertPerSec <= 0 || rep.Ingest.BulkClaims != 300-60+200 {
				t.Fatalf("ingest = %+v", rep.Ingest)
			}
			if rep.Extract.Calls != 8 || rep.Extract.P95MS <= 0 || rep.Extract.Outcomes["added"]+rep.Extract.Outcomes["superseded"]+rep.Extract.Outcomes["merged"] == 0 {
				t.Fatalf("extract = %+v", rep.Extract)
			}
			var layouts []string
			for _, s := range rep.Search {
				layouts = append(layouts, s.Layout+"/"+strconv.Itoa(s.Items))
				if s.P95MS <= 0 || s.TextP95MS <= 0 || s.Mode != memory.ModeHybrid {
					t.Fatalf("search figure %+v", s)
				}
			}
			if want := []string{"40-subjects/120", "one-subject/120", "40-subjects/300", "one-subject/200"}; !slices.Equal(layouts, want) {
				t.Fatalf("layouts = %v, want %v", layouts, want)
			}
			if rep.Search[1].FirstMS <= 0 {
				t.Fatalf("one-subject first search not timed: %+v", rep.Search[1])
			}
			if rep.Targets.SearchMet != nil {
				t.Fatalf("search target judged without a 100k figure: %+v", rep.Targets)
			}
			// Every item is in the store: the subject holds what was loaded.
			cs, err := st.List(t.Context(), memory.ListQuery{TenantID: "bench-one", SubjectID: "s0", Limit: 1000})
			if err != nil || len(cs) != 200 {
				t.Fatalf("one-subject tenant holds %d claims (%v), want 200", len(cs), err)
			}
		})
	}
}

// TestBulkInsertIsWhatAddWrites: the bulk loader's claim and vector row
// equal what Service.Add writes for the same input, but for the id and
// the times.
func TestBulkInsertIsWhatAddWrites(t *testing.T) {
	ctx := context.Background()
	st := memstore.New().Memory()
	emb := hashembed.New(32)
	svc := memory.NewService(st, memory.Options{Embedder: emb})
	r := rand.New(rand.NewSource(1))
	in := memInput(r, memZipf(r), "subj", 7)
	in.Value = json.RawMessage(" {\"a\": [1, 2],  \"b\": \"x\"} ")
	in.Category = " Preference "
	in.Provenance.MessageIDs = []string{"m1"}
	added, err := svc.Add(ctx, "t-add", in)
	if err != nil {
		t.Fatal(err)
	}
	p, err := BulkInsert(ctx, emb, "t-bulk", in, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	bulk, err := st.Insert(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	a, b := added.Claim, bulk
	for _, c := range []*memory.Claim{&a, &b} {
		c.MemoryID, c.TenantID = "", ""
		c.ValidFrom, c.CreatedAt, c.ConfirmedAt = time.Time{}, time.Time{}, time.Time{}
	}
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	if string(aj) != string(bj) {
		t.Fatalf("bulk claim differs from Add's:\nadd  %s\nbulk %s", aj, bj)
	}
	va, _, err := st.Vectors(ctx, "t-add", "subj", emb.Model(), 0)
	if err != nil {
		t.Fatal(err)
	}
	vb, _, err := st.Vectors(ctx, "t-bulk", "subj", emb.Model(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(va) != 1 || len(vb) != 1 || !slices.Equal(va[0].Values, vb[0].Values) || va[0].Namespace != vb[0].Namespace || (va[0].ExpiresAt == nil) != (vb[0].ExpiresAt == nil) {
		t.Fatalf("vector rows differ: add %+v, bulk %+v", va, vb)
	}
}
