package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/llm/hashembed"
	"github.com/mementohq/memento/retrieval"
)

// RetrievalStoreSuite checks a retrieval.Store through the retrieval
// service (hybrid: the offline embedder is on): provenance, versions and
// snapshots, ACL and groups, tenant isolation, deletion down to the last
// projection row, invalidation events, TTL, snapshot retention, and an ACL
// leak probe over random principals, documents and queries.
//
// Every test runs twice: with the Service's in-process index (full text
// and vectors ranked in process, the default) and with none (full text
// ranked in the store by SearchText).
func RetrievalStoreSuite(t *testing.T, open func(t *testing.T) retrieval.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s retrieval.Store, m retMode)
	}{
		{"PutRetrieveProvenance", testRetProvenance},
		{"NewVersionKeepsSnapshot", testRetNewVersion},
		{"GroupsCutAccessAtOnce", testRetGroups},
		{"ACLChange", testRetACLChange},
		{"TenantIsolation", testRetTenants},
		{"DeleteRemovesEveryRow", testRetDelete},
		{"TTL", testRetTTL},
		{"SnapshotRetention", testRetRetention},
		{"SnapshotRetentionBacklog", testRetRetentionBacklog},
		{"ConcurrentPuts", testRetConcurrentPuts},
		{"ACLLeakProbe", testRetLeakProbe},
		{"TwoInstances", testRetTwoInstances},
		{"RetrieveWhileWriting", testRetRetrieveWhileWriting},
	}
	for _, m := range []retMode{{"InProcessIndex", 0}, {"StoreRanking", -1}} {
		t.Run(m.name, func(t *testing.T) {
			for _, tc := range tests {
				if tc.name == "ACLLeakProbe" && m.indexTenants < 0 {
					// Its every probe asks the store's full text (what this
					// mode ranks by) directly: once, in the other mode, covers it.
					continue
				}
				t.Run(tc.name, func(t *testing.T) {
					tc.fn(t, open(t), m)
				})
			}
		})
	}
}

// retMode is how the Service under test ranks: Options.IndexTenants.
type retMode struct {
	name         string
	indexTenants int
}

// rfx is a service over the store for one fresh tenant with a clock the
// test moves.
type rfx struct {
	t      *testing.T
	s      retrieval.Store
	svc    *retrieval.Service
	tenant string
	mu     sync.Mutex
	now    time.Time
}

func newRfx(t *testing.T, s retrieval.Store, m retMode, o retrieval.Options) *rfx {
	f := &rfx{t: t, s: s, tenant: newTenant(), now: time.Now().UTC().Truncate(time.Microsecond)}
	o.IndexTenants = m.indexTenants
	o.Embedder = hashembed.New(0)
	o.Now = func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
	f.svc = retrieval.NewService(s, o)
	return f
}

func (f *rfx) advance(d time.Duration) { f.mu.Lock(); f.now = f.now.Add(d); f.mu.Unlock() }

func (f *rfx) put(id, content string, acl ...string) (retrieval.Document, bool) {
	f.t.Helper()
	d, created, err := f.svc.Put(f.t.Context(), f.tenant, retrieval.PutRequest{DocumentID: id, SourceURI: "https://wiki.example/" + id,
		SourceVersion: retrieval.Digest(content)[7:19], Content: content, ACL: acl, Metadata: json.RawMessage(`{"space":"kb"}`)})
	if err != nil {
		f.t.Fatalf("put %s: %v", id, err)
	}
	return d, created
}

func (f *rfx) retrieve(principal, query string, k int) retrieval.Snapshot {
	f.t.Helper()
	s, err := f.svc.Retrieve(f.t.Context(), f.tenant, retrieval.RetrieveRequest{Query: query, Principal: principal, K: k})
	if err != nil {
		f.t.Fatalf("retrieve %q as %s: %v", query, principal, err)
	}
	return s
}

func (f *rfx) member(group, principal string, in bool) {
	f.t.Helper()
	if _, err := f.svc.SetMember(f.t.Context(), f.tenant, group, principal, in); err != nil {
		f.t.Fatalf("set member %s %s %v: %v", group, principal, in, err)
	}
}

func docIDs(s retrieval.Snapshot) map[string]bool {
	out := map[string]bool{}
	for _, h := range s.Hits {
		out[h.DocumentID] = true
	}
	return out
}

