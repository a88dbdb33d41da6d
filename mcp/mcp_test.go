package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/internal/enginetest"
	"github.com/mementohq/memento/mcp"
	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/server"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/faultstore"
	"github.com/mementohq/memento/store/memstore"
)

var backends = []string{"sqlite", "postgres"}

func forEachBackend(t *testing.T, fn func(t *testing.T, eng *memento.Engine)) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { fn(t, enginetest.Open(t, b, memento.Config{})) })
	}
}

func newServer(eng *memento.Engine) *mcp.Server {
	return mcp.New(mcp.Services{Runs: eng.Runs, Sessions: eng.Sessions, Memory: eng.Memory, Context: eng.Context, Retrieval: eng.Retrieval},
		mcp.Options{Classify: server.ClassifyError})
}

// connect is an SDK client session to s bound to b, over in-memory transports.
func connect(t *testing.T, s *mcp.Server, b mcp.Binding) *gomcp.ClientSession {
	t.Helper()
	ct, st := gomcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Server(b).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs
}

// result is one tool call's answer: the structured output or the tool error.
type result struct {
	out map[string]any
	err *mcp.ToolError
}

func call(t *testing.T, cs *gomcp.ClientSession, name string, args any) result {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &gomcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content items, want 1", name, len(res.Content))
	}
	text := res.Content[0].(*gomcp.TextContent).Text
	if res.IsError {
		var body struct {
			Error mcp.ToolError `json:"error"`
		}
		if err := json.Unmarshal([]byte(text), &body); err != nil || body.Error.Type == "" {
			t.Fatalf("%s: a tool error not in the {\"error\": {type, detail}} shape: %s", name, text)
		}
		return result{err: &body.Error}
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("%s: result is not a JSON object: %s", name, text)
	}
	return result{out: out}
}

func ok(t *testing.T, r result, what string) map[string]any {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%s: tool error %s: %s", what, r.err.Type, r.err.Detail)
	}
	return r.out
}

func fails(t *testing.T, r result, kind, what string) {
	t.Helper()
	if r.err == nil {
		t.Fatalf("%s: succeeded with %v, want a %s tool error", what, r.out, kind)
	}
	if kind != "" && r.err.Type != kind {
		t.Fatalf("%s: tool error %s (%s), want %s", what, r.err.Type, r.err.Detail, kind)
	}
	if r.err.Detail == "" {
		t.Fatalf("%s: tool error %s without a detail the model can read", what, r.err.Type)
	}
}

var alice = mcp.Binding{Tenant: "t1", User: "alice"}

func TestToolsListed(t *testing.T) {
	eng := enginetest.Open(t, "sqlite", memento.Config{})
	cs := connect(t, newServer(eng), alice)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"session_get", "session_put", "session_patch", "session_delete", "message_append", "messages_list",
		"memory_search", "memory_get", "memory_add", "memory_forget", "context_build",
		"run_start", "run_get", "run_checkpoint", "run_restore", "documents_retrieve"}
	got := map[string]*gomcp.Tool{}
	for _, tl := range res.Tools {
		got[tl.Name] = tl
	}
	for _, n := range want {
		tl, found := got[n]
		if !found {
			t.Errorf("tool %s not listed", n)
			continue
		}
		if len(tl.Description) < 40 {
			t.Errorf("tool %s: description %q is too thin for a model", n, tl.Description)
		}
		schema, _ := json.Marshal(tl.InputSchema)
		var s struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		if err := json.Unmarshal(schema, &s); err != nil || s.Type != "object" || len(s.Properties) == 0 {
			t.Errorf("tool %s: input schema %s is not an object schema with properties", n, schema)
		}
		// A required argument is never null: the tools refuse it.
		for _, r := range s.Required {
			if p, _ := json.Marshal(s.Properties[r]); strings.Contains(string(p), `"null"`) {
				t.Errorf("tool %s: required %s allows null: %s", n, r, p)
			}
		}
		for _, forbidden := range []string{"user_id", "tenant_id", "subject_id", "principal"} {
			if _, has := s.Properties[forbidden]; has {
				t.Errorf("tool %s takes %s as an argument: bindings come from the connection", n, forbidden)
			}
		}
	}
	if len(res.Tools) != len(want) {
		t.Errorf("%d tools listed, want %d", len(res.Tools), len(want))
	}
}

