package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/agent"
	"github.com/mementohq/memento/internal/enginetest"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/mcp"
	"github.com/mementohq/memento/server"
)

// connectMCP is an SDK client session bound to b, in memory.
func connectMCP(t *testing.T, s *mcp.Server, b mcp.Binding) *gomcp.ClientSession {
	t.Helper()
	ct, st := gomcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Server(b).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "agent-test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs
}

var seqNote = regexp.MustCompile(`stored as message seq (\d+)`)

// giftPolicy is a scripted model for a small gift scenario. It decides
// from what it is sent: the built context (the session state, the facts
// kept about the user, the note naming the user's message) and the tool
// results of the turn so far.
func giftPolicy(t *testing.T, seen *[]string) agent.ModelFunc {
	return func(_ context.Context, req llm.ChatRequest) (llm.ChatResponse, error) {
		var all strings.Builder
		for _, m := range req.Messages {
			all.WriteString(m.Content + "\n")
		}
		ctxText := all.String()
		*seen = append(*seen, ctxText)
		last := req.Messages[len(req.Messages)-1]
		results := agent.ToolResults(req.Messages)
		if last.Role == llm.RoleUser {
			if strings.Contains(last.Content, "bigger budget") {
				// Back later: it knows the friend and where the work stood.
				if !strings.Contains(ctxText, `"recipient":"anna"`) || !strings.Contains(ctxText, "giftgenius.recipients/anna") {
					return agent.Answer("Who is this gift for?"), nil
				}
				return agent.CallTool("session_patch", map[string]any{"patch": map[string]any{"budget": 80, "step": "candidates-generated"}}), nil
			}
			return agent.CallTool("session_get", nil), nil
		}
		switch results[0].Name {
		case "session_get":
			m := seqNote.FindStringSubmatch(ctxText)
			if m == nil {
				t.Errorf("no message seq in the context")
				return agent.Answer("?"), nil
			}
			seq, _ := strconv.Atoi(m[1])
			return agent.CallTools(
				agent.ToolCall("session_patch", map[string]any{"patch": map[string]any{"step": "profile-collected", "recipient": "anna", "budget": 50}}),
				agent.ToolCall("memory_add", map[string]any{"namespace": "giftgenius.recipients", "key": "anna",
					"value": map[string]any{"likes": "books"}, "text": "Anna loves books", "message_seqs": []int{seq}}),
			), nil
		case "session_patch":
			if strings.Contains(results[0].Content, `"budget":80`) {
				return agent.Answer("Anna, books, now up to 80: here are new ideas."), nil
			}
			return agent.CallTool("find_products", map[string]any{"query": "books", "k": 2}), nil
		case "find_products":
			return agent.Answer("For Anna: " + results[0].Content), nil
		}
		return agent.Answer("unexpected"), nil
	}
}