func (f *rfx) invalidations() []retrieval.Invalidation {
	f.t.Helper()
	evs, err := f.svc.Invalidations(f.t.Context(), f.tenant, 0, 1000)
	if err != nil {
		f.t.Fatalf("invalidations: %v", err)
	}
	return evs
}

// longText is n sentences, enough for several chunks.
func longText(topic string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "Paragraph %d about %s: the refund policy allows returns within thirty days of delivery. ", i, topic)
	}
	return b.String()
}

func testRetProvenance(t *testing.T, s retrieval.Store, m retMode) {
	f := newRfx(t, s, m, retrieval.Options{})
	d, created := f.put("policy", longText("refunds", 40), "tenant")
	if !created || d.Version != 1 || d.Chunks < 3 {
		t.Fatalf("put: created %v version %d chunks %d, want a new version 1 of 3+ chunks", created, d.Version, d.Chunks)
	}
	snap := f.retrieve("user:alice", "refund policy returns", 5)
	if len(snap.Hits) == 0 || snap.SnapshotID == "" || snap.QueryDigest == "" || snap.IndexVersion < 1 || snap.Principal != "user:alice" {
		t.Fatalf("snapshot %+v", snap)
	}
	for _, h := range snap.Hits {
		if h.DocumentID != "policy" || h.SourceURI != "https://wiki.example/policy" || h.SourceVersion != d.SourceVersion ||
			!strings.HasPrefix(h.ChunkID, "policy:p1:c") || h.ContentDigest != retrieval.Digest(h.Text) || h.RetrievedAt.IsZero() ||
			h.Score <= 0 || !strings.Contains(d.Content, h.Text) {
			t.Fatalf("hit without its provenance: %+v", h)
		}
	}
	// The same document again is no new version; it only refreshes.
	again, created := f.put("policy", d.Content, "tenant")
	if created || again.Version != 1 {
		t.Fatalf("identical put: created %v version %d, want version 1 kept", created, again.Version)
	}
	got, err := f.svc.Get(t.Context(), f.tenant, "policy")
	if err != nil || got.Content != d.Content || !reflect.DeepEqual(got.ACL, []string{"tenant"}) || string(got.Metadata) != `{"space":"kb"}` {
		t.Fatalf("get: %+v %v", got, err)
	}
	if evs := f.invalidations(); len(evs) != 0 {
		t.Fatalf("invalidations after an unchanged put: %+v", evs)
	}
}

func testRetNewVersion(t *testing.T, s retrieval.Store, m retMode) {
	f := newRfx(t, s, m, retrieval.Options{})
	f.put("faq", "Shipping takes five days to Europe and ten days to Asia.", "tenant")
	before := f.retrieve("user:bob", "shipping days Europe", 5)
	if len(before.Hits) != 1 || before.Hits[0].ChunkID != "faq:p1:c0" {
		t.Fatalf("before: %+v", before.Hits)
	}
	stored, err := f.svc.Snapshot(t.Context(), f.tenant, before.SnapshotID)
	if err != nil {
		t.Fatalf("get snapshot: %v", err)
	}
	f.advance(time.Second)
	d, created := f.put("faq", "Shipping now takes two days to Europe by air freight.", "tenant")
	if created || d.Version != 2 {
		t.Fatalf("new version: created %v version %d", created, d.Version)
	}
	after := f.retrieve("user:bob", "shipping days Europe", 5)
	if len(after.Hits) != 1 || after.Hits[0].ChunkID != "faq:p2:c0" || !strings.Contains(after.Hits[0].Text, "two days") {
		t.Fatalf("after: new retrievals must see only the new version: %+v", after.Hits)
	}
	if after.IndexVersion <= before.IndexVersion {
		t.Fatalf("index version %d did not move past %d", after.IndexVersion, before.IndexVersion)
	}
	again, err := f.svc.Snapshot(t.Context(), f.tenant, before.SnapshotID)
	if err != nil {
		t.Fatalf("get old snapshot: %v", err)
	}
	if !reflect.DeepEqual(again, stored) || !reflect.DeepEqual(again.Hits, before.Hits) {
		t.Fatalf("the old snapshot changed:\n%+v\nwant\n%+v", again, before)
	}
	evs := f.invalidations()
	if len(evs) != 1 || evs[0].Kind != retrieval.DocumentReplaced || evs[0].DocumentID != "faq" || evs[0].OldVersion != 1 ||
		evs[0].NewVersion != 2 || evs[0].RowsRemoved == 0 {
		t.Fatalf("invalidations: %+v", evs)
	}
	if n, err := s.ProjectionRows(t.Context(), f.tenant, "faq"); err != nil || n == 0 {
		t.Fatalf("projection rows of the live version: %d %v", n, err)
	}
	if _, err := f.svc.Snapshot(t.Context(), f.tenant, "snap_nope"); !errors.Is(err, retrieval.ErrNotFound) {
		t.Fatalf("missing snapshot: %v", err)
	}
}