func TestSessionTools(t *testing.T) {
	forEachBackend(t, func(t *testing.T, eng *memento.Engine) {
		cs := connect(t, newServer(eng), alice)
		put := ok(t, call(t, cs, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{"step": "start", "locale": "de"}}), "put")
		if put["created"] != true || put["user_id"] != "alice" {
			t.Fatalf("put: %v", put)
		}
		p := ok(t, call(t, cs, "session_patch", map[string]any{"session_id": "s1", "patch": map[string]any{"step": "profile", "locale": nil}}), "patch")
		st := p["state"].(map[string]any)
		if st["step"] != "profile" || st["locale"] != nil || p["revision"].(float64) != 2 {
			t.Fatalf("patch: %v", p)
		}
		fails(t, call(t, cs, "session_patch", map[string]any{"session_id": "s1", "patch": map[string]any{"step": "x"}, "expected_revision": 1}), "precondition-failed", "stale patch")
		// A TTL past the maximum is refused, even one whose Duration would
		// overflow into a short TTL; nothing is written.
		for _, ttl := range []int64{604801, 18446744074, 9223372037} {
			fails(t, call(t, cs, "session_put", map[string]any{"session_id": "s-ttl", "state": map[string]any{}, "ttl_seconds": ttl}), "invalid-request", "huge ttl")
		}
		fails(t, call(t, cs, "session_get", map[string]any{"session_id": "s-ttl"}), "session-not-found", "get after refused puts")
		a := ok(t, call(t, cs, "message_append", map[string]any{"session_id": "s1", "messages": []map[string]any{{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}}}), "append")
		if ms := a["messages"].([]any); len(ms) != 2 || ms[1].(map[string]any)["seq"].(float64) != 2 {
			t.Fatalf("append: %v", a)
		}
		// A call retried under its idempotency key appends nothing.
		keyed := map[string]any{"session_id": "s1", "idempotency_key": "turn-3", "messages": []map[string]any{{"role": "user", "content": "refund please"}}}
		k1 := ok(t, call(t, cs, "message_append", keyed), "keyed append")
		k2 := ok(t, call(t, cs, "message_append", keyed), "keyed append again")
		if k1["replayed"] != nil || k2["replayed"] != true || k2["message_count"].(float64) != 3 ||
			k2["messages"].([]any)[0].(map[string]any)["seq"].(float64) != 3 {
			t.Fatalf("keyed append then retry: %v / %v", k1, k2)
		}
		fails(t, call(t, cs, "message_append", map[string]any{"session_id": "s1", "idempotency_key": "turn-3", "messages": []map[string]any{{"role": "user", "content": "other"}}}),
			"idempotency-mismatch", "the key with other messages")
		l := ok(t, call(t, cs, "messages_list", map[string]any{"session_id": "s1"}), "list")
		if ms := l["messages"].([]any); len(ms) != 3 || ms[0].(map[string]any)["content"] != "hello" {
			t.Fatalf("list: %v", l)
		}
		g := ok(t, call(t, cs, "session_get", map[string]any{"session_id": "s1"}), "get")
		if g["state"].(map[string]any)["step"] != "profile" || g["message_count"].(float64) != 3 {
			t.Fatalf("get: %v", g)
		}
		if d := ok(t, call(t, cs, "session_delete", map[string]any{"session_id": "s1"}), "delete"); d["deleted"] != true {
			t.Fatalf("delete: %v", d)
		}
		fails(t, call(t, cs, "session_get", map[string]any{"session_id": "s1"}), "session-not-found", "get after delete")
		fails(t, call(t, cs, "messages_list", map[string]any{"session_id": "s1"}), "session-not-found", "messages after delete")
		fails(t, call(t, cs, "session_delete", map[string]any{"session_id": "s1"}), "session-not-found", "delete again")
	})
}

