package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/server"
	"github.com/mementohq/memento/store/memstore"
)

// memoryBackends are the stores long-term memory is tested on over HTTP.
var memoryBackends = []string{"memstore", "sqlite", "postgres"}

// openMemoryEngine opens an engine with long-term memory on backend:
// the in-memory twin, or SQLite / PostgreSQL as memento.Open wires them.
func openMemoryEngine(t testing.TB, backend string, mo memory.Options) *memento.Engine {
	t.Helper()
	if backend != "memstore" {
		eng := openEngine(t, backend, memento.Config{Memory: mo})
		if eng.Memory == nil {
			t.Fatalf("the %s engine has no long-term memory store", backend)
		}
		return eng
	}
	st := memstore.New()
	eng, err := memento.New(memento.Stores{Runs: st, Ops: st, Sessions: st, Vault: st, Memory: st.Memory(), Retrieval: st.Retrieval()},
		memento.Options{PII: memento.PIIConfig{Key: testenv.PIIKey}, Memory: mo})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// memEnv serves one engine to two tenants, each with its own admin key.
type memEnv struct {
	*testEnv
	tenantA, tenantB string
	a, b             map[string]string // request headers of tenant A and B
}

func newMemEnv(t testing.TB, backend string, mo memory.Options) *memEnv {
	t.Helper()
	ta, tb := testenv.RandomID("ta-"), testenv.RandomID("tb-")
	const ka, kb = "memory-key-a-0123456789", "memory-key-b-0123456789"
	e := serveEngine(t, openMemoryEngine(t, backend, mo), ka+"="+ta+":admin,"+kb+"="+tb+":admin", ka)
	return &memEnv{testEnv: e, tenantA: ta, tenantB: tb,
		a: map[string]string{"Authorization": "Bearer " + ka}, b: map[string]string{"Authorization": "Bearer " + kb}}
}

func forEachMemoryBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, b := range memoryBackends {
		t.Run(b, func(t *testing.T) { fn(t, b) })
	}
}

// wireClaim is a claim (or write result, or hit) as the API answers it.
type wireClaim struct {
	MemoryID      string            `json:"memory_id"`
	TenantID      string            `json:"tenant_id"`
	SubjectID     string            `json:"subject_id"`
	Namespace     string            `json:"namespace"`
	Key           string            `json:"key"`
	Value         json.RawMessage   `json:"value"`
	Status        string            `json:"status"`
	Expired       bool              `json:"expired"`
	Provenance    memory.Provenance `json:"provenance"`
	Supersedes    string            `json:"supersedes"`
	SupersededBy  string            `json:"superseded_by"`
	ExpiresAt     *time.Time        `json:"expires_at"`
	InvalidatedAt *time.Time        `json:"invalidated_at"`
	Confirmations int               `json:"confirmations"`
	Outcome       string            `json:"outcome"`
	Reason        string            `json:"reason"`
	Superseded    string            `json:"superseded"`
	MergedInto    string            `json:"merged_into"`
	Score         float64           `json:"score"`
}

type wireList struct {
	Items      []wireClaim `json:"items"`
	NextCursor string      `json:"next_cursor"`
	Mode       string      `json:"mode"`
}

func decodeAs[T any](t testing.TB, res rawResponse, status int) T {
	t.Helper()
	if res.status != status {
		t.Fatalf("status %d, want %d: %s", res.status, status, res.body)
	}
	var v T
	if err := json.Unmarshal(res.body, &v); err != nil {
		t.Fatalf("decode %s: %v", res.body, err)
	}
	return v
}

// claimBody is a POST /v1/memories body stated by the user in message msg.
func claimBody(subject, key, value, msg string) map[string]any {
	return map[string]any{"subject_id": subject, "key": key, "value": value,
		"provenance": map[string]any{"source_type": "message", "source_id": msg, "validated_by": "user_stated", "message_ids": []string{msg}}}
}