func testRetGroups(t *testing.T, s retrieval.Store, m retMode) {
	f := newRfx(t, s, m, retrieval.Options{})
	f.put("runbook", "Escalation runbook: page the on-call engineer for outages.", "group:support")
	f.put("memo", "Salary bands memo for the outages team.", "user:carol")
	f.member("support", "user:alice", true)
	if got := docIDs(f.retrieve("user:alice", "outages", 10)); !got["runbook"] || got["memo"] {
		t.Fatalf("alice in support sees %v, want runbook only", got)
	}
	if got := f.retrieve("user:bob", "outages", 10); len(got.Hits) != 0 {
		t.Fatalf("bob, in no group, sees %+v", got.Hits)
	}
	f.member("support", "user:alice", false)
	if got := f.retrieve("user:alice", "outages runbook", 10); len(got.Hits) != 0 {
		t.Fatalf("alice removed from support still sees %+v", got.Hits)
	}
	if got := docIDs(f.retrieve("user:carol", "outages memo", 10)); !got["memo"] || got["runbook"] {
		t.Fatalf("carol sees %v, want memo only", got)
	}
	evs := f.invalidations()
	if len(evs) != 2 || evs[0].Kind != retrieval.MembershipChanged || evs[0].Change != "added" || evs[1].Change != "removed" ||
		evs[1].Group != "support" || evs[1].Principal != "user:alice" || evs[1].IndexVersion <= evs[0].IndexVersion {
		t.Fatalf("membership invalidations: %+v", evs)
	}
	// Removing again changes nothing and records nothing.
	if ok, err := f.svc.SetMember(t.Context(), f.tenant, "support", "user:alice", false); err != nil || ok {
		t.Fatalf("second removal: %v %v", ok, err)
	}
	if _, err := f.svc.SetMember(t.Context(), f.tenant, "support", "group:x", true); !errors.Is(err, retrieval.ErrInvalidInput) {
		t.Fatalf("a group as a member: %v", err)
	}
}

func testRetACLChange(t *testing.T, s retrieval.Store, m retMode) {
	f := newRfx(t, s, m, retrieval.Options{})
	f.put("plan", "Quarterly roadmap plan with launch dates.", "user:dana", "user:erin")
	if got := f.retrieve("user:erin", "roadmap launch", 5); len(got.Hits) != 1 {
		t.Fatalf("erin before: %+v", got.Hits)
	}
	d, _ := f.put("plan", "Quarterly roadmap plan with launch dates.", "user:dana")
	if d.Version != 2 {
		t.Fatalf("acl change version %d, want 2", d.Version)
	}
	if got := f.retrieve("user:erin", "roadmap launch", 5); len(got.Hits) != 0 {
		t.Fatalf("erin after losing access: %+v", got.Hits)
	}
	if got := f.retrieve("user:dana", "roadmap launch", 5); len(got.Hits) != 1 || got.Hits[0].ChunkID != "plan:p2:c0" {
		t.Fatalf("dana after: %+v", got.Hits)
	}
	evs := f.invalidations()
	if len(evs) != 1 || evs[0].Kind != retrieval.ACLChanged || evs[0].RowsRemoved == 0 {
		t.Fatalf("acl invalidation: %+v", evs)
	}
}

