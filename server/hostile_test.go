package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/server"
)

// TestHostileInput sends every route of the server's route table (so a new
// route is covered without touching this test) malformed, oversized and
// deeply nested bodies, NUL, invalid UTF-8 and lone surrogates in bodies,
// paths and queries, extreme numbers, and a wrong JSON type for every field
// of the route's request schema in the OpenAPI document, on every backend.
// No answer may be a 5xx or a panic, every 4xx is problem+json, and no
// refused request may change what the API shows (a digest of the runs,
// events, checkpoints, operations, approvals and sessions read over the API).
func TestHostileInput(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres", "redis"} {
		t.Run(backend, func(t *testing.T) { hostile(t, backend) })
	}
}

func hostile(t *testing.T, backend string) {
	ctx := context.Background()
	// Shared backends refuse to start without a vault key.
	cfg := memento.Config{DataDir: t.TempDir(), PII: memento.PIIConfig{Key: testenv.PIIKey}}
	tenant := testenv.RandomID("t-")
	switch backend {
	case "postgres":
		cfg.PostgresURL = testenv.PostgresURL(t)
	case "redis":
		rdb, u := testenv.RedisClient(t)
		cfg.RedisURL = u
		testenv.CleanupRedisKeys(t, rdb, "memento:{t:"+tenant+":*")
	}
	cfg.Memory.Extractor = testExtractor{} // so extraction is walked too
	eng, err := memento.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	const key = "hostile-admin-key-0123456789"
	e := serveEngine(t, eng, key+"="+tenant+":admin", key)
	hdr := map[string]string{"Authorization": "Bearer " + key}

	// A fixture every route can reach: a leased run with a commit, a
	// checkpoint, an operation and an approval; a session with messages.
	r, _, err := e.c.CreateRun(ctx, run.CreateRequest{RunID: "h", WorkflowName: "w", WorkflowVersion: "1", State: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.c.AcquireLease(ctx, r.RunID, "worker", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Commit(ctx, "h", commitReq(1, l, "s1", `{"a":2}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreateCheckpoint(ctx, "h", "cp", 0); err != nil {
		t.Fatal(err)
	}
	fixture := []struct{ method, path, body string }{
		{"POST", "/v1/runs/h/operations", `{"operation_id":"op-1","step_id":"s1","tool_name":"t","request_digest":"d1"}`},
		{"POST", "/v1/runs/h/approvals", `{"approval_id":"ap-1","step_id":"s1","request_digest":"d1","ttl_ms":3600000}`},
		{"PUT", "/v1/sessions/s", `{"user_id":"u","state":{"k":"v"}}`},
		{"POST", "/v1/sessions/s/messages?user_id=u", `{"messages":[{"role":"user","content":"hello"}]}`},
	}
	for _, f := range fixture {
		if res := e.do(t, f.method, f.path, f.body, hdr); res.status >= 300 {
			t.Fatalf("fixture %s %s: %d %s", f.method, f.path, res.status, res.body)
		}
	}
	params := map[string]string{"run_id": "h", "session_id": "s", "operation_id": "op-1", "approval_id": "ap-1",
		"transition": "start", "ref": "pii_0123456789abcdef", "workflow_name": "w", "version": "1",
		"subject_id": "sub", "namespace": "ns", "memory_id": "none"}
	// Memory: a current claim, a held one, a declared namespace.
	if eng.Memory == nil {
		t.Fatalf("the %s engine has no long-term memory", backend)
	}
	for i, f := range []struct{ method, path, body string }{
		{"PUT", "/v1/memory-namespaces/ns", `{"personal":false,"sensitive":false,"ttl_seconds":0}`},
		{"POST", "/v1/memories", `{"subject_id":"sub","namespace":"ns","key":"k","value":"tea","provenance":{"source_type":"message","source_id":"m1","validated_by":"user_stated"}}`},
		{"POST", "/v1/memories", `{"subject_id":"sub","key":"h","value":"x","category":"health","provenance":{"source_type":"message","source_id":"m2","validated_by":"user_stated"}}`},
	} {
		res := e.do(t, f.method, f.path, f.body, hdr)
		if res.status >= 300 {
			t.Fatalf("memory fixture %s %s: %d %s", f.method, f.path, res.status, res.body)
		}
		if i == 1 {
			var c struct {
				MemoryID string `json:"memory_id"`
			}
			_ = json.Unmarshal(res.body, &c)
			params["memory_id"] = c.MemoryID
		}
	}
	// Retrieval: a document only a group reads, a member, a snapshot.
	if eng.Retrieval == nil {
		t.Fatalf("the %s engine has no retrieval", backend)
	}
	params["document_id"], params["group"], params["principal"] = "doc", "g", "user:u"
	for _, f := range []struct{ method, path, body string }{
		{"PUT", "/v1/documents/doc", `{"source_uri":"s3://d","source_version":"e1","content":"hostile input fixture text","acl":["group:g"]}`},
		{"PUT", "/v1/groups/g/members/user:u", ``},
		{"POST", "/v1/retrieve", `{"query":"fixture text","principal":"user:u"}`},
	} {
		var b any
		if f.body != "" {
			b = f.body
		}
		res := e.do(t, f.method, f.path, b, hdr)
		if res.status >= 300 {
			t.Fatalf("retrieval fixture %s %s: %d %s", f.method, f.path, res.status, res.body)
		}
		var snap struct {
			SnapshotID string `json:"snapshot_id"`
		}
		if json.Unmarshal(res.body, &snap) == nil && snap.SnapshotID != "" {
			params["snapshot_id"] = snap.SnapshotID
		}
	}
	memoryReads := []string{"/v1/documents/doc", "/v1/retrieval-snapshots/" + params["snapshot_id"], "/v1/invalidations?limit=1000", "/v1/memories?subject_id=sub&limit=1000", "/v1/memories/held?subject_id=sub", "/v1/memories/" + params["memory_id"],
		"/v1/memories/" + params["memory_id"] + "/history", "/v1/subjects/sub/profile", "/v1/memory-namespaces/ns"}
	// A summary of the run's events, for the summary routes.
	res := e.do(t, "POST", "/v1/runs/h/summaries", `{}`, hdr)
	var sum struct {
		SummaryID string `json:"summary_id"`
	}
	if res.status != 201 || json.Unmarshal(res.body, &sum) != nil || sum.SummaryID == "" {
		t.Fatalf("fixture summary: %d %s", res.status, res.body)
	}
	params["summary_id"] = sum.SummaryID

	digest := func() string {
		h := sha256.New()
		for _, p := range append([]string{"/v1/runs?limit=1000", "/v1/runs/h", "/v1/runs/h/events?limit=1000", "/v1/runs/h/checkpoints",
			"/v1/runs/h/operations", "/v1/runs/h/approvals", "/v1/operations/op-1", "/v1/approvals/ap-1",
			"/v1/sessions/s?user_id=u", "/v1/sessions/s/messages?user_id=u&limit=1000", "/v1/sessions?user_id=u",
			"/v1/runs/h/summaries?limit=1000"}, memoryReads...) {
			res := e.do(t, "GET", p, nil, hdr)
			fmt.Fprintf(h, "%s %d %s\n", p, res.status, stripVolatile(res.body))
		}
		return hex.EncodeToString(h.Sum(nil))
	}

	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if res := e.do(t, "GET", "/openapi.json", nil, nil); res.status != 200 || json.Unmarshal(res.body, &doc) != nil {
		t.Fatalf("openapi: %d", res.status)
	}

	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	bodies := []string{
		`{"a":`, `{"a":1}}`, `{"a":1}{}`, `[]`, `null`, `"s"`, `1e400`, `{`, `}`, ``,
		deep, `{"a":` + strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 101),
		`{"a":"x` + "\x00" + `"}`, `{"a":"\u0000"}`, `{"\u0000":1}`, "{\"a\":\"\xff\xfe\"}", "{\"\xc3\":1}",
		`{"a":"\ud800"}`, `{"a":"\udc00\ud800"}`, `{"a":1,"a":2}`,
		`{"a":"` + strings.Repeat("x", 3<<20) + `"}`, // over every body limit
	}
	values := []string{`"x"`, `""`, `true`, `null`, `[]`, `{}`, `[{}]`, `2147483648`, `-2147483649`, `9223372036854775808`,
		`-9223372036854775809`, `1e400`, `-0`, `1.7976931348623157e308`, `4.9e-324`, `-1`, `0.5`, `"\u0000"`, `"\ud800"`,
		`"` + strings.Repeat("k", 300) + `"`, `"1970-01-01T00:00:00Z"`, `"9999-12-31T23:59:59.999999999Z"`}
	queries := []string{"limit=2147483648", "limit=1e400", "limit=-0", "limit=-1", "limit=9223372036854775808",
		"cursor=%00", "cursor=%ff", "cursor=%ed%a0%80", "cursor=" + strings.Repeat("c", 2000), "after=9223372036854775808",
		"after_seq=-1", "since=%ff", "since=99999-01-01T00:00:00Z", "status=%00", "workflow=%ff", "user_id=%00",
		"user_id=%ff", "user_id=" + strings.Repeat("u", 300), "limit=1&limit=2", "%zz", "a=%"}
	pathValues := []string{"%00", "%ff", "%ed%a0%80", "%c0%80", strings.Repeat("p", 300), "..", "%2F", "a%20b"}

	type hreq struct{ method, path, body, why string }
	base := digest()
	sent := 0
	// send answers whether a write was accepted; strict checks the digest
	// after each refused one.
	send := func(q hreq, strict bool) (accepted bool) {
		t.Helper()
		var b any
		if q.body != "" || q.method != "GET" {
			b = q.body
		}
		res, err := e.send(q.method, q.path, b, hdr)
		if err != nil {
			t.Fatalf("%s %s (%s): %v", q.method, q.path, q.why, err)
		}
		sent++
		if res.status >= 500 {
			t.Fatalf("%s %.120s (%s): %d %s", q.method, q.path, q.why, res.status, truncate(res.body))
		}
		if res.status >= 400 {
			if ct := res.header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("%s %.120s (%s): %d with Content-Type %q", q.method, q.path, q.why, res.status, ct)
			}
			if strict {
				if d := digest(); d != base {
					t.Fatalf("%s %.120s (%s) was refused with %d but changed what the API shows: %s", q.method, q.path, q.why, res.status, truncate(res.body))
				}
			}
			return false
		}
		if q.method == "GET" {
			return false
		}
		if strict {
			base = digest()
		}
		return true
	}
	// group sends reqs and checks the digest once at the end; when a write
	// was accepted (or something changed), it sends them again one by one,
	// checking after each refused one.
	group := func(reqs []hreq) {
		t.Helper()
		accepted := false
		for _, q := range reqs {
			accepted = send(q, false) || accepted
		}
		if d := digest(); d == base {
			return
		} else if !accepted && d != base {
			t.Logf("a group of refused requests to %s %s changed what the API shows; finding which", reqs[0].method, reqs[0].path)
		}
		base = digest()
		for _, q := range reqs {
			send(q, true)
		}
		if !accepted && digest() != base {
			t.Fatalf("refused requests to %s %s changed what the API shows", reqs[0].method, reqs[0].path)
		}
	}

	routes := e.srv.Routes()
	if len(routes) < 20 {
		t.Fatalf("only %d routes", len(routes))
	}
	// Deletions last, so the fixture they may remove serves the others first.
	slices.SortStableFunc(routes, func(a, b server.Route) int {
		last := func(r server.Route) bool { return r.Method == "DELETE" || strings.HasSuffix(r.Path, "/close") }
		switch {
		case last(a) && !last(b):
			return 1
		case !last(a) && last(b):
			return -1
		}
		return 0
	})
	for _, rt := range routes {
		if rt.Method == "GET" && rt.Public {
			continue
		}
		path := fillPath(rt.Path, params)
		if strings.HasPrefix(rt.Path, "/v1/sessions") {
			path += "?user_id=u"
		}
		var reqs []hreq
		for _, pv := range pathValues {
			for name := range params {
				if strings.Contains(rt.Path, "{"+name+"}") {
					bad := map[string]string{}
					for k, v := range params {
						bad[k] = v
					}
					bad[name] = pv
					reqs = append(reqs, hreq{rt.Method, fillPath(rt.Path, bad), `{}`, "path " + name + "=" + pv})
				}
			}
		}
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		for _, q := range queries {
			reqs = append(reqs, hreq{rt.Method, path + sep + q, `{}`, "query " + q})
		}
		group(reqs)
		if rt.Method == "GET" {
			continue
		}
		reqs = nil
		for _, b := range bodies {
			reqs = append(reqs, hreq{rt.Method, path, b, "body " + fmt.Sprintf("%.40q", b)})
		}
		group(reqs)
		for _, field := range requestFields(doc.Paths, doc.Components.Schemas, rt) {
			reqs = nil
			for _, v := range values {
				reqs = append(reqs, hreq{rt.Method, path, field.wrap(v), "field " + field.name + "=" + v})
			}
			group(reqs)
		}
	}
	if strings.Contains(e.logs.String(), "panic serving request") {
		t.Fatal("a request panicked; see the server log")
	}
	t.Logf("%s: %d hostile requests over %d routes", backend, sent, len(routes))
}

// stripVolatile drops what changes by itself between two reads (a
// session's last activity and expiry slide on access on some backends).
func stripVolatile(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "request_id")   // a problem's, new on every answer
			delete(x, "generated_at") // a memory profile's, new when rebuilt
			for _, k := range []string{"last_activity_at", "expires_at", "ttl_seconds"} {
				if _, ok := x["session_id"]; ok {
					delete(x, k)
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	out, _ := json.Marshal(v)
	return out
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

func fillPath(pattern string, params map[string]string) string {
	var out []string
	for seg := range strings.SplitSeq(pattern, "/") {
		if len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}' {
			v, ok := params[strings.TrimSuffix(seg[1:len(seg)-1], "...")]
			if !ok {
				v = "x"
			}
			out = append(out, v)
			continue
		}
		out = append(out, seg)
	}
	return strings.Join(out, "/")
}

// hostileField is one member of a request schema, at most one object deep.
type hostileField struct {
	name string
	wrap func(v string) string
}

// requestFields lists the members of the route's JSON request schema, and
// those of member objects one level down, from the OpenAPI document.
func requestFields(paths map[string]map[string]json.RawMessage, schemas map[string]json.RawMessage, rt server.Route) []hostileField {
	method, path := rt.Method, rt.Path
	op, ok := paths[path][strings.ToLower(method)]
	if !ok {
		return nil
	}
	var o struct {
		RequestBody struct {
			Content map[string]struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"content"`
		} `json:"requestBody"`
	}
	if json.Unmarshal(op, &o) != nil {
		return nil
	}
	var schema json.RawMessage
	for _, c := range o.RequestBody.Content {
		schema = c.Schema
	}
	props := schemaProps(schemas, schema)
	var out []hostileField
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		n := n
		out = append(out, hostileField{n, func(v string) string { return `{"` + n + `":` + v + `}` }})
		sub := schemaProps(schemas, props[n])
		for s := range sub {
			s := s
			out = append(out, hostileField{n + "." + s, func(v string) string { return `{"` + n + `":{"` + s + `":` + v + `}}` }})
		}
	}
	return out
}

func schemaProps(schemas map[string]json.RawMessage, schema json.RawMessage) map[string]json.RawMessage {
	var s struct {
		Ref        string                     `json:"$ref"`
		Properties map[string]json.RawMessage `json:"properties"`
		Items      json.RawMessage            `json:"items"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return nil
	}
	if s.Ref != "" {
		name := s.Ref[strings.LastIndexByte(s.Ref, '/')+1:]
		return schemaProps(schemas, schemas[name])
	}
	if len(s.Properties) == 0 && len(s.Items) > 0 && !bytes.Equal(s.Items, schema) {
		return schemaProps(schemas, s.Items)
	}
	return s.Properties
}