func with(body map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range body {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func (e *memEnv) add(t testing.TB, hdr map[string]string, body map[string]any, status int) wireClaim {
	t.Helper()
	return decodeAs[wireClaim](t, e.do(t, "POST", "/v1/memories", body, hdr), status)
}

func (e *memEnv) list(t testing.TB, hdr map[string]string, query string) []wireClaim {
	t.Helper()
	return decodeAs[wireList](t, e.do(t, "GET", "/v1/memories?"+query, nil, hdr), 200).Items
}

func (e *memEnv) search(t testing.TB, hdr map[string]string, subject, q string) wireList {
	t.Helper()
	return decodeAs[wireList](t, e.do(t, "POST", "/v1/memories/search", map[string]any{"subject_id": subject, "query": q}, hdr), 200)
}

func ids(cs []wireClaim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.MemoryID
	}
	return out
}

// TestMemorySupersede: a contradiction supersedes and never deletes: reads
// show only the new claim, the history both with their provenance, and the
// old claim stays readable by id as superseded. Also the failure users
// report of other systems: a contradiction that deletes the old fact and
// never adds the new one.
func TestMemorySupersede(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		e := newMemEnv(t, backend, memory.Options{})
		schemas := compileOpenAPI(t, e.testEnv)
		res := e.do(t, "POST", "/v1/memories", claimBody("alice", "home", "Moscow", "m-1"), e.a)
		schemas.validate(t, "MemoryWriteResult", res.body)
		old := decodeAs[wireClaim](t, res, 201)
		if old.Outcome != "added" || old.Status != "current" || old.TenantID != e.tenantA || res.header.Get("Location") != "/v1/memories/"+old.MemoryID {
			t.Fatalf("first add: %+v %s", old, res.header.Get("Location"))
		}
		asOf := time.Now().UTC()
		time.Sleep(2 * time.Millisecond)
		nw := e.add(t, e.a, claimBody("alice", "home", "Saint Petersburg", "m-2"), 201)
		if nw.Outcome != "superseded" || nw.Superseded != old.MemoryID || nw.Supersedes != old.MemoryID {
			t.Fatalf("contradiction: %+v", nw)
		}
		got := e.list(t, e.a, "subject_id=alice&key=home")
		if len(got) != 1 || got[0].MemoryID != nw.MemoryID || string(got[0].Value) != `"Saint Petersburg"` {
			t.Fatalf("GET after supersede: %+v", got)
		}
		res = e.do(t, "GET", "/v1/memories?subject_id=alice", nil, e.a)
		schemas.validate(t, "MemoryList", res.body)
		res = e.do(t, "GET", "/v1/memories/"+nw.MemoryID+"/history", nil, e.a)
		schemas.validate(t, "MemoryHistory", res.body)
		h := decodeAs[wireList](t, res, 200).Items
		if len(h) != 2 || h[0].MemoryID != old.MemoryID || h[0].Status != "superseded" || h[0].SupersededBy != nw.MemoryID ||
			h[0].Provenance.SourceID != "m-1" || h[1].MemoryID != nw.MemoryID || h[1].Provenance.SourceID != "m-2" || h[1].Status != "current" {
			t.Fatalf("history: %+v", h)
		}
		res = e.do(t, "GET", "/v1/memories/"+old.MemoryID, nil, e.a)
		schemas.validate(t, "Memory", res.body)
		if c := decodeAs[wireClaim](t, res, 200); c.Status != "superseded" || string(c.Value) != `"Moscow"` {
			t.Fatalf("old claim by id: %+v", c)
		}
		// As of before the correction, the old fact was in force.
		past := e.list(t, e.a, "subject_id=alice&key=home&as_of="+url.QueryEscape(asOf.Format(time.RFC3339Nano)))
		if len(past) != 1 || past[0].MemoryID != old.MemoryID {
			t.Fatalf("as_of read: %+v", past)
		}
		if hits := e.search(t, e.a, "alice", "Moscow Petersburg").Items; len(hits) != 1 || hits[0].MemoryID != nw.MemoryID {
			t.Fatalf("search after supersede: %+v", hits)
		}
		// A writer that names the claim it corrects loses to a concurrent correction.
		third := e.add(t, e.a, with(claimBody("alice", "home", "Kazan", "m-3"), "supersedes", nw.MemoryID), 201)
		p := expectProblem(t, e.do(t, "POST", "/v1/memories", with(claimBody("alice", "home", "Omsk", "m-4"), "supersedes", nw.MemoryID), e.a), 409, "memory-conflict")
		if got := e.list(t, e.a, "subject_id=alice&key=home"); len(got) != 1 || got[0].MemoryID != third.MemoryID {
			t.Fatalf("a refused correction changed the key: %+v (%s)", got, p.Detail)
		}
		expectProblem(t, e.do(t, "GET", "/v1/memories?subject_id=alice&as_of=yesterday", nil, e.a), 400, "invalid-request")
		expectProblem(t, e.do(t, "GET", "/v1/memories?key=home", nil, e.a), 400, "invalid-request")
		expectProblem(t, e.do(t, "GET", "/v1/memories/nope", nil, e.a), 404, "memory-not-found")
	})
}

// TestMemoryDuplicateMerged: the same fact added twice is one claim, its
// duplicate refreshing it (outcome merged, 200), never a pile of copies.
func TestMemoryDuplicateMerged(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		e := newMemEnv(t, backend, memory.Options{})
		first := e.add(t, e.a, claimBody("bob", "language", "Russian", "m-1"), 201)
		dup := e.add(t, e.a, claimBody("bob", "language", " russian ", "m-2"), 200)
		if dup.Outcome != "merged" || dup.MergedInto != first.MemoryID || dup.MemoryID != first.MemoryID || dup.Confirmations != 2 {
			t.Fatalf("duplicate: %+v", dup)
		}
		if got := e.list(t, e.a, "subject_id=bob"); len(got) != 1 {
			t.Fatalf("%d claims after a duplicate: %+v", len(got), got)
		}
		if h := decodeAs[wireList](t, e.do(t, "GET", "/v1/memories/"+first.MemoryID+"/history", nil, e.a), 200).Items; len(h) != 1 {
			t.Fatalf("history after a duplicate: %+v", h)
		}
		m := string(e.do(t, "GET", "/metrics", nil, nil).body)
		for _, want := range []string{`memento_memory_writes_total{outcome="added"} 1`, `memento_memory_writes_total{outcome="merged"} 1`} {
			if !strings.Contains(m, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

// TestMemoryIdempotencyKey: an add retried under its Idempotency-Key is
// the first answer again (201 added, the same claim, one confirmation,
// Idempotent-Replayed), and the key with another value is 422
// idempotency-mismatch with nothing changed, on every backend.
func TestMemoryIdempotencyKey(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		e := newMemEnv(t, backend, memory.Options{})
		hdr := map[string]string{"Idempotency-Key": "add-1"}
		for k, v := range e.a {
			hdr[k] = v
		}
		body := claimBody("kim", "language", "Korean", "m-1")
		first := e.do(t, "POST", "/v1/memories", body, hdr)
		again := e.do(t, "POST", "/v1/memories", body, hdr)
		c1, c2 := decodeAs[wireClaim](t, first, 201), decodeAs[wireClaim](t, again, 201)
		if c1.MemoryID != c2.MemoryID || c2.Outcome != "added" || c2.Confirmations != 1 || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retried add: %+v then %+v (replayed %q)", c1, c2, again.header.Get("Idempotent-Replayed"))
		}
		expectProblem(t, e.do(t, "POST", "/v1/memories", claimBody("kim", "language", "Japanese", "m-1"), hdr), 422, "idempotency-mismatch")
		if got := e.list(t, e.a, "subject_id=kim"); len(got) != 1 || got[0].MemoryID != c1.MemoryID || got[0].Confirmations != 1 {
			t.Fatalf("claims after the retries: %+v", got)
		}
	})
}