// TestOtherUsersSessionUnreachable: the user comes from the connection, so
// naming another user's session id reads nothing and changes nothing.
func TestOtherUsersSessionUnreachable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, eng *memento.Engine) {
		s := newServer(eng)
		a := connect(t, s, alice)
		b := connect(t, s, mcp.Binding{Tenant: "t1", User: "bob"})
		other := connect(t, s, mcp.Binding{Tenant: "t2", User: "alice"})
		ok(t, call(t, a, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{"secret": "alice's"}}), "put")
		ok(t, call(t, a, "message_append", map[string]any{"session_id": "s1", "messages": []map[string]any{{"role": "user", "content": "my secret"}}}), "append")
		for _, o := range []struct {
			name string
			cs   *gomcp.ClientSession
			user string
		}{{"another user", b, "bob"}, {"another tenant", other, "alice"}} {
			name, cs := o.name, o.cs
			fails(t, call(t, cs, "session_get", map[string]any{"session_id": "s1"}), "session-not-found", name+" get")
			fails(t, call(t, cs, "messages_list", map[string]any{"session_id": "s1"}), "session-not-found", name+" list")
			fails(t, call(t, cs, "session_patch", map[string]any{"session_id": "s1", "patch": map[string]any{"secret": "mine"}}), "session-not-found", name+" patch")
			fails(t, call(t, cs, "message_append", map[string]any{"session_id": "s1", "messages": []map[string]any{{"role": "user", "content": "x"}}}), "session-not-found", name+" append")
			fails(t, call(t, cs, "session_delete", map[string]any{"session_id": "s1"}), "session-not-found", name+" delete")
			// Smuggling a user through arguments is not something the schema takes.
			fails(t, call(t, cs, "session_get", map[string]any{"session_id": "s1", "user_id": "alice"}), "", name+" user_id argument")
			// A put either fails or makes a session of the caller's own; alice's is untouched (below).
			if r := call(t, cs, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{"secret": "mine"}}); r.err == nil && r.out["user_id"] != o.user {
				t.Fatalf("%s: put answered %v", name, r.out)
			}
		}
		g := ok(t, call(t, a, "session_get", map[string]any{"session_id": "s1"}), "get")
		if g["state"].(map[string]any)["secret"] != "alice's" || g["message_count"].(float64) != 1 {
			t.Fatalf("alice's session changed: %v", g)
		}
	})
}