func testRetTenants(t *testing.T, s retrieval.Store, m retMode) {
	a := newRfx(t, s, m, retrieval.Options{})
	b := newRfx(t, s, m, retrieval.Options{})
	a.put("doc", "Tenant A secret: the vault code is orange.", "tenant")
	b.put("doc", "Tenant B note about apples.", "tenant")
	b.member("staff", "user:x", true)
	for _, h := range b.retrieve("user:x", "vault code orange secret apples", 10).Hits {
		if strings.Contains(h.Text, "orange") {
			t.Fatalf("tenant B sees A's text: %+v", h)
		}
	}
	if got := a.retrieve("user:x", "vault orange", 10); len(got.Hits) != 1 || !strings.Contains(got.Hits[0].Text, "orange") {
		t.Fatalf("tenant A: %+v", got.Hits)
	}
	if gs, err := a.svc.Groups(t.Context(), a.tenant, "user:x"); err != nil || len(gs) != 0 {
		t.Fatalf("B's membership shows in A: %v %v", gs, err)
	}
	snap := a.retrieve("user:x", "vault", 5)
	if _, err := b.svc.Snapshot(t.Context(), b.tenant, snap.SnapshotID); !errors.Is(err, retrieval.ErrNotFound) {
		t.Fatalf("B reads A's snapshot: %v", err)
	}
	if _, err := b.svc.Delete(t.Context(), b.tenant, "doc"); err != nil {
		t.Fatalf("delete B's doc: %v", err)
	}
	if n, err := s.ProjectionRows(t.Context(), a.tenant, "doc"); err != nil || n == 0 {
		t.Fatalf("B's delete touched A: %d rows, %v", n, err)
	}
	if evs := a.invalidations(); len(evs) != 0 {
		t.Fatalf("B's events show in A: %+v", evs)
	}
}