// TestMemoryConcurrentKeyReuse: requests that reuse one Idempotency-Key at
// once with different values get one 201 and otherwise 422
// idempotency-mismatch, never a conflict that names a constraint.
func TestMemoryConcurrentKeyReuse(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		e := newMemEnv(t, backend, memory.Options{})
		hdr := map[string]string{"Idempotency-Key": "race-1"}
		for k, v := range e.a {
			hdr[k] = v
		}
		const writers = 12
		var wg sync.WaitGroup
		codes := make(chan string, writers)
		for i := range writers {
			wg.Go(func() {
				res := e.do(t, "POST", "/v1/memories", claimBody("kai", "k", fmt.Sprintf("v%d", i), "m-1"), hdr)
				codes <- fmt.Sprintf("%d %s", res.status, res.body)
			})
		}
		wg.Wait()
		close(codes)
		created := 0
		for c := range codes {
			switch {
			case strings.HasPrefix(c, "201 "):
				created++
			case strings.HasPrefix(c, "422 ") && strings.Contains(c, "idempotency-mismatch"):
			default:
				t.Errorf("a concurrent add under a reused key: %.300s", c)
			}
		}
		if created != 1 {
			t.Errorf("%d adds kept, want 1", created)
		}
	})
}

// TestMemoryConcurrentAddsToOneKey: writers that add to one key at once,
// none naming what it supersedes, are all kept (201), one current claim and
// every other in its history, instead of most answering 409 memory-conflict
// for a race they did not ask to lose.
func TestMemoryConcurrentAddsToOneKey(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		e := newMemEnv(t, backend, memory.Options{})
		const writers = 24
		var wg sync.WaitGroup
		codes := make(chan string, writers)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := e.do(t, "POST", "/v1/memories", claimBody("zed", "city", fmt.Sprintf("city %d", i), "m-1"), e.a)
				codes <- fmt.Sprintf("%d %s", res.status, res.body)
			}()
		}
		wg.Wait()
		close(codes)
		for c := range codes {
			if !strings.HasPrefix(c, "201 ") {
				t.Errorf("concurrent add: %.300s", c)
			}
		}
		cur := e.list(t, e.a, "subject_id=zed")
		if len(cur) != 1 {
			t.Fatalf("%d current claims, want 1", len(cur))
		}
		if h := decodeAs[wireList](t, e.do(t, "GET", "/v1/memories/"+cur[0].MemoryID+"/history", nil, e.a), 200).Items; len(h) != writers {
			t.Fatalf("history holds %d claims, want %d (none lost)", len(h), writers)
		}
	})
}

// TestUnknownQueryParameterOnAWrite: a misspelt query parameter on a write
// is refused (400) instead of ignored: a forget whose namespace filter is
// misspelt would otherwise erase every namespace of the subject.
func TestUnknownQueryParameterOnAWrite(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		e := newMemEnv(t, backend, memory.Options{})
		e.add(t, e.a, with(claimBody("fq", "k", "va", "m-1"), "namespace", "a"), 201)
		e.add(t, e.a, with(claimBody("fq", "k", "vb", "m-2"), "namespace", "b"), 201)
		expectProblem(t, e.do(t, "DELETE", "/v1/subjects/fq/memories?namspace=a", nil, e.a), 400, "invalid-request")
		// A parameter given twice with different values is ambiguous: the
		// first one would win unseen, so it is refused too.
		expectProblem(t, e.do(t, "DELETE", "/v1/subjects/fq/memories?namespace=a&namespace=b", nil, e.a), 400, "invalid-request")
		expectProblem(t, e.do(t, "GET", "/v1/memories?subject_id=other&subject_id=fq", nil, e.a), 400, "invalid-request")
		// An empty namespace names none: refused, not taken as every one.
		expectProblem(t, e.do(t, "DELETE", "/v1/subjects/fq/memories?namespace=", nil, e.a), 422, "invalid-request")
		expectProblem(t, e.do(t, "DELETE", "/v1/subjects/fq/memories", map[string]any{"namespace": ""}, e.a), 422, "invalid-request")
		// A subject or namespace no path can name (forget and declare go by
		// path) is refused when written, so none is stored out of reach.
		for _, id := range []string{".", "..", "a/", "/a", "a//b", "x/./y", "x/../y"} {
			expectProblem(t, e.do(t, "POST", "/v1/memories", claimBody(id, "k", "v", "m-9"), e.a), 422, "invalid-request")
			expectProblem(t, e.do(t, "POST", "/v1/memories", with(claimBody("fq", "k", "v", "m-9"), "namespace", id), e.a), 422, "invalid-request")
		}
		if got := e.list(t, e.a, "subject_id=a/b"); len(got) != 0 {
			t.Fatalf("subject a/b: %+v", got)
		}
		e.add(t, e.a, claimBody("a/b", "k", "v", "m-9"), 201) // a slash inside is addressable: a%2Fb
		if res := e.do(t, "DELETE", "/v1/subjects/a%2Fb/memories", nil, e.a); res.status != 200 {
			t.Fatalf("forget of subject a/b: %d %s", res.status, res.body)
		}
		if got := e.list(t, e.a, "subject_id=fq&subject_id=fq"); len(got) != 2 {
			t.Fatalf("a list with the same subject_id twice answered %d claims, want 2", len(got))
		}
		if got := e.list(t, e.a, "subject_id=fq"); len(got) != 2 {
			t.Fatalf("after a refused forget: %d claims, want 2", len(got))
		}
		if res := e.do(t, "DELETE", "/v1/subjects/fq/memories?namespace=a", nil, e.a); res.status != 200 {
			t.Fatalf("forget of namespace a: %d %s", res.status, res.body)
		}
		if got := e.list(t, e.a, "subject_id=fq"); len(got) != 1 || got[0].Namespace != "b" {
			t.Fatalf("after forgetting namespace a: %+v", got)
		}
	})
}