// TestInputValidation: a wrong type, a missing field, an unknown field or
// an oversized value is a tool error the model can read, and writes nothing.
func TestInputValidation(t *testing.T) {
	eng := enginetest.Open(t, "sqlite", memento.Config{})
	cs := connect(t, newServer(eng), alice)
	ok(t, call(t, cs, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{"step": "a"}}), "put")
	big := strings.Repeat("x", mcp.DefaultMaxArgumentBytes)
	cases := []struct {
		name string
		tool string
		args any
	}{
		{"wrong type", "session_patch", map[string]any{"session_id": 5, "patch": map[string]any{"step": "b"}}},
		{"state not an object", "session_put", map[string]any{"session_id": "s1", "state": "b"}},
		{"missing field", "session_patch", map[string]any{"session_id": "s1"}},
		{"missing id", "session_put", map[string]any{"state": map[string]any{"step": "b"}}},
		{"unknown field", "session_patch", map[string]any{"session_id": "s1", "patch": map[string]any{"step": "b"}, "revision": 1}},
		{"oversized value", "session_patch", map[string]any{"session_id": "s1", "patch": map[string]any{"step": big}}},
		{"bad id", "session_put", map[string]any{"session_id": "a/b", "state": map[string]any{"step": "b"}}},
		{"negative ttl", "session_put", map[string]any{"session_id": "s1", "state": map[string]any{"step": "b"}, "ttl_seconds": -1}},
		{"null patch", "session_patch", map[string]any{"session_id": "s1", "patch": nil}},
		{"too many hits", "memory_search", map[string]any{"query": "x", "k": 1000}},
		{"no evidence", "memory_add", map[string]any{"namespace": "prefs", "key": "k", "value": "v", "session_id": "s1", "message_seqs": []int{}}},
		{"bad run name", "run_start", map[string]any{"run": "a b", "workflow": "w"}},
		{"budget missing", "context_build", map[string]any{"query": "x", "session_id": "s1"}},
		{"budget too small", "context_build", map[string]any{"query": "x", "session_id": "s1", "budget_tokens": 1}},
		{"session and run", "context_build", map[string]any{"query": "x", "session_id": "s1", "run": "r", "budget_tokens": 100}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kind := "invalid-request"
			if c.name == "budget too small" {
				kind = "context-budget-too-small"
			}
			r := call(t, cs, c.tool, c.args)
			fails(t, r, kind, c.name)
			if strings.Contains(r.err.Detail, "reflect") {
				t.Errorf("%s: the detail speaks Go: %s", c.name, r.err.Detail)
			}
		})
	}
	g := ok(t, call(t, cs, "session_get", map[string]any{"session_id": "s1"}), "get")
	if g["state"].(map[string]any)["step"] != "a" || g["revision"].(float64) != 1 {
		t.Fatalf("a refused call changed the session: %v", g)
	}
	if m := ok(t, call(t, cs, "memory_get", map[string]any{}), "memory_get")["memories"].([]any); len(m) != 0 {
		t.Fatalf("a refused call wrote memory: %v", m)
	}
}