// The loop over Memento's real MCP server on a real engine: one turn reads
// and patches session state, keeps a fact with its evidence, calls a local
// tool and checkpoints twice; a turn on another device, in a session the
// server never saw, continues from the latest checkpoint and the kept fact.
func TestOverMCP(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			eng := enginetest.Open(t, backend, memento.Config{})
			srv := mcp.New(mcp.Services{Runs: eng.Runs, Sessions: eng.Sessions, Memory: eng.Memory, Context: eng.Context, Retrieval: eng.Retrieval},
				mcp.Options{Classify: server.ClassifyError})
			alice := mcp.Binding{Tenant: "t1", User: "alice"}
			fn, err := agent.NewFunc("find_products", "search the gift catalogue", find)
			if err != nil {
				t.Fatal(err)
			}
			local, err := agent.NewLocal(fn)
			if err != nil {
				t.Fatal(err)
			}
			cp := &agent.Checkpoints{Run: "gift-anna", Workflow: "giftgenius",
				Mark: func(c agent.Call, r agent.ToolResult) (agent.Checkpoint, bool) {
					switch {
					case r.IsError:
					case c.Name == "session_patch" && strings.Contains(string(c.Args), "profile-collected"):
						return agent.Checkpoint{Label: "profile-collected", NextStep: "candidates"}, true
					case c.Name == "find_products", c.Name == "session_patch" && strings.Contains(string(c.Args), "candidates-generated"):
						return agent.Checkpoint{Label: "candidates-generated", NextStep: "filter"}, true
					}
					return agent.Checkpoint{}, false
				}}
			var seen []string
			newLoop := func(b mcp.Binding, sessionID string) *agent.Agent {
				a, err := agent.New(agent.Config{Model: giftPolicy(t, &seen), ModelName: "gpt-4o",
					Tools: agent.Join(agent.NewMCP(connectMCP(t, srv, b)), local), SessionID: sessionID,
					System: "You are GiftGenius.", BudgetTokens: 6000, ReserveTokens: 1500, Checkpoints: cp})
				if err != nil {
					t.Fatal(err)
				}
				return a
			}

			res, err := newLoop(alice, "phone-1").Turn(ctx, "A gift for my friend Anna: she loves books, budget 50 euros.")
			if err != nil {
				t.Fatalf("turn: %v", err)
			}
			if res.Answer != `For Anna: {"hits":["books-1","books-2"]}` || res.Steps != 4 || res.RestoredFrom != "" {
				t.Fatalf("answer %q after %d steps", res.Answer, res.Steps)
			}
			var st map[string]any
			if err := json.Unmarshal(res.State, &st); err != nil || st["recipient"] != "anna" || st["budget"] != 50.0 || st["step"] != "profile-collected" {
				t.Fatalf("state %s", res.State)
			}
			var labels []string
			var added string
			for _, e := range res.Trace {
				if e.Err != "" || (e.Step > 0 && e.Result.IsError) {
					t.Fatalf("call %s failed: %s %s", e.Name, e.Err, e.Result.Text)
				}
				if e.Checkpoint != "" {
					labels = append(labels, e.Checkpoint)
				}
				if e.Name == "memory_add" {
					var out struct{ Outcome string }
					_ = json.Unmarshal(e.Result.JSON, &out)
					added = out.Outcome
				}
			}
			if strings.Join(labels, ",") != "profile-collected,candidates-generated" || added != "added" {
				t.Fatalf("checkpoints %v, memory outcome %q", labels, added)
			}
			// What the run holds, read as any MCP client would.
			cs := connectMCP(t, srv, alice)
			r, err := agent.NewMCP(cs).Call(ctx, "run_restore", json.RawMessage(`{"run":"gift-anna"}`))
			if err != nil || r.IsError {
				t.Fatalf("restore: %+v %v", r, err)
			}
			var restored struct {
				Label    string
				NextStep string `json:"next_step"`
				State    map[string]any
			}
			_ = json.Unmarshal(r.JSON, &restored)
			if restored.NextStep != "filter" || restored.State["recipient"] != "anna" {
				t.Fatalf("restored %s", r.JSON)
			}
			// The transcript holds the user's message and the answer.
			r, _ = agent.NewMCP(cs).Call(ctx, "messages_list", json.RawMessage(`{"session_id":"phone-1"}`))
			if !strings.Contains(r.Text, "she loves books") || !strings.Contains(r.Text, "For Anna") || strings.Count(r.Text, `"seq"`) != 2 {
				t.Fatalf("messages %s", r.Text)
			}

			// Another device, a session the server never saw.
			res, err = newLoop(alice, "laptop-7").Turn(ctx, "Same friend, bigger budget: 80.")
			if err != nil {
				t.Fatalf("second turn: %v", err)
			}
			if res.RestoredFrom != "candidates-generated" || res.Answer != "Anna, books, now up to 80: here are new ideas." {
				t.Fatalf("restored from %q, answer %q", res.RestoredFrom, res.Answer)
			}
			st = nil
			if err := json.Unmarshal(res.State, &st); err != nil || st["recipient"] != "anna" || st["budget"] != 80.0 {
				t.Fatalf("state %s", res.State)
			}
			// The step was reached again: a checkpoint of its own.
			var again string
			for _, e := range res.Trace {
				if e.Checkpoint != "" {
					again = e.Checkpoint
				}
			}
			if !strings.HasPrefix(again, "candidates-generated-r") {
				t.Fatalf("second checkpoint %q", again)
			}

			// Another user: the same run name is a run of his own, with
			// nothing to restore, and Alice's session id is not his to use.
			bob := mcp.Binding{Tenant: "t1", User: "bob"}
			seen = nil
			res, err = newLoop(bob, "bob-laptop").Turn(ctx, "Same friend, bigger budget: 80.")
			if err != nil || res.RestoredFrom != "" || res.Answer != "Who is this gift for?" {
				t.Fatalf("bob: %v, restored %q, answer %q", err, res.RestoredFrom, res.Answer)
			}
			if strings.Contains(strings.Join(seen, ""), "anna") {
				t.Fatal("Alice's data reached Bob's context")
			}
			_, err = newLoop(bob, "laptop-7").Turn(ctx, "hello")
			var tf *agent.ToolFailedError
			if !errors.As(err, &tf) || tf.Result.ErrorType() != "session-not-found" {
				t.Fatalf("bob in Alice's session: %v", err)
			}
		})
	}
}