// TestMemoryExpiredAndInvalidated: an expired claim and an invalidated one
// never appear in reads or search.
func TestMemoryExpiredAndInvalidated(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		e := newMemEnv(t, backend, memory.Options{})
		short := e.add(t, e.a, with(claimBody("carol", "coupon", "spring sale coupon", "m-1"), "ttl_seconds", 1), 201)
		gone := e.add(t, e.a, claimBody("carol", "pet", "a cat named sale", "m-2"), 201)
		kept := e.add(t, e.a, claimBody("carol", "drink", "tea on sale", "m-3"), 201)
		if short.ExpiresAt == nil {
			t.Fatalf("ttl_seconds gave no expires_at: %+v", short)
		}
		res := e.do(t, "POST", "/v1/memories/"+gone.MemoryID+"/invalidate", map[string]any{"reason": "the user said it was a joke"}, e.a)
		if c := decodeAs[wireClaim](t, res, 200); c.Status != "invalidated" || c.InvalidatedAt == nil {
			t.Fatalf("invalidate: %+v", c)
		}
		expectProblem(t, e.do(t, "POST", "/v1/memories/"+gone.MemoryID+"/invalidate", map[string]any{"reason": "again"}, e.a), 409, "memory-conflict")
		expectProblem(t, e.do(t, "POST", "/v1/memories/"+kept.MemoryID+"/invalidate", map[string]any{}, e.a), 422, "invalid-request")
		time.Sleep(time.Until(*short.ExpiresAt) + 50*time.Millisecond)
		if got := ids(e.list(t, e.a, "subject_id=carol")); !slices.Equal(got, []string{kept.MemoryID}) {
			t.Fatalf("GET shows %v, want only %s", got, kept.MemoryID)
		}
		for _, mode := range []string{"", "fulltext", "hybrid"} {
			body := map[string]any{"subject_id": "carol", "query": "sale coupon cat", "mode": mode}
			if mode == "" {
				delete(body, "mode")
			}
			hits := decodeAs[wireList](t, e.do(t, "POST", "/v1/memories/search", body, e.a), 200).Items
			if got := ids(hits); !slices.Equal(got, []string{kept.MemoryID}) {
				t.Fatalf("search (mode %q) finds %v, want only %s", mode, got, kept.MemoryID)
			}
		}
		// Still there by id, with what happened to it.
		if c := decodeAs[wireClaim](t, e.do(t, "GET", "/v1/memories/"+gone.MemoryID, nil, e.a), 200); c.Status != "invalidated" || c.Expired {
			t.Fatalf("invalidated claim by id: %+v", c)
		}
		// The expired one says so by id and in its history; the kept one does not.
		if c := decodeAs[wireClaim](t, e.do(t, "GET", "/v1/memories/"+short.MemoryID, nil, e.a), 200); c.Status != "current" || !c.Expired {
			t.Fatalf("expired claim by id: %+v, want current and expired", c)
		}
		if h := decodeAs[wireList](t, e.do(t, "GET", "/v1/memories/"+short.MemoryID+"/history", nil, e.a), 200).Items; len(h) != 1 || !h[0].Expired {
			t.Fatalf("expired claim's history: %+v", h)
		}
		if c := decodeAs[wireClaim](t, e.do(t, "GET", "/v1/memories/"+kept.MemoryID, nil, e.a), 200); c.Expired {
			t.Fatalf("live claim by id says expired: %+v", c)
		}
	})
}

// TestMemoryConfirmKeepsTheLaterFact: a held claim valid from before the
// key's current claim does not replace it when confirmed, as it would not
// have replaced it had it been kept at once (a claim supersedes only an
// earlier one): the confirm is 409 and the later fact stays in force.
func TestMemoryConfirmKeepsTheLaterFact(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		e := newMemEnv(t, backend, memory.Options{})
		later := e.add(t, e.a, with(claimBody("hana", "health.allergy", "peanuts", "m-2"),
			"valid_from", "2023-01-01T00:00:00Z",
			"provenance", map[string]any{"source_type": "operator", "source_id": "ticket-9", "validated_by": "operator"}), 201)
		held := e.add(t, e.a, with(claimBody("hana", "health.allergy", "shellfish", "m-1"), "valid_from", "2020-01-01T00:00:00Z"), 201)
		if later.Status != "current" || held.Status != "held" {
			t.Fatalf("setup: %+v %+v", later, held)
		}
		expectProblem(t, e.do(t, "POST", "/v1/memories/"+held.MemoryID+"/confirm", nil, e.a), 409, "memory-conflict")
		for _, q := range []string{"subject_id=hana", "subject_id=hana&as_of=2024-06-01T00:00:00Z"} {
			if got := ids(e.list(t, e.a, q)); !slices.Equal(got, []string{later.MemoryID}) {
				t.Fatalf("GET ?%s shows %v, want the later fact %s", q, got, later.MemoryID)
			}
		}
		if c := decodeAs[wireClaim](t, e.do(t, "GET", "/v1/memories/"+held.MemoryID, nil, e.a), 200); c.Status != "held" {
			t.Fatalf("the refused confirm changed the held claim: %+v", c)
		}
	})
}

// TestMemoryTenantIsolation: tenant B never sees, changes or forgets
// tenant A's claims, whatever it names.
func TestMemoryTenantIsolation(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		e := newMemEnv(t, backend, memory.Options{})
		c := e.add(t, e.a, claimBody("dave", "city", "Lisbon", "m-1"), 201)
		if got := e.list(t, e.b, "subject_id=dave"); len(got) != 0 {
			t.Fatalf("tenant B lists A's claims: %+v", got)
		}
		if hits := e.search(t, e.b, "dave", "Lisbon").Items; len(hits) != 0 {
			t.Fatalf("tenant B finds A's claims: %+v", hits)
		}
		for _, q := range []struct{ method, path string }{
			{"GET", "/v1/memories/" + c.MemoryID}, {"GET", "/v1/memories/" + c.MemoryID + "/history"},
		} {
			expectProblem(t, e.do(t, q.method, q.path, nil, e.b), 404, "memory-not-found")
		}
		nf := expectProblem(t, e.do(t, "POST", "/v1/memories/"+c.MemoryID+"/invalidate", map[string]any{"reason": "x"}, e.b), 404, "memory-not-found")
		if strings.Count(nf.Detail, c.MemoryID) != 1 {
			t.Fatalf("the detail names the claim more than once: %q", nf.Detail)
		}
		if p := decodeAs[memory.Profile](t, e.do(t, "GET", "/v1/subjects/dave/profile", nil, e.b), 200); p.Claims != 0 {
			t.Fatalf("tenant B's profile of dave: %+v", p)
		}
		rec := decodeAs[memory.ForgetRecord](t, e.do(t, "DELETE", "/v1/subjects/dave/memories", nil, e.b), 200)
		if rec.Claims != 0 || rec.TenantID != e.tenantB {
			t.Fatalf("tenant B's forget: %+v", rec)
		}
		// B's own claim with the same subject and key does not touch A's.
		e.add(t, e.b, claimBody("dave", "city", "Porto", "m-9"), 201)
		if got := e.list(t, e.a, "subject_id=dave"); len(got) != 1 || got[0].MemoryID != c.MemoryID || string(got[0].Value) != `"Lisbon"` {
			t.Fatalf("tenant A after B's writes: %+v", got)
		}
	})
}