func TestMemoryTools(t *testing.T) {
	forEachBackend(t, func(t *testing.T, eng *memento.Engine) {
		cs := connect(t, newServer(eng), alice)
		ok(t, call(t, cs, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{}}), "put")
		ok(t, call(t, cs, "message_append", map[string]any{"session_id": "s1", "messages": []map[string]any{
			{"role": "user", "content": "Please always answer me in German."},
			{"role": "assistant", "content": "You probably like coffee."}}}), "append")
		// Evidence must exist and be the user's.
		fails(t, call(t, cs, "memory_add", map[string]any{"namespace": "prefs", "key": "language", "value": "de", "session_id": "s1", "message_seqs": []int{9}}), "invalid-request", "missing message")
		fails(t, call(t, cs, "memory_add", map[string]any{"namespace": "prefs", "key": "drink", "value": "coffee", "session_id": "s1", "message_seqs": []int{2}}), "invalid-request", "assistant's guess")
		fails(t, call(t, cs, "memory_add", map[string]any{"namespace": "prefs", "key": "language", "value": "de", "session_id": "other", "message_seqs": []int{1}}), "session-not-found", "other session")
		// The claim must be in what the cited message says.
		fails(t, call(t, cs, "memory_add", map[string]any{"namespace": "profile", "key": "criminal_record", "value": "convicted of fraud", "session_id": "s1", "message_seqs": []int{1}}), "invalid-request", "a value the cited message does not hold")
		fails(t, call(t, cs, "memory_add", map[string]any{"namespace": "prefs", "key": "language", "value": "de", "session_id": "s1", "message_seqs": []int64{9223372036854775807}}), "invalid-request", "a seq past any session")
		// Sharing one word is not enough: a value with words, a number or a
		// negation the user did not say is not theirs, whatever its text says.
		fails(t, call(t, cs, "memory_add", map[string]any{"namespace": "prefs", "key": "language", "value": "hates German", "session_id": "s1", "message_seqs": []int{1}}), "invalid-request", "a word the user did not say")
		fails(t, call(t, cs, "memory_add", map[string]any{"namespace": "prefs", "key": "language", "value": "not German", "session_id": "s1", "message_seqs": []int{1}}), "invalid-request", "a negation the user did not say")
		fails(t, call(t, cs, "memory_add", map[string]any{"namespace": "prefs", "key": "budget", "value": "5000 EUR", "text": "answer in German", "session_id": "s1", "message_seqs": []int{1}}), "invalid-request", "a number the user did not say")
		// A dislike the user did not say, in the text, the key or a member
		// name, turns the fact around as a negation does.
		fails(t, call(t, cs, "memory_add", map[string]any{"namespace": "prefs", "key": "language", "value": "German", "text": "the user hates German", "session_id": "s1", "message_seqs": []int{1}}), "invalid-request", "a dislike in the text")
		fails(t, call(t, cs, "memory_add", map[string]any{"namespace": "prefs", "key": "dislikes", "value": "German", "session_id": "s1", "message_seqs": []int{1}}), "invalid-request", "a dislike in the key")
		fails(t, call(t, cs, "memory_add", map[string]any{"namespace": "prefs", "key": "language", "value": map[string]any{"hates": "German"}, "session_id": "s1", "message_seqs": []int{1}}), "invalid-request", "a dislike in a member name")
		fails(t, call(t, cs, "message_append", map[string]any{"session_id": "s1", "messages": []map[string]any{{"role": "wizard", "content": "hi"}}}), "invalid-request", "an unknown role")
		add := ok(t, call(t, cs, "memory_add", map[string]any{"namespace": "prefs", "key": "language", "value": "de", "text": "answers in German", "session_id": "s1", "message_seqs": []int{1}}), "add")
		m := add["memory"].(map[string]any)
		prov := m["provenance"].(map[string]any)
		if add["outcome"] != "added" || prov["source_id"] != "session:s1" || prov["validated_by"] != "user_stated" || prov["message_ids"].([]any)[0] != "1" {
			t.Fatalf("add: %v", add)
		}
		ok(t, call(t, cs, "message_append", map[string]any{"session_id": "s1", "messages": []map[string]any{{"role": "user", "content": "Actually, English please."}}}), "append")
		sup := ok(t, call(t, cs, "memory_add", map[string]any{"namespace": "prefs", "key": "language", "value": "en", "text": "answers in English", "session_id": "s1", "message_seqs": []int{3}}), "correct")
		if sup["outcome"] != "superseded" || sup["superseded"] != m["memory_id"] {
			t.Fatalf("correction: %v", sup)
		}
		got := ok(t, call(t, cs, "memory_get", map[string]any{"namespace": "prefs"}), "get")["memories"].([]any)
		if len(got) != 1 || got[0].(map[string]any)["value"] != "en" {
			t.Fatalf("current memories after correction: %v", got)
		}
		hits := ok(t, call(t, cs, "memory_search", map[string]any{"query": "which language English"}), "search")["hits"].([]any)
		if len(hits) != 1 || hits[0].(map[string]any)["value"] != "en" {
			t.Fatalf("search served %v, want only the current claim", hits)
		}
		// Another user of the tenant sees none of it.
		bob := connect(t, newServer(eng), mcp.Binding{Tenant: "t1", User: "bob"})
		if h := ok(t, call(t, bob, "memory_search", map[string]any{"query": "language English German"}), "bob search")["hits"].([]any); len(h) != 0 {
			t.Fatalf("bob found alice's memories: %v", h)
		}
		fails(t, call(t, cs, "memory_forget", map[string]any{"namespace": "prefs"}), "", "forget without a reason")
		f := ok(t, call(t, cs, "memory_forget", map[string]any{"reason": "user asked"}), "forget")
		if f["forgotten"].(float64) < 1 {
			t.Fatalf("forget: %v", f)
		}
		if h := ok(t, call(t, cs, "memory_search", map[string]any{"query": "language English"}), "search after forget")["hits"].([]any); len(h) != 0 {
			t.Fatalf("forgotten memories still found: %v", h)
		}
	})
}

