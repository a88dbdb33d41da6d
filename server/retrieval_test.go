package server_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/server"
	"github.com/mementohq/memento/store/memstore"
)

// retrievalBackends are the engines the black-box retrieval test runs on.
var retrievalBackends = []string{"memstore", "sqlite", "postgres"}

func openRetrievalEngine(t testing.TB, backend string) *memento.Engine {
	t.Helper()
	if backend != "memstore" {
		eng := openEngine(t, backend, memento.Config{})
		if eng.Retrieval == nil {
			t.Fatalf("the %s engine has no retrieval store", backend)
		}
		return eng
	}
	st := memstore.New()
	eng, err := memento.New(memento.Stores{Runs: st, Ops: st, Sessions: st, Vault: st, Memory: st.Memory(), Retrieval: st.Retrieval()},
		memento.Options{PII: memento.PIIConfig{Key: testenv.PIIKey}})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// adminRetrievalEnv serves backend's retrieval engine to one admin key of
// a tenant of its own, and returns the header that carries the key.
func adminRetrievalEnv(t *testing.T, backend string) (*testEnv, map[string]string) {
	t.Helper()
	const key = "retrieval-admin-key-0123456789"
	e := serveEngine(t, openRetrievalEngine(t, backend), key+"="+testenv.RandomID("ra-")+":admin", key)
	return e, map[string]string{"Authorization": "Bearer " + key}
}

type wireSnapshot struct {
	SnapshotID   string          `json:"snapshot_id"`
	QueryDigest  string          `json:"query_digest"`
	IndexVersion int64           `json:"index_version"`
	Principal    string          `json:"principal"`
	Hits         []retrieval.Hit `json:"hits"`
}

// TestRetrievalHTTP is the black-box acceptance over HTTP on every backend:
// ACL with groups (no hit, id or count of a protected document; removal
// cuts access on the next call), tenant isolation, a new version with the
// old snapshot unchanged, delete down to the last projection row, and the
// invalidation log.
func TestRetrievalHTTP(t *testing.T) {
	for _, backend := range retrievalBackends {
		t.Run(backend, func(t *testing.T) {
			ta, tb := testenv.RandomID("ra-"), testenv.RandomID("rb-")
			const ka, kb = "retrieval-key-a-0123456789", "retrieval-key-b-0123456789"
			eng := openRetrievalEngine(t, backend)
			e := serveEngine(t, eng, ka+"="+ta+":admin,"+kb+"="+tb+":admin", ka)
			ha, hb := map[string]string{"Authorization": "Bearer " + ka}, map[string]string{"Authorization": "Bearer " + kb}
			schemas := compileOpenAPI(t, e)

			put := func(h map[string]string, id, content string, acl []string, status int) {
				t.Helper()
				res := e.do(t, "PUT", "/v1/documents/"+url.PathEscape(id), map[string]any{"source_uri": "s3://kb/" + id,
					"source_version": "etag-" + fmt.Sprint(len(content)), "content": content, "acl": acl, "metadata": map[string]any{"lang": "en"}}, h)
				if res.status != status {
					t.Fatalf("put %s: %d, want %d: %s", id, res.status, status, res.body)
				}
				schemas.validate(t, "DocumentResult", res.body)
			}
			retrieve := func(h map[string]string, principal, q string) wireSnapshot {
				t.Helper()
				res := e.do(t, "POST", "/v1/retrieve", map[string]any{"query": q, "principal": principal, "k": 10}, h)
				if res.status == 200 {
					schemas.validate(t, "RetrievalSnapshot", res.body)
				}
				return decodeAs[wireSnapshot](t, res, 200)
			}
			put(ha, "handbook", "The incident handbook says: page the on-call engineer and open a bridge.", []string{"group:oncall"}, 201)
			put(ha, "public", "Our public status page lists every incident.", []string{"tenant"}, 201)
			put(hb, "handbook", "Tenant B handbook about gardening incidents.", []string{"tenant"}, 201)

			// No hit, no id, no count for someone outside the group.
			s := retrieve(ha, "user:mallory", "incident handbook on-call bridge")
			for _, h := range s.Hits {
				if h.DocumentID == "handbook" || strings.Contains(h.Text, "bridge") {
					t.Fatalf("mallory sees the protected handbook: %+v", h)
				}
			}
			// The PUT takes no fields: one sent is refused, not ignored.
			if res := e.do(t, "PUT", "/v1/groups/oncall/members/user:alice", `{"member":false}`, ha); res.status != 400 {
				t.Fatalf("add member with a body field: %d %s", res.status, res.body)
			}
			if s := retrieve(ha, "user:alice", "incident handbook on-call bridge"); len(s.Hits) != 0 && s.Hits[0].DocumentID == "handbook" {
				t.Fatal("a refused membership PUT added the member")
			}
			if res := e.do(t, "PUT", "/v1/groups/oncall/members/user:alice", nil, ha); res.status != 200 {
				t.Fatalf("add member: %d %s", res.status, res.body)
			}
			s = retrieve(ha, "user:alice", "incident handbook on-call bridge")
			if len(s.Hits) == 0 || s.Hits[0].DocumentID != "handbook" || s.Hits[0].ChunkID != "handbook:p1:c0" ||
				s.Hits[0].ContentDigest != retrieval.Digest(s.Hits[0].Text) || s.Hits[0].SourceURI != "s3://kb/handbook" {
				t.Fatalf("alice in oncall: %+v", s.Hits)
			}
			for _, h := range s.Hits {
				if strings.Contains(h.Text, "gardening") {
					t.Fatalf("tenant A sees B: %+v", h)
				}
			}
			old := s
			// The context builder retrieves through the same ACL.
			ctxRes := e.do(t, "POST", "/v1/context", map[string]any{"model": "gpt-4o", "budget_tokens": 2000, "query": "incident handbook bridge", "principal": "user:alice"}, ha)
			if ctxRes.status != 200 || !strings.Contains(string(ctxRes.body), "chunk:handbook:p1:c0") || !strings.Contains(string(ctxRes.body), "open a bridge") {
				t.Fatalf("context with documents: %d %s", ctxRes.status, ctxRes.body)
			}
			// The retrieval the context made is a stored snapshot it names.
			var built struct {
				Accounting struct {
					RetrievalSnapshotID string `json:"retrieval_snapshot_id"`
				} `json:"accounting"`
			}
			if err := json.Unmarshal(ctxRes.body, &built); err != nil || built.Accounting.RetrievalSnapshotID == "" {
				t.Fatalf("context names no retrieval snapshot: %v %s", err, ctxRes.body)
			}
			if snap := decodeAs[wireSnapshot](t, e.do(t, "GET", "/v1/retrieval-snapshots/"+built.Accounting.RetrievalSnapshotID, nil, ha), 200); len(snap.Hits) == 0 || snap.Hits[0].ChunkID != "handbook:p1:c0" {
				t.Fatalf("the context's snapshot: %+v", snap)
			}
			if ctxRes := e.do(t, "POST", "/v1/context", map[string]any{"model": "gpt-4o", "budget_tokens": 2000, "query": "incident handbook bridge", "principal": "user:mallory"}, ha); ctxRes.status != 200 || strings.Contains(string(ctxRes.body), "chunk:handbook") || strings.Contains(string(ctxRes.body), "open a bridge") {
				t.Fatalf("context for mallory holds the handbook: %s", ctxRes.body)
			}
			if res := e.do(t, "DELETE", "/v1/groups/oncall/members/user:alice", nil, ha); res.status != 204 {
				t.Fatalf("remove member: %d %s", res.status, res.body)
			}
			for _, h := range retrieve(ha, "user:alice", "incident handbook on-call bridge").Hits {
				if h.DocumentID == "handbook" {
					t.Fatalf("removed from the group, alice still sees %+v", h)
				}
			}
			// B never sees A.
			for _, h := range retrieve(hb, "user:alice", "incident handbook on-call bridge status page").Hits {
				if !strings.Contains(h.Text, "gardening") {
					t.Fatalf("tenant B sees %+v", h)
				}
			}
			// A new version: new retrievals see only it; the old snapshot is unchanged.
			put(ha, "handbook", "The incident handbook now says: page the incident commander first.", []string{"group:oncall", "user:alice"}, 200)
			put(ha, "handbook", "The incident handbook now says: page the incident commander first.", []string{"group:oncall", "user:alice"}, 200)
			s = retrieve(ha, "user:alice", "incident handbook commander")
			if len(s.Hits) == 0 || s.Hits[0].ChunkID != "handbook:p2:c0" || s.IndexVersion <= old.IndexVersion {
				t.Fatalf("after the new version: %+v", s)
			}
			for _, h := range s.Hits {
				if strings.HasPrefix(h.ChunkID, "handbook:p1:") {
					t.Fatalf("old version served: %+v", h)
				}
			}
			res := e.do(t, "GET", "/v1/retrieval-snapshots/"+old.SnapshotID, nil, ha)
			schemas.validate(t, "RetrievalSnapshot", res.body)
			again := decodeAs[wireSnapshot](t, res, 200)
			if len(again.Hits) != len(old.Hits) || again.QueryDigest != old.QueryDigest || again.IndexVersion != old.IndexVersion {
				t.Fatalf("old snapshot changed: %+v vs %+v", again, old)
			}
			for i := range old.Hits {
				a, b := again.Hits[i], old.Hits[i]
				if a.ChunkID != b.ChunkID || a.Text != b.Text || a.ContentDigest != b.ContentDigest || a.SourceVersion != b.SourceVersion || !a.RetrievedAt.Equal(b.RetrievedAt) {
					t.Fatalf("old snapshot hit %d changed: %+v vs %+v", i, a, b)
				}
			}
			if res := e.do(t, "GET", "/v1/retrieval-snapshots/"+old.SnapshotID, nil, hb); res.status != 404 || !strings.Contains(string(res.body), "retrieval-snapshot-not-found") {
				t.Fatalf("B reads A's snapshot: %d %s", res.status, res.body)
			}
			// Delete: 204, every projection row gone (checked in storage), 404 after.
			if res := e.do(t, "DELETE", "/v1/documents/handbook", nil, ha); res.status != 204 {
				t.Fatalf("delete: %d %s", res.status, res.body)
			}
			if n, err := eng.Retrieval.Store().ProjectionRows(t.Context(), ta, "handbook"); err != nil || n != 0 {
				t.Fatalf("%d projection rows left (%v)", n, err)
			}
			if n, err := eng.Retrieval.Store().ProjectionRows(t.Context(), tb, "handbook"); err != nil || n == 0 {
				t.Fatalf("A's delete touched B: %d rows (%v)", n, err)
			}
			if res := e.do(t, "DELETE", "/v1/documents/handbook", nil, ha); res.status != 404 || !strings.Contains(string(res.body), "document-not-found") {
				t.Fatalf("second delete: %d %s", res.status, res.body)
			}
			res = e.do(t, "GET", "/v1/invalidations?limit=2", nil, ha)
			schemas.validate(t, "InvalidationList", res.body)
			page := decodeAs[struct {
				Items      []retrieval.Invalidation `json:"items"`
				NextCursor string                   `json:"next_cursor"`
			}](t, res, 200)
			if len(page.Items) != 2 || page.NextCursor == "" || page.Items[0].Kind != retrieval.MembershipChanged {
				t.Fatalf("first page: %+v", page)
			}
			rest := decodeAs[struct {
				Items []retrieval.Invalidation `json:"items"`
			}](t, e.do(t, "GET", "/v1/invalidations?cursor="+page.NextCursor, nil, ha), 200)
			if len(rest.Items) != 2 || rest.Items[0].Kind != retrieval.DocumentReplaced || rest.Items[1].Kind != retrieval.DocumentDeleted {
				t.Fatalf("second page: %+v", rest.Items)
			}
			// Bad input is 422 invalid-request, never 500.
			for _, bad := range []map[string]any{{"query": "", "principal": "user:a"}, {"query": "x", "principal": "group:g"}, {"query": "x", "principal": "user:a", "k": 1000}} {
				if res := e.do(t, "POST", "/v1/retrieve", bad, ha); res.status != 422 {
					t.Fatalf("retrieve %v: %d %s", bad, res.status, res.body)
				}
			}
			if res := e.do(t, "PUT", "/v1/documents/x", map[string]any{"content": "x", "acl": []string{}}, ha); res.status != 422 {
				t.Fatalf("empty acl: %d %s", res.status, res.body)
			}
		})
	}
}

// TestDocumentWithoutSourceNamesItsOwn: a document sent without source_uri
// or source_version has Memento as its source, so every hit still names one
// (DESIGN rule 8): its URL, and a version that changes exactly with its
// content (the same document again keeps its version).
func TestDocumentWithoutSourceNamesItsOwn(t *testing.T) {
	for _, backend := range retrievalBackends {
		t.Run(backend, func(t *testing.T) {
			e, h := adminRetrievalEnv(t, backend)
			put := func(content string, status int) {
				t.Helper()
				if res := e.do(t, "PUT", "/v1/documents/noprov", map[string]any{"content": content, "acl": []string{"tenant"}}, h); res.status != status {
					t.Fatalf("put: %d, want %d: %s", res.status, status, res.body)
				}
			}
			hit := func() retrieval.Hit {
				t.Helper()
				s := decodeAs[wireSnapshot](t, e.do(t, "POST", "/v1/retrieve", map[string]any{"query": "quokka", "principal": "user:a"}, h), 200)
				if len(s.Hits) != 1 {
					t.Fatalf("hits: %+v", s.Hits)
				}
				return s.Hits[0]
			}
			put("Orphan chunk about quokka habitats.", 201)
			first := hit()
			if first.SourceURI != "/v1/documents/noprov" || !strings.HasPrefix(first.SourceVersion, "sha256:") {
				t.Fatalf("hit of a document without a source: %+v", first)
			}
			put("Orphan chunk about quokka habitats.", 200)
			if again := hit(); again.SourceVersion != first.SourceVersion || again.ChunkID != first.ChunkID {
				t.Fatalf("the same document again moved its version: %+v, then %+v", first, again)
			}
			put("Orphan chunk about quokka burrows.", 200)
			if changed := hit(); changed.SourceVersion == first.SourceVersion {
				t.Fatalf("new content kept the source version %s", changed.SourceVersion)
			}
		})
	}
}

// An ACL entry that reads as the tenant entry or a group but is spelt
// otherwise ("TENANT", " tenant", "Group:ops") is refused, as the other
// wildcards are: kept, it granted nobody in the tenant or group, and
// everything to a principal of that very name. Such a principal is refused
// too.
func TestACLLookalikesAreRefused(t *testing.T) {
	for _, backend := range retrievalBackends {
		t.Run(backend, func(t *testing.T) {
			e, h := adminRetrievalEnv(t, backend)
			for _, entry := range []string{"TENANT", "Tenant", " tenant", "tenant ", "Group:ops", "GROUP:ops", " group:ops"} {
				res := e.do(t, "PUT", "/v1/documents/look", map[string]any{"content": "Lynx audit findings.", "acl": []string{"user:ann", entry}}, h)
				expectProblem(t, res, 422, "invalid-request")
				res = e.do(t, "POST", "/v1/retrieve", map[string]any{"query": "lynx audit", "principal": entry}, h)
				expectProblem(t, res, 422, "invalid-request")
			}
			if res := e.do(t, "GET", "/v1/documents/look", nil, h); res.status != 404 {
				t.Fatalf("a refused put kept the document: %d %s", res.status, res.body)
			}
			// Ids that only contain the words stay valid.
			if res := e.do(t, "PUT", "/v1/documents/look", map[string]any{"content": "Lynx audit findings.", "acl": []string{"user:tenant", "svc:group:ops"}}, h); res.status != 201 {
				t.Fatalf("put: %d %s", res.status, res.body)
			}
		})
	}
}

// A PUT without content is refused (it used to replace the document with an
// empty one), and metadata numbers come back exactly as sent.
func TestDocumentPutNeedsContent(t *testing.T) {
	for _, backend := range retrievalBackends {
		t.Run(backend, func(t *testing.T) {
			e, h := adminRetrievalEnv(t, backend)
			body := `{"content":"Wombats dig burrows.","acl":["tenant"],"metadata":{"order":9007199254740993,"ratio":0.1}}`
			if res := e.do(t, "PUT", "/v1/documents/keep", body, h); res.status != 201 {
				t.Fatalf("put: %d %s", res.status, res.body)
			}
			res := e.do(t, "PUT", "/v1/documents/keep", map[string]any{"acl": []string{"tenant"}, "source_uri": "https://x.example/keep"}, h)
			if res.status != 422 || !strings.Contains(string(res.body), "content is required") {
				t.Fatalf("put without content: %d %s", res.status, res.body)
			}
			got := e.do(t, "GET", "/v1/documents/keep", nil, h)
			if got.status != 200 || !strings.Contains(string(got.body), `"order":9007199254740993`) || strings.Contains(string(got.body), "x.example") {
				t.Fatalf("after the refused put: %d %s", got.status, got.body)
			}
			s := decodeAs[wireSnapshot](t, e.do(t, "POST", "/v1/retrieve", map[string]any{"query": "wombats burrows", "principal": "user:a"}, h), 200)
			if len(s.Hits) != 1 {
				t.Fatalf("the document lost its content: %+v", s.Hits)
			}
		})
	}
}

// A document larger than the body limit every other route takes (which
// follows the state limit; 64 KiB here, to keep the documents small) goes
// in, \u-escaped too; one past the service's content limit is refused for
// its content, not as a request that talks about run state.
func TestDocumentUpToTheContentLimit(t *testing.T) {
	const key = "retrieval-admin-key-0123456789"
	e := serveEngineWith(t, openRetrievalEngine(t, "sqlite"), key+"="+testenv.RandomID("ra-")+":admin", key,
		func(o *server.Options) { o.MaxBodyBytes = 64 << 10 })
	h := map[string]string{"Authorization": "Bearer " + key}
	big := strings.Repeat("wombat burrow ", 20_000) // 280 KB
	if res := e.do(t, "PUT", "/v1/documents/big", map[string]any{"content": big, "acl": []string{"tenant"}}, h); res.status != 201 {
		t.Fatalf("put of %d bytes: %d %.300s", len(big), res.status, res.body)
	}
	// Cyrillic sent \u-escaped, as some clients do: 6 bytes of body for 2
	// of content.
	escaped := `{"acl":["tenant"],"content":"` + strings.Repeat(`\u0432`, 50_000) + `"}`
	if res := e.do(t, "PUT", "/v1/documents/cyr", escaped, h); res.status != 201 {
		t.Fatalf("put of %d escaped bytes: %d %.300s", len(escaped), res.status, res.body)
	}
	over := strings.Repeat("x", retrieval.MaxContentBytes+1)
	res := e.do(t, "PUT", "/v1/documents/over", map[string]any{"content": over, "acl": []string{"tenant"}}, h)
	if res.status != 422 || !strings.Contains(string(res.body), "content is over") {
		t.Fatalf("put of %d bytes: %d %.300s", len(over), res.status, res.body)
	}
	res = e.do(t, "POST", "/v1/runs", map[string]any{"run_id": "r", "workflow_name": "w", "workflow_version": "1", "state": map[string]any{"blob": big}}, h)
	if res.status != 413 || strings.Contains(string(res.body), "in the state") {
		t.Fatalf("another route took the document limit: %d %.300s", res.status, res.body)
	}
}

// A context asked for a principal's documents without a query says why it
// holds none, instead of leaving them out silently.
func TestContextDocumentsNeedAQuery(t *testing.T) {
	e, h := adminRetrievalEnv(t, "sqlite")
	if res := e.do(t, "PUT", "/v1/documents/hb", map[string]any{"content": "The incident handbook names the bridge.", "acl": []string{"tenant"}}, h); res.status != 201 {
		t.Fatalf("put: %d %s", res.status, res.body)
	}
	res := e.do(t, "POST", "/v1/context", map[string]any{"model": "gpt-4o", "budget_tokens": 500, "system": "s", "principal": "user:alice"}, h)
	var out struct {
		Accounting struct {
			LeftOut []struct{ Kind, Reason string } `json:"left_out"`
		} `json:"accounting"`
	}
	if res.status != 200 || json.Unmarshal(res.body, &out) != nil {
		t.Fatalf("context: %d %s", res.status, res.body)
	}
	for _, l := range out.Accounting.LeftOut {
		if l.Kind == "documents" && strings.Contains(l.Reason, "no query") {
			return
		}
	}
	t.Fatalf("documents left out silently: %s", res.body)
}