// TestMemoryForget: after forgetting a subject there are zero search hits
// and zero projection rows in storage, nothing by id, and the same claim
// cannot come back (the tombstone). Also the failure users report: a
// forget that answers success while search still returns the fact.
func TestMemoryForget(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		e := newMemEnv(t, backend, memory.Options{})
		schemas := compileOpenAPI(t, e.testEnv)
		ctx := context.Background()
		a := e.add(t, e.a, claimBody("erin", "allergy.food", "peanuts", "m-1"), 201)
		e.add(t, e.a, claimBody("erin", "home", "Oslo", "m-2"), 201)
		e.add(t, e.a, with(claimBody("erin", "team", "platform", "m-3"), "namespace", "work"), 201)
		e.add(t, e.a, claimBody("frank", "home", "Oslo", "m-4"), 201)
		if hits := e.search(t, e.a, "erin", "peanuts Oslo").Items; len(hits) != 2 {
			t.Fatalf("before forget: %+v", hits)
		}
		// One namespace first.
		res := e.do(t, "DELETE", "/v1/subjects/erin/memories?namespace=work&reason=user+request", nil, e.a)
		schemas.validate(t, "MemoryForgetRecord", res.body)
		rec := decodeAs[memory.ForgetRecord](t, res, 200)
		if rec.Claims != 1 || rec.Namespace != "work" || rec.Reason != "user request" || rec.Tombstones != 1 {
			t.Fatalf("forget one namespace: %+v", rec)
		}
		if got := e.list(t, e.a, "subject_id=erin"); len(got) != 2 {
			t.Fatalf("forgetting namespace work took others: %+v", got)
		}
		// Then everything, with the reason in a body.
		rec = decodeAs[memory.ForgetRecord](t, e.do(t, "DELETE", "/v1/subjects/erin/memories", map[string]any{"reason": "erasure request"}, e.a), 200)
		if rec.Claims != 2 || rec.Reason != "erasure request" || rec.Namespace != "" {
			t.Fatalf("forget: %+v", rec)
		}
		for _, q := range []string{"peanuts", "Oslo", "peanuts Oslo platform", "allergy food"} {
			for _, mode := range []string{"fulltext", "hybrid"} {
				res := e.do(t, "POST", "/v1/memories/search", map[string]any{"subject_id": "erin", "query": q, "mode": mode}, e.a)
				if hits := decodeAs[wireList](t, res, 200).Items; len(hits) != 0 {
					t.Fatalf("forget answered success but search %q (%s) still finds %+v", q, mode, hits)
				}
			}
		}
		if got := e.list(t, e.a, "subject_id=erin"); len(got) != 0 {
			t.Fatalf("GET after forget: %+v", got)
		}
		expectProblem(t, e.do(t, "GET", "/v1/memories/"+a.MemoryID, nil, e.a), 404, "memory-not-found")
		if n, err := e.eng.Memory.Store().ProjectionRows(ctx, e.tenantA, "erin"); err != nil || n != 0 {
			t.Fatalf("projection rows after forget: %d %v", n, err)
		}
		if n, err := e.eng.Memory.Store().ProjectionRows(ctx, e.tenantA, "frank"); err != nil || n == 0 {
			t.Fatalf("another subject's projection rows: %d %v", n, err)
		}
		if p := decodeAs[memory.Profile](t, e.do(t, "GET", "/v1/subjects/erin/profile", nil, e.a), 200); p.Claims != 0 {
			t.Fatalf("profile after forget: %+v", p)
		}
		// Re-ingesting the old source is blocked by the tombstone.
		res = e.do(t, "POST", "/v1/memories", claimBody("erin", "allergy.food", "Peanuts", "m-1"), e.a)
		schemas.validate(t, "Problem", res.body)
		p := expectProblem(t, res, 422, "memory-forgotten")
		if p.Outcome != "refused" || p.Reason == "" {
			t.Fatalf("tombstone refusal without outcome and reason: %s", res.body)
		}
		if got := e.list(t, e.a, "subject_id=erin"); len(got) != 0 {
			t.Fatalf("a tombstoned claim came back: %+v", got)
		}
		// Another value of a forgotten key is a new fact and may be kept.
		e.add(t, e.a, claimBody("erin", "allergy.food", "shellfish", "m-5"), 201)
	})
}

// TestMemoryFindableLater: a claim found at once is still found seconds
// later (the failure users report: findable at once, gone a few seconds on).
func TestMemoryFindableLater(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		e := newMemEnv(t, backend, memory.Options{})
		c := e.add(t, e.a, claimBody("gina", "dislikes", "mugs with slogans", "m-1"), 201)
		check := func(when string) {
			t.Helper()
			if hits := e.search(t, e.a, "gina", "slogans mugs").Items; len(hits) != 1 || hits[0].MemoryID != c.MemoryID {
				t.Fatalf("search %s: %+v", when, hits)
			}
			if got := e.list(t, e.a, "subject_id=gina"); len(got) != 1 {
				t.Fatalf("GET %s: %+v", when, got)
			}
		}
		check("at once")
		time.Sleep(2500 * time.Millisecond)
		check("2.5 s later")
	})
}

// testExtractor is an in-process stand-in for a model: it states a
// candidate for "I live in X", "I like X" and (as a model's inference)
// "I feel X", and skips every other message with a reason.
type testExtractor struct{}

func (testExtractor) Name() string { return "test-rules@1" }