func testRetDelete(t *testing.T, s retrieval.Store, m retMode) {
	f := newRfx(t, s, m, retrieval.Options{})
	f.put("gone", longText("deletion", 30), "tenant", "group:ops")
	f.put("gone", longText("deletion v2", 30), "tenant")
	if n, err := s.ProjectionRows(t.Context(), f.tenant, "gone"); err != nil || n == 0 {
		t.Fatalf("rows before delete: %d %v", n, err)
	}
	old := f.retrieve("user:z", "deletion refund", 3)
	ev, err := f.svc.Delete(t.Context(), f.tenant, "gone")
	if err != nil || ev.Kind != retrieval.DocumentDeleted || ev.RowsRemoved == 0 || ev.OldVersion != 2 {
		t.Fatalf("delete: %+v %v", ev, err)
	}
	if n, err := s.ProjectionRows(t.Context(), f.tenant, "gone"); err != nil || n != 0 {
		t.Fatalf("%d projection rows left after delete (%v)", n, err)
	}
	if got := f.retrieve("user:z", "deletion refund", 10); len(got.Hits) != 0 {
		t.Fatalf("deleted document still served: %+v", got.Hits)
	}
	if _, err := f.svc.Get(t.Context(), f.tenant, "gone"); !errors.Is(err, retrieval.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if _, err := f.svc.Delete(t.Context(), f.tenant, "gone"); !errors.Is(err, retrieval.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if again, err := f.svc.Snapshot(t.Context(), f.tenant, old.SnapshotID); err != nil || !reflect.DeepEqual(again.Hits, old.Hits) {
		t.Fatalf("snapshot taken before the delete: %v", err)
	}
	if evs := f.invalidations(); len(evs) != 2 || evs[1].Kind != retrieval.DocumentDeleted {
		t.Fatalf("invalidations: %+v", evs)
	}
	// Put again under its id, it goes on from the deleted version: the old
	// snapshot's chunk ids name the old texts only.
	d, created := f.put("gone", longText("a new document", 30), "tenant")
	if !created || d.Version != 3 {
		t.Fatalf("put again after delete: created %v, version %d, want 3", created, d.Version)
	}
	fresh := f.retrieve("user:z", "new document", 10)
	for _, h := range fresh.Hits {
		for _, o := range old.Hits {
			if h.ChunkID == o.ChunkID {
				t.Fatalf("chunk id %s names a deleted text and a new one", h.ChunkID)
			}
		}
	}
	if v, err := s.DeletedVersion(t.Context(), f.tenant, "never"); err != nil || v != 0 {
		t.Fatalf("deleted version of a document never deleted: %d %v", v, err)
	}
}

func testRetTTL(t *testing.T, s retrieval.Store, m retMode) {
	f := newRfx(t, s, m, retrieval.Options{TTL: time.Hour})
	f.put("stale", "Office hours are nine to five.", "tenant")
	if got := f.retrieve("user:a", "office hours", 5); len(got.Hits) != 1 {
		t.Fatalf("fresh: %+v", got.Hits)
	}
	f.advance(2 * time.Hour)
	if got := f.retrieve("user:a", "office hours", 5); len(got.Hits) != 0 {
		t.Fatalf("older than the TTL still served: %+v", got.Hits)
	}
	d, created := f.put("stale", "Office hours are nine to five.", "tenant") // the source confirms it: a refresh
	if created || d.Version != 1 {
		t.Fatalf("refresh: %v %d", created, d.Version)
	}
	if got := f.retrieve("user:a", "office hours", 5); len(got.Hits) != 1 {
		t.Fatalf("refreshed: %+v", got.Hits)
	}
	// Expired documents that outrank the only fresh one, more of them
	// than one ranking's candidates: the fresh one is still found.
	for i := range 80 {
		f.put(fmt.Sprintf("old%d", i), fmt.Sprintf("Office hours, office hours, office hours: notice %d.", i), "tenant")
	}
	f.advance(2 * time.Hour)
	f.put("fresh", "The desk keeps office hours in the new building, where the lobby has a map of every floor.", "tenant")
	if got := f.retrieve("user:a", "office hours", 1); len(got.Hits) != 1 || got.Hits[0].DocumentID != "fresh" {
		t.Fatalf("behind 80 expired documents: %+v", got.Hits)
	}
}

func testRetRetention(t *testing.T, s retrieval.Store, m retMode) {
	f := newRfx(t, s, m, retrieval.Options{SnapshotRetention: time.Hour})
	f.put("r", "Retention keeps snapshots for a while.", "tenant")
	old := f.retrieve("user:a", "retention snapshots", 5)
	// Another tenant's snapshot of the same age.
	other := newTenant()
	if _, _, err := f.svc.Put(t.Context(), other, retrieval.PutRequest{DocumentID: "r", Content: "Retention keeps snapshots for a while.", ACL: []string{"tenant"}}); err != nil {
		t.Fatal(err)
	}
	otherOld, err := f.svc.Retrieve(t.Context(), other, retrieval.RetrieveRequest{Query: "retention snapshots", Principal: "user:a", K: 5})
	if err != nil {
		t.Fatal(err)
	}
	f.advance(2 * time.Hour)
	young := f.retrieve("user:a", "retention snapshots", 5)
	n, err := f.svc.PurgeSnapshots(t.Context(), f.tenant)
	if err != nil || n != 1 {
		t.Fatalf("purge: %d %v, want 1", n, err)
	}
	if _, err := f.svc.Snapshot(t.Context(), f.tenant, old.SnapshotID); !errors.Is(err, retrieval.ErrNotFound) {
		t.Fatalf("purged snapshot: %v", err)
	}
	if got, err := f.svc.Snapshot(t.Context(), f.tenant, young.SnapshotID); err != nil || got.Hits[0].Text != young.Hits[0].Text {
		t.Fatalf("kept snapshot lost its text: %+v %v", got, err)
	}
	// A tenant's purge left the other tenant's; a purge of every tenant ("")
	// takes it, and still keeps the young one.
	if _, err := f.svc.Snapshot(t.Context(), other, otherOld.SnapshotID); err != nil {
		t.Fatalf("a tenant's purge took another tenant's snapshot: %v", err)
	}
	if n, err := f.svc.PurgeSnapshots(t.Context(), ""); err != nil || n < 1 {
		t.Fatalf("purge of every tenant: %d %v", n, err)
	}
	if _, err := f.svc.Snapshot(t.Context(), other, otherOld.SnapshotID); !errors.Is(err, retrieval.ErrNotFound) {
		t.Fatalf("purge of every tenant kept an old snapshot: %v", err)
	}
	if got, err := f.svc.Snapshot(t.Context(), f.tenant, young.SnapshotID); err != nil || got.Hits[0].Text != young.Hits[0].Text {
		t.Fatalf("purge of every tenant took a young snapshot or its text: %+v %v", got, err)
	}
}

// testRetRetentionBacklog: a backlog larger than a store's purge batch
// goes whole, with the texts only it named; a young snapshot sharing a text
// keeps it.
func testRetRetentionBacklog(t *testing.T, s retrieval.Store, _ retMode) {
	ctx := t.Context()
	tenant := newTenant()
	now := time.Now().UTC().Truncate(time.Microsecond)
	snap := func(id string, at time.Time, texts ...string) retrieval.Snapshot {
		sn := retrieval.Snapshot{TenantID: tenant, SnapshotID: id, QueryDigest: "q", Principal: "user:a", K: 5, CreatedAt: at}
		for i, x := range texts {
			sn.Hits = append(sn.Hits, retrieval.Hit{DocumentID: "d", SourceURI: "u", SourceVersion: "1", Version: 1,
				ChunkID: fmt.Sprintf("d:p1:c%d", i), ContentDigest: retrieval.Digest(x), RetrievedAt: at, Score: 1, Text: x})
		}
		if err := s.PutSnapshot(ctx, sn); err != nil {
			t.Fatalf("put snapshot %s: %v", id, err)
		}
		return sn
	}
	const backlog = 2501
	for i := range backlog {
		snap(fmt.Sprintf("old-%d", i), now.Add(-time.Duration(backlog-i)*time.Second-time.Hour), "shared text", fmt.Sprintf("only old %d", i))
	}
	young := snap("young", now, "shared text")
	n, err := s.PurgeSnapshots(ctx, tenant, now.Add(-time.Minute))
	if err != nil || n != backlog {
		t.Fatalf("purge: %d %v, want %d", n, err, backlog)
	}
	if _, err := s.GetSnapshot(ctx, tenant, "old-7"); !errors.Is(err, retrieval.ErrNotFound) {
		t.Fatalf("a purged snapshot: %v", err)
	}
	got, err := s.GetSnapshot(ctx, tenant, "young")
	if err != nil || len(got.Hits) != 1 || got.Hits[0].Text != young.Hits[0].Text {
		t.Fatalf("the young snapshot lost its shared text: %+v %v", got, err)
	}
}

func testRetConcurrentPuts(t *testing.T, s retrieval.Store, m retMode) {
	f := newRfx(t, s, m, retrieval.Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := f.svc.Put(t.Context(), f.tenant, retrieval.PutRequest{DocumentID: "race", Content: fmt.Sprintf("version %d of the race", i), ACL: []string{"tenant"}})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, retrieval.ErrConflict) {
			t.Fatalf("concurrent put: %v", err)
		}
	}
	d, err := f.svc.Get(t.Context(), f.tenant, "race")
	if err != nil {
		t.Fatal(err)
	}
	got := f.retrieve("user:a", "race version", 20)
	if len(got.Hits) != 1 || got.Hits[0].ChunkID != retrieval.ChunkID("race", d.Version, 0) {
		t.Fatalf("after racing puts: version %d, hits %+v", d.Version, got.Hits)
	}
}

// testRetLeakProbe puts random documents with random ACLs over random
// group memberships, changes memberships and ACLs as it goes, and checks
// every hit of every retrieval against the test's own model of who may
// read what. It also checks that readable documents are found, so a probe
// that finds nothing cannot pass.
func testRetLeakProbe(t *testing.T, s retrieval.Store, m retMode) {
	f := newRfx(t, s, m, retrieval.Options{})
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"}
	const users, groups, docs, probes = 30, 8, 40, 1000
	user := func(i int) string { return fmt.Sprintf("user:u%d", i) }
	members := map[string]map[string]bool{}
	setMember := func(u, g string, in bool) {
		f.member(g, u, in)
		if members[u] == nil {
			members[u] = map[string]bool{}
		}
		members[u][g] = in
	}
	for u := range users {
		for g := range groups {
			if rng.IntN(4) == 0 {
				setMember(user(u), fmt.Sprintf("g%d", g), true)
			}
		}
	}
	acls := map[string][]string{}
	chunkIDs := map[string]string{} // every chunk id ever written -> its document
	putDoc := func(id string) {
		var acl []string
		switch rng.IntN(10) {
		case 0:
			acl = []string{"tenant"}
		default:
			for range 1 + rng.IntN(3) {
				if rng.IntN(2) == 0 {
					acl = append(acl, user(rng.IntN(users)))
				} else {
					acl = append(acl, fmt.Sprintf("group:g%d", rng.IntN(groups)))
				}
			}
		}
		var b strings.Builder
		for range 8 + rng.IntN(20) {
			b.WriteString(words[rng.IntN(len(words))] + " ")
		}
		d, _ := f.put(id, b.String(), acl...)
		acls[id] = acl
		for n := range d.Chunks {
			chunkIDs[retrieval.ChunkID(id, d.Version, n)] = id
		}
	}
	for d := range docs {
		putDoc(fmt.Sprintf("d%d", d))
	}
	may := func(u, doc string) bool {
		for _, a := range acls[doc] {
			if a == "tenant" || a == u || (strings.HasPrefix(a, "group:") && members[u][strings.TrimPrefix(a, "group:")]) {
				return true
			}
		}
		return false
	}
	all := func() []string {
		out := make([]string, 0, len(chunkIDs))
		for id := range chunkIDs {
			out = append(out, id)
		}
		return out
	}
	// Every probe asks the store's full text directly, with no limit; every
	// fifth re-checks every chunk id ever written, live or stale, and
	// retrieves through the service (hybrid in the in-process index,
	// snapshot stored).
	leaks, hits, empty := 0, 0, 0
	check := func(i int, u, q, what, doc, chunk string) {
		hits++
		if !may(u, doc) {
			leaks++
			t.Errorf("probe %d (%s): %s got %s (acl %v) for %q", i, what, u, chunk, acls[doc], q)
		}
	}
	for i := range probes {
		switch rng.IntN(20) {
		case 0:
			setMember(user(rng.IntN(users)), fmt.Sprintf("g%d", rng.IntN(groups)), rng.IntN(2) == 0)
		case 1:
			putDoc(fmt.Sprintf("d%d", rng.IntN(docs)))
		}
		u := user(rng.IntN(users))
		q := words[rng.IntN(len(words))] + " " + words[rng.IntN(len(words))]
		text, err := s.SearchText(t.Context(), retrieval.TextQuery{TenantID: f.tenant, Principal: u, Terms: strings.Fields(q)})
		if err != nil {
			t.Fatalf("search text: %v", err)
		}
		if len(text) == 0 {
			empty++
		}
		for _, h := range text {
			check(i, u, q, "full text", chunkIDs[h.ChunkID], h.ChunkID)
		}
		if i%5 == 0 {
			cs, err := s.ReadableChunks(t.Context(), f.tenant, u, all(), time.Time{})
			if err != nil {
				t.Fatalf("readable chunks: %v", err)
			}
			for _, c := range cs {
				check(i, u, q, "re-check", c.DocumentID, c.ChunkID)
			}
		}
		if i%5 == 0 {
			for _, h := range f.retrieve(u, q, 1+rng.IntN(20)).Hits {
				check(i, u, q, "retrieve", h.DocumentID, h.ChunkID)
			}
		}
	}
	t.Logf("ACL leak probe: %d random principal/query combinations (each a full-text query in the store; every 5th a re-check over every chunk id ever written and a hybrid retrieve through the in-process index) by %d principals over %d documents and %d groups, %d hits checked, %d leaks",
		probes, users, docs, groups, hits, leaks)
	if hits < probes {
		t.Fatalf("only %d hits in %d probes (%d empty): the probe checks too little", hits, probes, empty)
	}
}

// testRetTwoInstances runs two Services (two instances, each with its own
// in-process index) over one store: every change made through one holds
// for the very next retrieval through the other, whose index is warm.
func testRetTwoInstances(t *testing.T, s retrieval.Store, m retMode) {
	a := newRfx(t, s, m, retrieval.Options{})
	b := newRfx(t, s, m, retrieval.Options{})
	b.tenant = a.tenant
	a.put("runbook", "Escalation runbook: page the on-call engineer for outages.", "group:support")
	a.put("notes", "Outages notes everyone may read.", "tenant")
	a.member("support", "user:alice", true)
	for _, f := range []*rfx{a, b} { // warm both indexes
		if got := docIDs(f.retrieve("user:alice", "outages runbook", 10)); !got["runbook"] || !got["notes"] {
			t.Fatalf("alice in support sees %v, want runbook and notes", got)
		}
	}
	b.member("support", "user:alice", false)
	if got := docIDs(a.retrieve("user:alice", "outages runbook", 10)); got["runbook"] || !got["notes"] {
		t.Fatalf("removed from support on the other instance, alice sees %v", got)
	}
	b.member("support", "user:alice", true)
	if got := docIDs(a.retrieve("user:alice", "outages runbook", 10)); !got["runbook"] {
		t.Fatalf("added back on the other instance, alice sees %v", got)
	}
	b.put("runbook", "Escalation runbook: page the on-call engineer for outages.", "user:carol")
	if got := docIDs(a.retrieve("user:alice", "outages runbook", 10)); got["runbook"] {
		t.Fatalf("ACL changed on the other instance, alice still sees %v", got)
	}
	if got := a.retrieve("user:carol", "outages runbook", 10); len(got.Hits) == 0 || got.Hits[0].ChunkID != "runbook:p2:c0" {
		t.Fatalf("carol after the ACL change: %+v", got.Hits)
	}
	b.put("runbook", "Escalation runbook: call the incident commander for outages.", "user:carol")
	got := a.retrieve("user:carol", "outages runbook commander", 10)
	if len(got.Hits) == 0 || got.Hits[0].ChunkID != "runbook:p3:c0" || !strings.Contains(got.Hits[0].Text, "commander") {
		t.Fatalf("new version written on the other instance: %+v", got.Hits)
	}
	if _, err := b.svc.Delete(t.Context(), b.tenant, "runbook"); err != nil {
		t.Fatal(err)
	}
	if got := docIDs(a.retrieve("user:carol", "outages runbook commander", 10)); got["runbook"] {
		t.Fatalf("deleted on the other instance, still served: %v", got)
	}
}

// testRetRetrieveWhileWriting retrieves from several goroutines while
// another rewrites and deletes documents (each index sync racing the
// searches): no error, every hit's text matches its digest, and no hit
// ever comes from a document the principal could never read.
func testRetRetrieveWhileWriting(t *testing.T, s retrieval.Store, m retMode) {
	f := newRfx(t, s, m, retrieval.Options{})
	for i := range 10 {
		f.put(fmt.Sprintf("a%d", i), fmt.Sprintf("Alpha report %d on refunds and invoices.", i), "user:a")
		f.put(fmt.Sprintf("b%d", i), fmt.Sprintf("Bravo report %d on refunds and invoices.", i), "user:b")
	}
	stop := make(chan struct{})
	writerErr := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				writerErr <- nil
				return
			default:
			}
			id := fmt.Sprintf("b%d", i%10)
			var err error
			if i%3 == 0 {
				if _, err = f.svc.Delete(t.Context(), f.tenant, id); errors.Is(err, retrieval.ErrNotFound) {
					err = nil
				}
			} else {
				_, _, err = f.svc.Put(t.Context(), f.tenant, retrieval.PutRequest{DocumentID: id,
					Content: fmt.Sprintf("Bravo report %d, version %d, on refunds.", i%10, i), ACL: []string{"user:b"}})
			}
			if err != nil {
				writerErr <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				snap, err := f.svc.Retrieve(t.Context(), f.tenant, retrieval.RetrieveRequest{Query: "report refunds invoices", Principal: "user:a", K: 20})
				if err != nil {
					errs <- err
					return
				}
				if len(snap.Hits) == 0 {
					errs <- errors.New("user:a found none of its 10 documents")
					return
				}
				for _, h := range snap.Hits {
					if !strings.HasPrefix(h.DocumentID, "a") || h.ContentDigest != retrieval.Digest(h.Text) {
						errs <- fmt.Errorf("user:a got %+v", h)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-writerErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// BenchIndexRows measures a tenant's first index load (IndexRows, what a
// retrieval after a restart waits for) over three documents of 1 MB put
// through st with the offline embedder: the stores' index-load benchmark.
func BenchIndexRows(b *testing.B, st retrieval.Store) {
	emb := hashembed.New(hashembed.DefaultDim)
	svc := retrieval.NewService(st, retrieval.Options{Embedder: emb})
	chunks := PutLargeDocuments(b, svc, 3, 1_000_000)
	for b.Loop() {
		rows, _, _, err := st.IndexRows(b.Context(), "t", emb.Model(), 0)
		if err != nil || len(rows) != chunks {
			b.Fatalf("%d rows, %v; want %d", len(rows), err, chunks)
		}
	}
	b.ReportMetric(float64(chunks), "chunks")
}

// PutLargeDocuments puts n documents of about size bytes each, readable by
// user:ann, into tenant "t" through svc, and returns how many chunks they
// made: the corpus of the stores' index-load benchmarks.
func PutLargeDocuments(tb testing.TB, svc *retrieval.Service, n, size int) int {
	tb.Helper()
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "fox", "golf", "hotel", "india", "juliet"}
	chunks := 0
	for d := range n {
		var sb strings.Builder
		for i := 0; sb.Len() < size; i++ {
			fmt.Fprintf(&sb, "%s%d w%dz%d ", words[i%10], d, i, d)
		}
		doc, _, err := svc.Put(tb.Context(), "t", retrieval.PutRequest{DocumentID: fmt.Sprint("d", d), Content: sb.String(), ACL: []string{"user:ann"}})
		if err != nil {
			tb.Fatal(err)
		}
		chunks += doc.Chunks
	}
	return chunks
}
