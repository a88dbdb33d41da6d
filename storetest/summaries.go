package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mementohq/memento/compact"
)

// SummaryStoreSuite checks that a compact.Store honours the contract in
// compact/store.go. open is called once per subtest; subtests use random
// tenants, so a backend may share one database.
func SummaryStoreSuite(t *testing.T, open func(t *testing.T) compact.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s compact.Store)
	}{
		{"RoundTrip", testSummaryRoundTrip},
		{"DuplicateID", testSummaryDuplicateID},
		{"OneCurrentPerRangeStart", testSummaryOneCurrent},
		{"Supersede", testSummarySupersede},
		{"ListOrderAndPages", testSummaryList},
		{"MarkStale", testSummaryMarkStale},
		{"DeleteOwner", testSummaryDeleteOwner},
		{"Tenants", testSummaryTenants},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// fullSummary is a summary with every field set, so a round trip that
// drops one shows.
func fullSummary(tenant string, owner compact.Owner, from, to int64) compact.Summary {
	u := &compact.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150}
	return compact.Summary{
		SummaryID: uuid.Must(uuid.NewV7()).String(), TenantID: tenant, Owner: owner, Version: 1,
		Covers: compact.Range{FromSeq: from, ToSeq: to}, SourceDigest: "sha256:" + randHex(32),
		Compactor:     compact.Identity{Name: "llm", PromptVersion: "p1", Model: "gpt-4o-mini", SchemaVersion: 1},
		Facts:         []compact.Fact{{Text: "Alice asked for a refund of $120.50", SourceSeqs: []int64{from}}},
		OpenQuestions: []compact.Question{{Text: "Which card?", SourceSeqs: []int64{to}}},
		Decisions:     []compact.Decision{{Code: "refund.approved", Text: "approved by bob", SourceSeqs: []int64{from, to}}},
		Carried: compact.Carried{
			PendingToolCalls: []compact.ToolCall{{CallID: "call_1", ToolName: "refund", Arguments: `{"x":1}`, SourceSeqs: []int64{to}}},
			Approvals:        []compact.Approval{{ApprovalID: "ap-1", Status: "approved", SourceSeqs: []int64{to}}},
			Operations:       []compact.Operation{{OperationID: "op-1", Status: "succeeded", SourceSeqs: []int64{from}}},
			Amounts:          []compact.Amount{{Value: "120.50", Currency: "USD", Text: "$120.50", SourceSeqs: []int64{from}}},
			Negations:        []compact.Negation{{Cue: "no longer", Text: "I no longer want the blue one", SourceSeqs: []int64{to}}},
		},
		Text: "Alice asked for a refund — “$120.50” <ok> & done", Tokens: 12, Tokenizer: "o200k_base", TokensExact: true,
		Usage: u, Status: compact.StatusCurrent,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
	}
}

func mustPut(t *testing.T, s compact.Store, x compact.Summary) compact.Summary {
	t.Helper()
	if err := s.Put(t.Context(), x); err != nil {
		t.Fatalf("put summary %s %s: %v", x.SummaryID, x.Covers, err)
	}
	return x
}

func mustGet(t *testing.T, s compact.Store, tenant, id string) compact.Summary {
	t.Helper()
	x, err := s.Get(t.Context(), tenant, id)
	if err != nil {
		t.Fatalf("get summary %s: %v", id, err)
	}
	return x
}

func sameSummary(t *testing.T, got, want compact.Summary) {
	t.Helper()
	g, _ := json.Marshal(compact.Normalize(got))
	w, _ := json.Marshal(compact.Normalize(want))
	if string(g) != string(w) {
		t.Fatalf("summary differs:\n got %s\nwant %s", g, w)
	}
}