func (testExtractor) Extract(_ context.Context, msgs []memory.Message) (memory.Extraction, error) {
	var ex memory.Extraction
	for _, m := range msgs {
		cand := func(key, category, kind, by, v string) memory.Candidate {
			b, _ := json.Marshal(v)
			return memory.Candidate{Key: key, Value: b, Category: category, Kind: kind, ValidatedBy: by, Confidence: 0.9, MessageIDs: []string{m.ID}}
		}
		switch {
		case m.Role != "user":
			ex.Skipped = append(ex.Skipped, memory.SkippedMessage{MessageID: m.ID, Reason: "not a user message"})
		case strings.HasPrefix(m.Content, "I live in "):
			ex.Candidates = append(ex.Candidates, cand("home", "place", "statement", memory.ValidatedUserStated, strings.TrimPrefix(m.Content, "I live in ")))
		case strings.HasPrefix(m.Content, "I like "):
			ex.Candidates = append(ex.Candidates, cand("likes", "preference", "statement", memory.ValidatedUserStated, strings.TrimPrefix(m.Content, "I like ")))
		case strings.HasPrefix(m.Content, "I feel "):
			ex.Candidates = append(ex.Candidates, cand("mood", "mood", "inference", memory.ValidatedModelInferred, strings.TrimPrefix(m.Content, "I feel ")))
		default:
			ex.Skipped = append(ex.Skipped, memory.SkippedMessage{MessageID: m.ID, Reason: "no explicit statement"})
		}
	}
	return ex, nil
}

type wireExtract struct {
	Items []struct {
		Candidate memory.Candidate `json:"candidate"`
		Outcome   string           `json:"outcome"`
		Reason    string           `json:"reason"`
		MemoryID  string           `json:"memory_id"`
	} `json:"items"`
	Skipped []struct {
		MessageID string `json:"message_id"`
		Reason    string `json:"reason"`
	} `json:"skipped"`
	Extractor string `json:"extractor"`
	Applied   bool   `json:"applied"`
}

// accounted checks every input message is in an item or in skipped: an
// extraction never silently drops part of its input.
func (x wireExtract) accounted(t testing.TB, msgIDs ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, it := range x.Items {
		if it.Outcome == "" || (it.Outcome == "refused" && it.Reason == "") {
			t.Errorf("item without an outcome or a reason: %+v", it)
		}
		for _, id := range it.Candidate.MessageIDs {
			seen[id] = true
		}
	}
	for _, s := range x.Skipped {
		if s.Reason == "" {
			t.Errorf("skipped %s without a reason", s.MessageID)
		}
		seen[s.MessageID] = true
	}
	for _, id := range msgIDs {
		if !seen[id] {
			t.Errorf("message %s is in no item and not skipped: silently dropped (%+v)", id, x)
		}
	}
}

// TestMemoryExtract: every message is accounted for; a dry run writes
// nothing, apply writes what policy keeps, a model's inference is refused
// with its reason, and an extraction on a server without an extractor is 422.
func TestMemoryExtract(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		e := newMemEnv(t, backend, memory.Options{Extractor: testExtractor{}})
		schemas := compileOpenAPI(t, e.testEnv)
		msgs := []map[string]any{
			{"id": "u1", "role": "user", "content": "I live in Saint Petersburg"},
			{"id": "a1", "role": "assistant", "content": "Nice city!"},
			{"id": "u2", "role": "user", "content": "I like green tea"},
			{"id": "u3", "role": "user", "content": "I feel tired"},
			{"id": "u4", "role": "user", "content": "what's the weather"},
		}
		all := []string{"u1", "a1", "u2", "u3", "u4"}
		res := e.do(t, "POST", "/v1/memories/extract", map[string]any{"subject_id": "hana", "messages": msgs}, e.a)
		schemas.validate(t, "MemoryExtractResult", res.body)
		dry := decodeAs[wireExtract](t, res, 200)
		dry.accounted(t, all...)
		if dry.Applied || dry.Extractor != "test-rules@1" || len(dry.Items) != 3 || len(dry.Skipped) != 2 {
			t.Fatalf("dry run: %+v", dry)
		}
		if got := e.list(t, e.a, "subject_id=hana"); len(got) != 0 {
			t.Fatalf("a dry run wrote %+v", got)
		}
		applied := decodeAs[wireExtract](t, e.do(t, "POST", "/v1/memories/extract", map[string]any{"subject_id": "hana", "messages": msgs, "apply": true, "source_type": "message", "source_id": "session-7"}, e.a), 200)
		applied.accounted(t, all...)
		outcomes := map[string]string{}
		for _, it := range applied.Items {
			outcomes[it.Candidate.Key] = it.Outcome
			if (it.Outcome == "added") != (it.MemoryID != "") {
				t.Errorf("item %+v: memory_id iff added", it)
			}
		}
		if outcomes["home"] != "added" || outcomes["likes"] != "added" || outcomes["mood"] != "refused" {
			t.Fatalf("apply outcomes: %v", outcomes)
		}
		got := e.list(t, e.a, "subject_id=hana")
		if len(got) != 2 || got[0].Provenance.SourceID != "session-7" || got[0].Provenance.Extractor != "test-rules@1" || len(got[0].Provenance.MessageIDs) != 1 {
			t.Fatalf("claims after apply: %+v", got)
		}
		// Again: duplicates merge, nothing piles up.
		again := decodeAs[wireExtract](t, e.do(t, "POST", "/v1/memories/extract", map[string]any{"subject_id": "hana", "messages": msgs, "apply": true}, e.a), 200)
		for _, it := range again.Items {
			if it.Candidate.Key != "mood" && it.Outcome != "merged" {
				t.Errorf("re-extracted %s: %s", it.Candidate.Key, it.Outcome)
			}
		}
		if got := e.list(t, e.a, "subject_id=hana"); len(got) != 2 {
			t.Fatalf("claims after a second apply: %+v", got)
		}
		expectProblem(t, e.do(t, "POST", "/v1/memories/extract", map[string]any{"subject_id": "hana", "messages": []any{}}, e.a), 422, "invalid-request")
		expectProblem(t, e.do(t, "POST", "/v1/memories/extract", map[string]any{"subject_id": "hana", "messages": []any{map[string]any{"Role": "user", "content": "x"}}}, e.a), 400, "invalid-request")
		// What would refuse every candidate refuses the request (it answered
		// 200 with each item refused), and nothing is written.
		moved := []any{map[string]any{"role": "user", "content": "I moved to Oslo last year."}}
		for _, bad := range []map[string]any{
			{"run_id": strings.Repeat("r", 300)},
			{"source_id": strings.Repeat("s", 300)},
			{"consent_basis": strings.Repeat("c", 5000)},
			{"messages": []any{map[string]any{"role": "USER", "content": "I moved to Oslo last year."}}},
			{"messages": []any{map[string]any{"role": "user"}}},
		} {
			body := map[string]any{"subject_id": "oslo", "messages": moved, "apply": true}
			for k, v := range bad {
				body[k] = v
			}
			expectProblem(t, e.do(t, "POST", "/v1/memories/extract", body, e.a), 422, "invalid-request")
		}
		if got := e.list(t, e.a, "subject_id=oslo"); len(got) != 0 {
			t.Fatalf("refused extractions wrote %+v", got)
		}
	})
	t.Run("no extractor", func(t *testing.T) {
		e := newMemEnv(t, "memstore", memory.Options{})
		expectProblem(t, e.do(t, "POST", "/v1/memories/extract", map[string]any{"subject_id": "s", "messages": []any{map[string]any{"role": "user", "content": "I like tea"}}}, e.a), 422, "extractor-not-configured")
	})
}

