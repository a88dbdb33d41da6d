package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento/agent"
)

type findIn struct {
	Query string `json:"query" jsonschema:"what to look for"`
	K     int    `json:"k,omitempty"`
}

type findOut struct {
	Hits []string `json:"hits"`
}

func find(_ context.Context, in findIn) (findOut, error) {
	switch in.Query {
	case "missing":
		return findOut{}, &agent.ToolError{Type: "not-found", Detail: "nothing like that"}
	case "boom":
		return findOut{}, errors.New("catalogue offline")
	}
	k := max(in.K, 1)
	var out findOut
	for i := range k {
		out.Hits = append(out.Hits, fmt.Sprintf("%s-%d", in.Query, i+1))
	}
	return out, nil
}

func TestLocal(t *testing.T) {
	ctx := context.Background()
	fn, err := agent.NewFunc("find_products", "search the catalogue", find)
	if err != nil {
		t.Fatal(err)
	}
	var sch struct {
		Type       string                     `json:"type"`
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(fn.Tool().Parameters, &sch); err != nil || sch.Type != "object" ||
		!slices.Equal(sch.Required, []string{"query"}) || !strings.Contains(string(sch.Properties["query"]), "what to look for") {
		t.Fatalf("schema %s", fn.Tool().Parameters)
	}
	l, err := agent.NewLocal(fn)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Call(ctx, "find_products", json.RawMessage(`{"query":"book","k":2}`))
	if err != nil || r.IsError || string(r.JSON) != `{"hits":["book-1","book-2"]}` || r.Text != string(r.JSON) {
		t.Fatalf("%+v %v", r, err)
	}
	for args, kind := range map[string]string{
		`{}`:                    "invalid-arguments", // query is required
		`{"query":3}`:           "invalid-arguments",
		`{"query":"a","x":1}`:   "invalid-arguments", // no other properties
		`{"query":"a"`:          "invalid-arguments",
		`{"query":"missing"}`:   "not-found",
		`{"query":"boom"}`:      "tool-failed",
		`{"query":"a","k":1.5}`: "invalid-arguments",
	} {
		r, err := l.Call(ctx, "find_products", json.RawMessage(args))
		if err != nil || !r.IsError || r.ErrorType() != kind {
			t.Errorf("%s: %+v %v, want %s", args, r, err, kind)
		}
	}
	if _, err := l.Call(ctx, "nope", nil); !errors.Is(err, agent.ErrUnknownTool) {
		t.Fatalf("unknown: %v", err)
	}
	if _, err := agent.NewLocal(fn, fn); !errors.Is(err, agent.ErrToolClash) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := agent.NewFunc("bad", "", func(context.Context, string) (int, error) { return 0, nil }); err == nil {
		t.Fatal("a non-object input accepted")
	}
}

func TestJoin(t *testing.T) {
	ctx := context.Background()
	fn, _ := agent.NewFunc("find_products", "", find)
	l, _ := agent.NewLocal(fn)
	f := newFake()
	j := agent.Join(f, l)
	// Called before List: it routes by listing.
	r, err := j.Call(ctx, "find_products", json.RawMessage(`{"query":"x"}`))
	if err != nil || r.IsError {
		t.Fatalf("%+v %v", r, err)
	}
	ts, err := j.List(ctx)
	if err != nil || len(ts) != 11 || ts[10].Name != "find_products" {
		t.Fatalf("%d tools, %v", len(ts), err)
	}
	if r, err := j.Call(ctx, "session_get", json.RawMessage(`{"session_id":"zz"}`)); err != nil || r.ErrorType() != "session-not-found" {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := j.Call(ctx, "nope", nil); !errors.Is(err, agent.ErrUnknownTool) {
		t.Fatalf("unknown: %v", err)
	}
	clash, _ := agent.NewFunc("session_get", "", find)
	lc, _ := agent.NewLocal(clash)
	if _, err := agent.Join(f, lc).List(ctx); !errors.Is(err, agent.ErrToolClash) {
		t.Fatalf("clash: %v", err)
	}
}

// The MCP adapter over a server of the same SDK, in memory.
func TestMCP(t *testing.T) {
	ctx := context.Background()
	srv := gomcp.NewServer(&gomcp.Implementation{Name: "test", Version: "1"}, nil)
	gomcp.AddTool(srv, &gomcp.Tool{Name: "find_products", Description: "search"},
		func(ctx context.Context, _ *gomcp.CallToolRequest, in findIn) (*gomcp.CallToolResult, findOut, error) {
			if in.Query == "refuse" {
				return &gomcp.CallToolResult{IsError: true, Content: []gomcp.Content{&gomcp.TextContent{Text: `{"error":{"type":"forbidden","detail":"no"}}`}}}, findOut{}, nil
			}
			out, err := find(ctx, in)
			return nil, out, err
		})
	st, ct := gomcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	m := agent.NewMCP(cs)
	ts, err := m.List(ctx)
	if err != nil || len(ts) != 1 || ts[0].Name != "find_products" || ts[0].Description != "search" ||
		!strings.Contains(string(ts[0].Parameters), `"required":["query"]`) {
		t.Fatalf("%+v %v", ts, err)
	}
	r, err := m.Call(ctx, "find_products", json.RawMessage(`{"query":"pen","k":1}`))
	if err != nil || r.IsError || string(r.JSON) != `{"hits":["pen-1"]}` {
		t.Fatalf("%+v %v", r, err)
	}
	if r, err := m.Call(ctx, "find_products", json.RawMessage(`{"query":"refuse"}`)); err != nil || r.ErrorType() != "forbidden" {
		t.Fatalf("refused: %+v %v", r, err)
	}
	// The SDK validates the input and answers an error result.
	if r, err := m.Call(ctx, "find_products", json.RawMessage(`{"query":7}`)); err != nil || !r.IsError || r.Text == "" {
		t.Fatalf("bad input: %+v %v", r, err)
	}
	if _, err := m.Call(ctx, "nope", nil); err == nil {
		t.Fatal("an unknown tool answered")
	}
}