func testSummaryRoundTrip(t *testing.T, s compact.Store) {
	tenant := newTenant()
	x := mustPut(t, s, fullSummary(tenant, compact.RunOwner(newID("run")), 1, 9))
	sameSummary(t, mustGet(t, s, tenant, x.SummaryID), x)
	// A minimal one comes back with empty lists, not nulls.
	m := compact.Summary{SummaryID: uuid.Must(uuid.NewV7()).String(), TenantID: tenant, Owner: compact.SessionOwner("s-1", "u-1"),
		Version: 1, Covers: compact.Range{FromSeq: 3, ToSeq: 3}, SourceDigest: "sha256:x", Status: compact.StatusCurrent,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	mustPut(t, s, m)
	got := mustGet(t, s, tenant, m.SummaryID)
	if got.Facts == nil || got.Carried.Amounts == nil || got.Carried.Negations == nil {
		t.Fatalf("lists of a minimal summary came back nil: %+v", got)
	}
	if got.Owner.UserID != "u-1" {
		t.Fatalf("session owner's user lost: %+v", got.Owner)
	}
	sameSummary(t, got, m)
}

func testSummaryDuplicateID(t *testing.T, s compact.Store) {
	tenant := newTenant()
	x := mustPut(t, s, fullSummary(tenant, compact.RunOwner(newID("run")), 1, 4))
	y := x
	y.Covers = compact.Range{FromSeq: 5, ToSeq: 6}
	y.Text = "another"
	if err := s.Put(t.Context(), y); !errors.Is(err, compact.ErrAlreadyExists) {
		t.Fatalf("put of a taken id: %v, want ErrAlreadyExists", err)
	}
	sameSummary(t, mustGet(t, s, tenant, x.SummaryID), x)
}

func testSummaryOneCurrent(t *testing.T, s compact.Store) {
	tenant := newTenant()
	owner := compact.RunOwner(newID("run"))
	a := mustPut(t, s, fullSummary(tenant, owner, 1, 4))
	b := fullSummary(tenant, owner, 1, 6)
	if err := s.Put(t.Context(), b); !errors.Is(err, compact.ErrAlreadyExists) {
		t.Fatalf("a second current summary starting at 1: %v, want ErrAlreadyExists", err)
	}
	if _, err := s.Get(t.Context(), tenant, b.SummaryID); !errors.Is(err, compact.ErrNotFound) {
		t.Fatalf("refused put left a row: %v", err)
	}
	// A stale one beside it is allowed, and so is a current one of another owner.
	st := fullSummary(tenant, owner, 1, 4)
	st.Status, st.StaleReason = compact.StatusStale, "digest mismatch"
	at := time.Now().UTC().Truncate(time.Microsecond)
	st.StaleAt = &at
	sameSummary(t, mustGet(t, s, tenant, mustPut(t, s, st).SummaryID), st)
	mustPut(t, s, fullSummary(tenant, compact.RunOwner(newID("run")), 1, 4))
	mustPut(t, s, fullSummary(tenant, compact.SessionOwner(owner.ID, "u"), 1, 4))
	if got := mustGet(t, s, tenant, a.SummaryID); got.Status != compact.StatusCurrent {
		t.Fatalf("first summary is %s", got.Status)
	}
}

func testSummarySupersede(t *testing.T, s compact.Store) {
	tenant := newTenant()
	owner := compact.RunOwner(newID("run"))
	v1 := mustPut(t, s, fullSummary(tenant, owner, 1, 4))
	v2 := fullSummary(tenant, owner, 1, 4)
	v2.Version, v2.Supersedes = 2, v1.SummaryID
	mustPut(t, s, v2)
	if got := mustGet(t, s, tenant, v1.SummaryID); got.Status != compact.StatusSuperseded {
		t.Fatalf("v1 is %s after v2 superseded it", got.Status)
	}
	sameSummary(t, mustGet(t, s, tenant, v2.SummaryID), v2)
	// A refused put (taken id) leaves the one it names as it was.
	v3 := v2
	v3.Version, v3.Supersedes = 3, v2.SummaryID
	if err := s.Put(t.Context(), v3); !errors.Is(err, compact.ErrAlreadyExists) {
		t.Fatalf("put of a taken id: %v", err)
	}
	if got := mustGet(t, s, tenant, v2.SummaryID); got.Status != compact.StatusCurrent {
		t.Fatalf("a refused put superseded v2 anyway: %s", got.Status)
	}
	// Superseding a stale summary is how a stale range is replaced.
	st, err := s.MarkStale(t.Context(), tenant, v2.SummaryID, "tampered", time.Now())
	if err != nil || st.Status != compact.StatusStale {
		t.Fatalf("mark stale: %v %s", err, st.Status)
	}
	v4 := fullSummary(tenant, owner, 1, 4)
	v4.Version, v4.Supersedes = 3, v2.SummaryID
	mustPut(t, s, v4)
	if got := mustGet(t, s, tenant, v2.SummaryID); got.Status != compact.StatusSuperseded {
		t.Fatalf("stale v2 is %s after v4 superseded it", got.Status)
	}
}

func testSummaryList(t *testing.T, s compact.Store) {
	tenant := newTenant()
	owner := compact.RunOwner(newID("run"))
	var want []string
	// Put out of order: the store orders by range start, then id.
	ranges := []compact.Range{{FromSeq: 11, ToSeq: 15}, {FromSeq: 1, ToSeq: 5}, {FromSeq: 6, ToSeq: 10}, {FromSeq: 16, ToSeq: 16}}
	byFrom := map[int64][]string{}
	for _, rg := range ranges {
		x := mustPut(t, s, fullSummary(tenant, owner, rg.FromSeq, rg.ToSeq))
		byFrom[rg.FromSeq] = append(byFrom[rg.FromSeq], x.SummaryID)
		if rg.FromSeq == 6 { // a second version of [6, 10]
			y := fullSummary(tenant, owner, 6, 10)
			y.Version, y.Supersedes = 2, x.SummaryID
			mustPut(t, s, y)
			byFrom[6] = append(byFrom[6], y.SummaryID)
		}
	}
	froms := []int64{1, 6, 11, 16}
	for _, f := range froms {
		ids := byFrom[f]
		slices.Sort(ids)
		want = append(want, ids...)
	}
	// Noise of another owner and another tenant.
	mustPut(t, s, fullSummary(tenant, compact.RunOwner(newID("run")), 1, 2))
	mustPut(t, s, fullSummary(tenant, compact.SessionOwner(owner.ID, "u"), 1, 2))
	mustPut(t, s, fullSummary(newTenant(), owner, 1, 2))
	var got []string
	q := compact.ListQuery{Limit: 2}
	for i := 0; ; i++ {
		if i > 10 {
			t.Fatal("list pages do not end")
		}
		page, err := s.List(t.Context(), tenant, owner, q)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, x := range page {
			got = append(got, x.SummaryID)
		}
		if len(page) < q.Limit {
			break
		}
		last := page[len(page)-1]
		q.AfterFromSeq, q.AfterID = last.Covers.FromSeq, last.SummaryID
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("list order:\n got %v\nwant %v", got, want)
	}
	cur, err := s.List(t.Context(), tenant, owner, compact.ListQuery{Status: compact.StatusCurrent})
	if err != nil {
		t.Fatal(err)
	}
	if len(cur) != 4 {
		t.Fatalf("current summaries: %d, want 4 (one of [6,10] is superseded)", len(cur))
	}
	for _, x := range cur {
		if x.Status != compact.StatusCurrent {
			t.Fatalf("status filter let %s through", x.Status)
		}
	}
	sup, err := s.List(t.Context(), tenant, owner, compact.ListQuery{Status: compact.StatusSuperseded})
	if err != nil || len(sup) != 1 || sup[0].SummaryID != byFrom[6][0] {
		t.Fatalf("superseded: %v %d", err, len(sup))
	}
	// Default limit applies to <= 0.
	all, err := s.List(t.Context(), tenant, owner, compact.ListQuery{})
	if err != nil || len(all) != len(want) {
		t.Fatalf("list with limit 0: %v %d", err, len(all))
	}
}

func testSummaryMarkStale(t *testing.T, s compact.Store) {
	tenant := newTenant()
	owner := compact.RunOwner(newID("run"))
	x := mustPut(t, s, fullSummary(tenant, owner, 1, 4))
	at := time.Now().Add(-time.Minute).UTC()
	got, err := s.MarkStale(t.Context(), tenant, x.SummaryID, "source digest mismatch", at)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != compact.StatusStale || got.StaleReason != "source digest mismatch" || got.StaleAt == nil || !got.StaleAt.Equal(at.Truncate(time.Microsecond)) {
		t.Fatalf("after MarkStale: %s %q %v", got.Status, got.StaleReason, got.StaleAt)
	}
	sameSummary(t, mustGet(t, s, tenant, x.SummaryID), got)
	// Everything else is kept.
	want := x
	want.Status, want.StaleReason, want.StaleAt = got.Status, got.StaleReason, got.StaleAt
	sameSummary(t, got, want)
	// A superseded one stays superseded.
	y := fullSummary(tenant, owner, 5, 6)
	mustPut(t, s, y)
	z := fullSummary(tenant, owner, 5, 6)
	z.Version, z.Supersedes = 2, y.SummaryID
	mustPut(t, s, z)
	if got, err := s.MarkStale(t.Context(), tenant, y.SummaryID, "late", time.Now()); err != nil || got.Status != compact.StatusSuperseded || got.StaleReason != "" {
		t.Fatalf("mark stale of a superseded summary: %v %s %q", err, got.Status, got.StaleReason)
	}
	if _, err := s.MarkStale(t.Context(), tenant, "nope", "x", time.Now()); !errors.Is(err, compact.ErrNotFound) {
		t.Fatalf("mark stale of an unknown id: %v", err)
	}
}

func testSummaryDeleteOwner(t *testing.T, s compact.Store) {
	tenant := newTenant()
	owner := compact.RunOwner(newID("run"))
	for i := int64(0); i < 3; i++ {
		mustPut(t, s, fullSummary(tenant, owner, 1+5*i, 5+5*i))
	}
	other := mustPut(t, s, fullSummary(tenant, compact.RunOwner(newID("run")), 1, 2))
	sess := mustPut(t, s, fullSummary(tenant, compact.SessionOwner(owner.ID, "u"), 1, 2))
	n, err := s.DeleteOwner(t.Context(), tenant, owner)
	if err != nil || n != 3 {
		t.Fatalf("delete owner: %d %v, want 3", n, err)
	}
	if left, _ := s.List(t.Context(), tenant, owner, compact.ListQuery{}); len(left) != 0 {
		t.Fatalf("%d summaries left", len(left))
	}
	mustGet(t, s, tenant, other.SummaryID)
	mustGet(t, s, tenant, sess.SummaryID)
	if n, err := s.DeleteOwner(t.Context(), tenant, owner); err != nil || n != 0 {
		t.Fatalf("second delete: %d %v", n, err)
	}
}

func testSummaryTenants(t *testing.T, s compact.Store) {
	a, b := newTenant(), newTenant()
	owner := compact.RunOwner(newID("run"))
	x := mustPut(t, s, fullSummary(a, owner, 1, 4))
	if _, err := s.Get(t.Context(), b, x.SummaryID); !errors.Is(err, compact.ErrNotFound) {
		t.Fatalf("get from another tenant: %v", err)
	}
	if l, err := s.List(t.Context(), b, owner, compact.ListQuery{}); err != nil || len(l) != 0 {
		t.Fatalf("list from another tenant: %v %d", err, len(l))
	}
	if _, err := s.MarkStale(t.Context(), b, x.SummaryID, "x", time.Now()); !errors.Is(err, compact.ErrNotFound) {
		t.Fatalf("mark stale from another tenant: %v", err)
	}
	if n, err := s.DeleteOwner(t.Context(), b, owner); err != nil || n != 0 {
		t.Fatalf("delete from another tenant: %d %v", n, err)
	}
	// The same id in another tenant is another summary.
	y := fullSummary(b, owner, 1, 4)
	y.SummaryID = x.SummaryID
	mustPut(t, s, y)
	if got := mustGet(t, s, a, x.SummaryID); got.Status != compact.StatusCurrent || got.TenantID != a {
		t.Fatalf("tenant a's summary changed: %+v", got)
	}
}