func TestRunTools(t *testing.T) {
	forEachBackend(t, func(t *testing.T, eng *memento.Engine) {
		s := newServer(eng)
		cs := connect(t, s, alice)
		fails(t, call(t, cs, "run_restore", map[string]any{"run": "gift"}), "run-not-found", "restore before start")
		st := ok(t, call(t, cs, "run_start", map[string]any{"run": "gift", "workflow": "giftgenius", "state": map[string]any{"step": "collect"}}), "start")
		if st["created"] != true {
			t.Fatalf("start: %v", st)
		}
		if again := ok(t, call(t, cs, "run_start", map[string]any{"run": "gift", "workflow": "giftgenius"}), "start again"); again["created"] != false {
			t.Fatalf("second start: %v", again)
		}
		fails(t, call(t, cs, "run_start", map[string]any{"run": "gift", "workflow": "other"}), "invalid-request", "start with another workflow")
		fails(t, call(t, cs, "run_restore", map[string]any{"run": "gift"}), "checkpoint-not-found", "restore before a checkpoint")
		ok(t, call(t, cs, "run_checkpoint", map[string]any{"run": "gift", "label": "profile-collected", "state": map[string]any{"profile": "anna"}, "step": "generate"}), "cp1")
		cp2 := ok(t, call(t, cs, "run_checkpoint", map[string]any{"run": "gift", "label": "candidates", "state": map[string]any{"profile": "anna", "ids": []string{"p1"}}, "step": "filter"}), "cp2")
		fails(t, call(t, cs, "run_checkpoint", map[string]any{"run": "gift", "label": "candidates", "state": map[string]any{"x": 1}, "step": "y"}), "checkpoint-exists", "label twice")
		r := ok(t, call(t, cs, "run_get", map[string]any{"run": "gift"}), "get")
		if r["revision"] != cp2["revision"] || r["next_step"] != "filter" {
			t.Fatalf("a refused checkpoint changed the run: %v (checkpoint %v)", r, cp2)
		}
		latest := ok(t, call(t, cs, "run_restore", map[string]any{"run": "gift"}), "restore")
		if latest["label"] != "candidates" || latest["next_step"] != "filter" || len(latest["state"].(map[string]any)["ids"].([]any)) != 1 {
			t.Fatalf("restore latest: %v", latest)
		}
		first := ok(t, call(t, cs, "run_restore", map[string]any{"run": "gift", "label": "profile-collected"}), "restore named")
		if first["next_step"] != "generate" || first["state"].(map[string]any)["ids"] != nil {
			t.Fatalf("restore named: %v", first)
		}
		bob := connect(t, s, mcp.Binding{Tenant: "t1", User: "bob"})
		fails(t, call(t, bob, "run_get", map[string]any{"run": "gift"}), "run-not-found", "bob reads alice's run")
		// Errors name the run as the user named it, not the id it is stored under.
		if r := call(t, bob, "run_get", map[string]any{"run": "gift"}); r.err == nil || !strings.Contains(r.err.Detail, "gift") || strings.Contains(r.err.Detail, "mcp-") {
			t.Fatalf("error of a missing run: %+v", r.err)
		}
		fails(t, call(t, cs, "run_start", map[string]any{"run": "x", "workflow": ""}), "invalid-request", "a run without a workflow")
		fails(t, call(t, bob, "run_restore", map[string]any{"run": "gift"}), "run-not-found", "bob restores alice's run")
	})
}