// TestMemoryPolicy: provenance is required, a personal namespace needs a
// consent basis, a model's guess is refused with its reason, a sensitive
// category is held until confirmed or rejected. Refusals write nothing.
func TestMemoryPolicy(t *testing.T) {
	forEachMemoryBackend(t, func(t *testing.T, backend string) {
		e := newMemEnv(t, backend, memory.Options{})
		schemas := compileOpenAPI(t, e.testEnv)
		noProv := map[string]any{"subject_id": "ivan", "key": "home", "value": "Riga"}
		p := expectProblem(t, e.do(t, "POST", "/v1/memories", noProv, e.a), 422, "memory-provenance-required")
		if p.Outcome != "refused" {
			t.Fatalf("no provenance: %+v", p)
		}
		expectProblem(t, e.do(t, "POST", "/v1/memories", with(noProv, "provenance", map[string]any{"source_type": "message", "validated_by": "user_stated"}), e.a), 422, "memory-provenance-required")

		res := e.do(t, "PUT", "/v1/memory-namespaces/health-notes", map[string]any{"personal": true, "ttl_seconds": 3600}, e.a)
		schemas.validate(t, "MemoryNamespace", res.body)
		if ns := decodeAs[server.MemoryNamespace](t, res, 200); !ns.Personal || ns.TTLSeconds != 3600 || ns.Namespace != "health-notes" {
			t.Fatalf("declare: %+v", ns)
		}
		if ns := decodeAs[server.MemoryNamespace](t, e.do(t, "GET", "/v1/memory-namespaces/health-notes", nil, e.a), 200); !ns.Personal {
			t.Fatalf("read back: %+v", ns)
		}
		if ns := decodeAs[server.MemoryNamespace](t, e.do(t, "GET", "/v1/memory-namespaces/health-notes", nil, e.b), 200); ns.Personal {
			t.Fatalf("tenant B sees A's policy: %+v", ns)
		}
		personal := with(claimBody("ivan", "diet", "vegetarian", "m-1"), "namespace", "health-notes")
		p = expectProblem(t, e.do(t, "POST", "/v1/memories", personal, e.a), 422, "memory-consent-required")
		if p.Outcome != "refused" || p.Reason == "" {
			t.Fatalf("no consent: %+v", p)
		}
		c := e.add(t, e.a, with(personal, "consent_basis", "user opted in 2026-05-01"), 201)
		if c.ExpiresAt == nil {
			t.Fatalf("the namespace TTL was not applied: %+v", c)
		}

		guess := claimBody("ivan", "income", "high", "m-2")
		guess["provenance"].(map[string]any)["validated_by"] = "model_inferred"
		res = e.do(t, "POST", "/v1/memories", guess, e.a)
		p = expectProblem(t, res, 422, "memory-refused")
		if p.Outcome != "refused" || !strings.Contains(p.Reason, "inferred") {
			t.Fatalf("a model's guess: %s", res.body)
		}

		held := e.add(t, e.a, with(claimBody("ivan", "condition", "asthma", "m-3"), "category", "health"), 201)
		other := e.add(t, e.a, with(claimBody("ivan", "religion", "none", "m-4"), "category", "religion"), 201)
		if held.Outcome != "held" || held.Status != "held" || held.Reason == "" {
			t.Fatalf("sensitive: %+v", held)
		}
		res = e.do(t, "GET", "/v1/memories/held?subject_id=ivan", nil, e.a)
		schemas.validate(t, "MemoryList", res.body)
		if got := ids(decodeAs[wireList](t, res, 200).Items); !slices.Equal(got, []string{held.MemoryID, other.MemoryID}) {
			t.Fatalf("held: %v", got)
		}
		for _, c := range e.list(t, e.a, "subject_id=ivan") {
			if c.Key == "condition" || c.Key == "religion" || c.Key == "income" {
				t.Fatalf("a held or refused claim is served: %+v", c)
			}
		}
		res = e.do(t, "POST", "/v1/memories/"+held.MemoryID+"/confirm", nil, e.a)
		schemas.validate(t, "MemoryWriteResult", res.body)
		if got := decodeAs[wireClaim](t, res, 200); got.Status != "current" || got.Outcome != "added" {
			t.Fatalf("confirm: %+v", got)
		}
		expectProblem(t, e.do(t, "POST", "/v1/memories/"+held.MemoryID+"/confirm", nil, e.a), 409, "memory-conflict")
		expectProblem(t, e.do(t, "POST", "/v1/memories/"+other.MemoryID+"/confirm", map[string]any{"really": true}, e.a), 400, "invalid-request")
		if got := decodeAs[wireClaim](t, e.do(t, "POST", "/v1/memories/"+other.MemoryID+"/reject", map[string]any{"reason": "not asked"}, e.a), 200); got.Status != "rejected" {
			t.Fatalf("reject: %+v", got)
		}
		expectProblem(t, e.do(t, "POST", "/v1/memories/"+other.MemoryID+"/reject", nil, e.a), 409, "memory-conflict")
		if got := decodeAs[wireList](t, e.do(t, "GET", "/v1/memories/held?subject_id=ivan", nil, e.a), 200).Items; len(got) != 0 {
			t.Fatalf("held after confirm and reject: %+v", got)
		}
		keys := map[string]bool{}
		for _, c := range e.list(t, e.a, "subject_id=ivan") {
			keys[c.Key] = true
		}
		if !keys["condition"] || keys["religion"] || keys["income"] || !keys["diet"] {
			t.Fatalf("served keys: %v", keys)
		}
		res = e.do(t, "GET", "/v1/subjects/ivan/profile", nil, e.a)
		schemas.validate(t, "MemoryProfile", res.body)
		prof := decodeAs[memory.Profile](t, res, 200)
		if prof.Claims != 2 || len(prof.Namespaces) != 2 || prof.Tokens == 0 {
			t.Fatalf("profile: %+v", prof)
		}
		for _, ns := range prof.Namespaces {
			for _, it := range ns.Items {
				if it.Provenance.SourceType == "" || it.Provenance.SourceID == "" || it.Provenance.ValidatedBy == "" {
					t.Fatalf("profile item without its source: %+v", it)
				}
			}
		}
		// Only an admin declares a namespace policy; a reader may search but not write.
		const wk, rk = "memory-writer-key-0123456789", "memory-reader-key-0123456789"
		w := serveEngine(t, e.eng, wk+"="+e.tenantA+":writer,"+rk+"="+e.tenantA+":reader", wk)
		expectProblem(t, w.do(t, "PUT", "/v1/memory-namespaces/open", map[string]any{"personal": false}, map[string]string{"Authorization": "Bearer " + wk}), 403, "forbidden")
		reader := map[string]string{"Authorization": "Bearer " + rk}
		if hits := decodeAs[wireList](t, w.do(t, "POST", "/v1/memories/search", map[string]any{"subject_id": "ivan", "query": "asthma"}, reader), 200).Items; len(hits) != 1 {
			t.Fatalf("a reader's search: %+v", hits)
		}
		expectProblem(t, w.do(t, "POST", "/v1/memories", claimBody("ivan", "x", "y", "m"), reader), 403, "forbidden")
	})
}

