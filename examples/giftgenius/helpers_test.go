package giftgenius_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/agent"
	"github.com/mementohq/memento/examples/giftgenius"
	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/mcp"
	"github.com/mementohq/memento/server"
)

// openEngine is an embedded engine in a temp dir on clk (nil: real time).
func openEngine(t testing.TB, clk *testenv.Clock) *memento.Engine {
	t.Helper()
	cfg := memento.Config{DataDir: t.TempDir()}
	cfg.PII.Key = testenv.PIIKey
	if clk != nil {
		cfg.Now = clk.Now
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, err := memento.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return eng
}

func mcpServer(eng *memento.Engine) *mcp.Server {
	return mcp.New(mcp.Services{Runs: eng.Runs, Sessions: eng.Sessions, Memory: eng.Memory, Context: eng.Context, Retrieval: eng.Retrieval},
		mcp.Options{Classify: server.ClassifyError})
}

// connector opens in-memory MCP connections to s bound to b, as a device
// of that user would.
func connector(t *testing.T, s *mcp.Server, b mcp.Binding) func(context.Context) (agent.Tools, func() error, error) {
	return func(ctx context.Context) (agent.Tools, func() error, error) {
		ct, st := gomcp.NewInMemoryTransports()
		ss, err := s.Server(b).Connect(ctx, st, nil)
		if err != nil {
			return nil, nil, err
		}
		cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "giftgenius-test", Version: "1"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			return nil, nil, err
		}
		return agent.NewMCP(cs), func() error { err := cs.Close(); _ = ss.Wait(); return err }, nil
	}
}

// dial is one connection for the length of the test.
func dial(t *testing.T, connect func(context.Context) (agent.Tools, func() error, error)) agent.Tools {
	t.Helper()
	tools, closeFn, err := connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeFn() })
	return tools
}

// callJSON calls a tool and decodes its JSON; isErr reports a tool error.
func callJSON(t *testing.T, tools agent.Tools, name string, args any) (out map[string]any, errType string) {
	t.Helper()
	b, _ := json.Marshal(args)
	r, err := tools.Call(context.Background(), name, b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if r.IsError {
		return nil, r.ErrorType()
	}
	if err := json.Unmarshal(r.JSON, &out); err != nil {
		t.Fatalf("%s answered %s: %v", name, r.Text, err)
	}
	return out, ""
}

func turn(t *testing.T, a *agent.Agent, text string) agent.Result {
	t.Helper()
	res, err := a.Turn(context.Background(), text)
	if err != nil {
		t.Fatalf("turn %q: %v\ntrace: %s", text, err, traceText(res))
	}
	t.Logf("user: %s\nagent: %s\ntrace: %s", text, res.Answer, traceText(res))
	return res
}

func traceText(res agent.Result) string {
	var parts []string
	for _, e := range res.Trace {
		p := e.Name
		if e.Step == 0 {
			p = "(" + p + ")"
		}
		if e.Result.IsError {
			p += "!" + e.Result.ErrorType()
		}
		if e.Checkpoint != "" {
			p += "->" + e.Checkpoint
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

// modelCalls are the names of the model's tool calls in a turn.
func modelCalls(res agent.Result) []string {
	var names []string
	for _, e := range res.Trace {
		if e.Step > 0 {
			names = append(names, e.Name)
		}
	}
	return names
}

// checkpoints are the labels a turn checkpointed.
func checkpoints(res agent.Result) []string {
	var l []string
	for _, e := range res.Trace {
		if e.Checkpoint != "" {
			l = append(l, e.Checkpoint)
		}
	}
	return l
}

func state(t *testing.T, res agent.Result) giftgenius.State {
	t.Helper()
	var s giftgenius.State
	if err := json.Unmarshal(res.State, &s); err != nil {
		t.Fatalf("state %s: %v", res.State, err)
	}
	return s
}

// idsOnly fails when a state holds anything of a product but its id: the
// catalogue's product fields appear nowhere, every id list names products.
func idsOnly(t *testing.T, raw json.RawMessage, cat *giftgenius.Catalog) {
	t.Helper()
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if slices.Contains([]string{"name", "price_eur", "tags", "ships_to", "delivery_days"}, k) {
					t.Errorf("state %s holds product field %s.%s", raw, path, k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	walk("", v)
	var s giftgenius.State
	_ = json.Unmarshal(raw, &s)
	for _, id := range slices.Concat(s.CandidateIDs, s.KeptIDs, s.PreviousChoiceIDs, []string{s.ChoiceID}) {
		if _, ok := cat.Product(id); !ok && id != "" {
			t.Errorf("state %s: %q is not a product id", raw, id)
		}
	}
}