func TestContextAndDocuments(t *testing.T) {
	forEachBackend(t, func(t *testing.T, eng *memento.Engine) {
		ctx := context.Background()
		if _, _, err := eng.Retrieval.Put(ctx, "t1", retrieval.PutRequest{DocumentID: "policy", SourceURI: "kb://policy", SourceVersion: "v1",
			Content: "Gifts can be returned within thirty days of delivery.", ACL: []string{"user:alice"}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := eng.Retrieval.Put(ctx, "t1", retrieval.PutRequest{DocumentID: "secret", SourceURI: "kb://secret", SourceVersion: "v1",
			Content: "Gifts margin table, returned goods.", ACL: []string{"group:staff"}}); err != nil {
			t.Fatal(err)
		}
		s := newServer(eng)
		cs := connect(t, s, alice)
		d := ok(t, call(t, cs, "documents_retrieve", map[string]any{"query": "can gifts be returned"}), "retrieve")
		hits := d["hits"].([]any)
		if len(hits) != 1 || hits[0].(map[string]any)["document_id"] != "policy" || hits[0].(map[string]any)["source_version"] != "v1" || d["snapshot_id"] == "" {
			t.Fatalf("retrieve: %v", d)
		}
		bob := connect(t, s, mcp.Binding{Tenant: "t1", User: "bob"})
		if h := ok(t, call(t, bob, "documents_retrieve", map[string]any{"query": "gifts returned"}), "bob retrieve")["hits"].([]any); len(h) != 0 {
			t.Fatalf("bob retrieved %v", h)
		}
		ok(t, call(t, cs, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{"step": "filter"}}), "put")
		ok(t, call(t, cs, "message_append", map[string]any{"session_id": "s1", "messages": []map[string]any{{"role": "user", "content": "Can I return the gift?"}}}), "append")
		// Nothing to show is an empty list of messages, as over HTTP, not null.
		if e := ok(t, call(t, cs, "context_build", map[string]any{"query": "", "budget_tokens": 100}), "empty context"); e["messages"] == nil {
			t.Fatalf("an empty context: %v, want messages []", e)
		}
		c := ok(t, call(t, cs, "context_build", map[string]any{"query": "return the gift", "session_id": "s1", "budget_tokens": 2000, "system": "You help with gifts."}), "context")
		msgs, _ := json.Marshal(c["messages"])
		// The chat protocol's names, as POST /v1/context answers.
		for _, m := range c["messages"].([]any) {
			mm := m.(map[string]any)
			if _, ok := mm["role"].(string); !ok || mm["Role"] != nil || mm["content"] == nil {
				t.Fatalf("context message %v: want role and content members", mm)
			}
		}
		for _, want := range []string{"You help with gifts.", "filter", "Can I return the gift?", "thirty days"} {
			if !strings.Contains(string(msgs), want) {
				t.Errorf("context lacks %q: %s", want, msgs)
			}
		}
		if strings.Contains(string(msgs), "margin") {
			t.Errorf("context carries a document alice may not read: %s", msgs)
		}
		acc := c["accounting"].(map[string]any)
		if acc["total_tokens"].(float64) > 2000 || acc["total_tokens"].(float64) <= 0 {
			t.Errorf("accounting: %v", acc)
		}
	})
}

// TestBlindPatchesRace: patches that name no revision apply to whatever is
// current, so two writers patching different members at once lose nothing.
func TestBlindPatchesRace(t *testing.T) {
	eng := enginetest.Open(t, "sqlite", memento.Config{})
	s := newServer(eng)
	a, b := connect(t, s, alice), connect(t, s, alice)
	ok(t, call(t, a, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{}}), "put")
	done := make(chan error, 2)
	for i, cs := range []*gomcp.ClientSession{a, b} {
		go func() {
			for n := range 10 {
				res, err := cs.CallTool(context.Background(), &gomcp.CallToolParams{Name: "session_patch",
					Arguments: map[string]any{"session_id": "s1", "patch": map[string]any{fmt.Sprintf("w%d_%d", i, n): true}}})
				if err == nil && res.IsError {
					err = fmt.Errorf("patch: %s", res.Content[0].(*gomcp.TextContent).Text)
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	st := ok(t, call(t, a, "session_get", map[string]any{"session_id": "s1"}), "get")["state"].(map[string]any)
	if len(st) != 20 {
		t.Fatalf("%d members after 20 patches: %v", len(st), st)
	}
}

// TestConcurrentCheckpointsTakeTurns: checkpoints of one run sent at once
// all land, one after the other, each at its own revision.
func TestConcurrentCheckpointsTakeTurns(t *testing.T) {
	eng := enginetest.Open(t, "sqlite", memento.Config{})
	cs := connect(t, newServer(eng), alice)
	ok(t, call(t, cs, "run_start", map[string]any{"run": "gift", "workflow": "giftgenius", "state": map[string]any{}}), "start")
	const n = 6
	errs := make(chan error, n)
	revs := make(chan float64, n)
	for i := range n {
		go func() {
			r := call(t, cs, "run_checkpoint", map[string]any{"run": "gift", "label": fmt.Sprintf("cp-%d", i), "state": map[string]any{"i": i}, "step": "next"})
			if r.err != nil {
				errs <- fmt.Errorf("checkpoint %d: %s: %s", i, r.err.Type, r.err.Detail)
				return
			}
			revs <- r.out["revision"].(float64)
			errs <- nil
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(revs)
	seen := map[float64]bool{}
	for r := range revs {
		if seen[r] {
			t.Fatalf("two checkpoints at revision %v", r)
		}
		seen[r] = true
	}
	if len(seen) != n {
		t.Fatalf("%d checkpoints landed of %d", len(seen), n)
	}
}

// A write tool whose store connection broke after the write was sent says
// the outcome is unknown (the HTTP API's commit-outcome-unknown), so the
// model reads back instead of taking it for a failure; a read tool that
// fails alike is plainly unavailable.
func TestWriteOutcomeUnknown(t *testing.T) {
	lost := fmt.Errorf("read reply: %w", io.ErrUnexpectedEOF)
	in := faultstore.New(1,
		faultstore.Rule{Method: "Put", Action: faultstore.Lose, Err: lost, Times: 1},
		faultstore.Rule{Method: "Get", Nth: 2, Action: faultstore.Fail, Err: lost})
	st := memstore.New()
	svc := session.NewService(in.Sessions(st), session.Options{})
	s := mcp.New(mcp.Services{Sessions: svc}, mcp.Options{Classify: server.ClassifyError, OutcomeUnknown: server.OutcomeUnknown})
	cs := connect(t, s, mcp.Binding{Tenant: "t1", User: "u1"})
	r := call(t, cs, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{"step": "ask"}})
	if r.err == nil || r.err.Type != "commit-outcome-unknown" || !strings.Contains(r.err.Detail, "read it back") {
		t.Fatalf("lost put: %+v %+v", r.out, r.err)
	}
	// It was applied: reading back settles it.
	if got := call(t, cs, "session_get", map[string]any{"session_id": "s1"}); got.err != nil || got.out["revision"] != float64(1) {
		t.Fatalf("read back: %+v %+v", got.out, got.err)
	}
	if got := call(t, cs, "session_get", map[string]any{"session_id": "s1"}); got.err == nil || got.err.Type != "unavailable" {
		t.Fatalf("a failed read: %+v", got.err)
	}
}

// TestUserTooLongForDocuments: a user id whose principal ("user:" + id) is
// longer than a principal may be was accepted, and then only the document
// and context tools failed, with an error the model cannot act on. Every
// tool now refuses such a connection, naming the binding as the cause;
// the longest id that fits serves every tool.
func TestUserTooLongForDocuments(t *testing.T) {
	eng := enginetest.Open(t, "sqlite", memento.Config{})
	s := newServer(eng)
	long := connect(t, s, mcp.Binding{Tenant: "t1", User: strings.Repeat("u", 252)})
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"session_put", map[string]any{"session_id": "s1", "state": map[string]any{"a": 1}}},
		{"documents_retrieve", map[string]any{"query": "refund policy"}},
	} {
		fails(t, call(t, long, c.tool, c.args), "unauthorized", c.tool)
	}
	fits := connect(t, s, mcp.Binding{Tenant: "t1", User: strings.Repeat("u", 251)})
	ok(t, call(t, fits, "documents_retrieve", map[string]any{"query": "refund policy"}), "retrieve as the longest user id")
	ok(t, call(t, fits, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{"a": 1}}), "session put as the longest user id")
}