// TestMemorySearchShape: hits carry provenance and score parts; a bad
// mode or k is 422, an unknown field 400.
func TestMemorySearchShape(t *testing.T) {
	e := newMemEnv(t, "memstore", memory.Options{})
	schemas := compileOpenAPI(t, e.testEnv)
	for i, v := range []string{"green tea", "black coffee", "green apples"} {
		e.add(t, e.a, claimBody("jo", fmt.Sprintf("likes.%d", i), v, fmt.Sprintf("m-%d", i)), 201)
	}
	res := e.do(t, "POST", "/v1/memories/search", map[string]any{"subject_id": "jo", "query": "green", "k": 5, "half_life_seconds": 86400}, e.a)
	schemas.validate(t, "MemorySearchResult", res.body)
	var out struct {
		Items []struct {
			MemoryID   string            `json:"memory_id"`
			Provenance memory.Provenance `json:"provenance"`
			Score      float64           `json:"score"`
			Parts      memory.ScoreParts `json:"score_parts"`
		} `json:"items"`
		Mode string `json:"mode"`
	}
	if err := json.Unmarshal(res.body, &out); err != nil || res.status != 200 {
		t.Fatalf("%d %s", res.status, res.body)
	}
	if len(out.Items) != 2 || out.Mode != "fulltext" {
		t.Fatalf("search: %s", res.body)
	}
	for _, h := range out.Items {
		if h.Provenance.SourceID == "" || h.Score <= 0 || h.Parts.FulltextRank == 0 || h.Parts.Recency <= 0 || h.Parts.Recency > 1 {
			t.Fatalf("hit without provenance or score parts: %+v", h)
		}
	}
	for body, want := range map[string]int{
		`{"subject_id":"jo","query":"x","mode":"magic"}`:           422,
		`{"subject_id":"jo","query":"x","k":100000}`:               422,
		`{"subject_id":"jo","query":""}`:                           422,
		`{"subject_id":"jo","query":"x","half_life_seconds":-1}`:   422,
		`{"subject_id":"jo","query":"x","mode":"vector"}`:          422,
		`{"subject_id":"jo","Query":"x"}`:                          400,
		`{"subject_id":"jo","query":"x","k":"5"}`:                  400,
		`{"subject_id":"jo","query":"x","half_life_seconds":1e40}`: 400,
	} {
		expectProblem(t, e.do(t, "POST", "/v1/memories/search", body, e.a), want, "invalid-request")
	}
	// held is its own route, not a memory id.
	expectProblem(t, e.do(t, "GET", "/v1/memories/held", nil, e.a), 400, "invalid-request")
	expectProblem(t, e.do(t, "GET", "/v1/memories/search", nil, e.a), 404, "memory-not-found")
}

// TestMemoryNotConfigured: a server without a memory service answers the
// memory routes 404 not-found, and they stay in the API document.
func TestMemoryNotConfigured(t *testing.T) {
	st := memstore.New()
	eng, err := memento.New(memento.Stores{Runs: st, Ops: st, Sessions: st, Vault: st}, memento.Options{PII: memento.PIIConfig{Key: testenv.PIIKey}})
	if err != nil {
		t.Fatal(err)
	}
	e := serveEngineWith(t, eng, "", "", func(o *server.Options) { o.Memory = nil })
	p := expectProblem(t, e.do(t, "POST", "/v1/memories", claimBody("s", "k", "v", "m"), nil), 404, "not-found")
	if !strings.Contains(p.Detail, "not configured") {
		t.Fatalf("detail: %q", p.Detail)
	}
	expectProblem(t, e.do(t, "GET", "/v1/subjects/s/profile", nil, nil), 404, "not-found")
	found := false
	for _, rt := range e.srv.Routes() {
		found = found || rt.Pattern() == http.MethodPost+" /v1/memories"
	}
	if !found {
		t.Fatal("memory routes are not registered without a memory service")
	}
}
