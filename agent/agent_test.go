package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mementohq/memento/agent"
	"github.com/mementohq/memento/llm"
)

// script is a model that answers with the next response and records every
// request it got.
type script struct {
	steps []func(req llm.ChatRequest) llm.ChatResponse
	reqs  []llm.ChatRequest
}

func (s *script) model() agent.ModelFunc {
	return func(_ context.Context, req llm.ChatRequest) (llm.ChatResponse, error) {
		s.reqs = append(s.reqs, req)
		if len(s.reqs) > len(s.steps) {
			return agent.Answer("out of script"), nil
		}
		r := s.steps[len(s.reqs)-1](req)
		r.Usage = llm.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12}
		return r, nil
	}
}

func fixed(r llm.ChatResponse) func(llm.ChatRequest) llm.ChatResponse {
	return func(llm.ChatRequest) llm.ChatResponse { return r }
}

func newAgent(t *testing.T, f agent.Tools, m llm.Chat, mod func(*agent.Config)) *agent.Agent {
	t.Helper()
	cfg := agent.Config{Model: m, ModelName: "gpt-4o", Tools: f, SessionID: "s1", System: "You help.",
		BudgetTokens: 4000, ReserveTokens: 1000}
	if mod != nil {
		mod(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestTurn(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	s := &script{steps: []func(llm.ChatRequest) llm.ChatResponse{
		fixed(agent.CallTool("session_patch", map[string]any{"patch": map[string]any{"step": "profile", "budget": 50}})),
		func(req llm.ChatRequest) llm.ChatResponse {
			rs := agent.ToolResults(req.Messages)
			if len(rs) != 1 || rs[0].Name != "session_patch" || !strings.Contains(rs[0].Content, `"budget":50`) {
				return agent.Answer("unexpected tool results")
			}
			return agent.Answer("Noted: a budget of 50.")
		},
	}}
	a := newAgent(t, f, s.model(), nil)
	res, err := a.Turn(ctx, "My budget is 50.")
	if err != nil {
		t.Fatalf("turn: %v (trace %+v)", err, res.Trace)
	}
	if res.Answer != "Noted: a budget of 50." || res.Steps != 2 || res.Usage.TotalTokens != 24 {
		t.Fatalf("answer %q, steps %d, usage %+v", res.Answer, res.Steps, res.Usage)
	}
	// The missing session was created, the message stored before the
	// context was built, the answer stored, the state read at the end.
	want := []string{"session_get", "session_put", "message_append", "context_build", "session_patch", "message_append", "session_get"}
	if got := f.callNames(); !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	var st map[string]any
	if err := json.Unmarshal(res.State, &st); err != nil || st["step"] != "profile" || st["budget"] != 50.0 {
		t.Fatalf("state %s", res.State)
	}
	if msgs := f.messages["s1"]; len(msgs) != 2 || msgs[0]["role"] != "user" || msgs[1]["content"] != "Noted: a budget of 50." {
		t.Fatalf("transcript %v", msgs)
	}
	if res.UserMessageSeq != 1 || res.AnswerMessageSeq != 2 {
		t.Fatalf("message seqs %d %d", res.UserMessageSeq, res.AnswerMessageSeq)
	}
	// The model got the built context: the system prompt first, the user's
	// message once and last, the note naming its id just before it.
	first := s.reqs[0]
	n := len(first.Messages)
	if first.Model != "gpt-4o" || first.Messages[0].Content != "You help." || first.Messages[n-1].Role != llm.RoleUser || first.Messages[n-1].Content != "My budget is 50." ||
		!strings.Contains(first.Messages[n-2].Content, "message seq 1") {
		t.Fatalf("first request %+v", first.Messages)
	}
	users := 0
	for _, m := range first.Messages {
		if m.Role == llm.RoleUser {
			users++
		}
	}
	if users != 1 {
		t.Fatalf("the user's message is in the context %d times", users)
	}
	// The model is offered the session and app tools, not the loop's, and
	// none asks it for a session id.
	var names []string
	for _, tl := range first.Tools {
		names = append(names, tl.Name)
		if strings.Contains(string(tl.Parameters), "session_id") {
			t.Fatalf("tool %s still asks for session_id: %s", tl.Name, tl.Parameters)
		}
	}
	if !slices.Equal(names, []string{"session_get", "session_patch", "big"}) {
		t.Fatalf("model tools %v", names)
	}
	// The loop filled the session id into the model's call.
	var patch agent.TraceEntry
	for _, e := range res.Trace {
		if e.Name == "session_patch" {
			patch = e
		}
	}
	if patch.Step != 1 || patch.ID == "" || !strings.Contains(string(patch.Args), `"session_id":"s1"`) {
		t.Fatalf("patch call %+v", patch)
	}
	// The second request carries the call and its answer, paired by id.
	second := s.reqs[1].Messages
	call, result := second[len(second)-2], second[len(second)-1]
	if call.Role != llm.RoleAssistant || len(call.ToolCalls) != 1 || result.Role != llm.RoleTool || result.ToolCallID != call.ToolCalls[0].ID {
		t.Fatalf("tool exchange %+v / %+v", call, result)
	}
	// The reserve sent to context_build holds the configured reserve and
	// the tool definitions.
	var acc struct {
		Reserve int `json:"reserve_tokens"`
		Budget  int `json:"budget_tokens"`
	}
	if err := json.Unmarshal(res.Accounting, &acc); err != nil || acc.Budget != 4000 || acc.Reserve <= 1000 {
		t.Fatalf("accounting %s", res.Accounting)
	}

	// A second turn finds the session and its history.
	s.steps = append(s.steps, fixed(agent.Answer("Still 50.")))
	res, err = a.Turn(ctx, "What was my budget?")
	if err != nil || res.Answer != "Still 50." {
		t.Fatalf("second turn: %q %v", res.Answer, err)
	}
	if got := f.callNames()[len(want):]; !slices.Equal(got, []string{"session_get", "message_append", "context_build", "message_append", "session_get"}) {
		t.Fatalf("second turn calls %v", got)
	}
	third := s.reqs[2].Messages
	if !slices.ContainsFunc(third, func(m llm.Message) bool { return m.Content == "Noted: a budget of 50." }) {
		t.Fatalf("the history did not reach the model: %+v", third)
	}
}

// Whatever a model's tool call gets wrong goes back to it as the result,
// and the turn goes on.
func TestToolErrorsGoBackToTheModel(t *testing.T) {
	f := newFake()
	f.broken["big"] = true
	f.sessions["s1"] = map[string]any{}
	s := &script{steps: []func(llm.ChatRequest) llm.ChatResponse{
		fixed(agent.CallTools(
			agent.ToolCall("no_such_tool", nil),
			agent.ToolCall("session_patch", "{not json"),
			agent.ToolCall("session_patch", `[1]`),
			agent.ToolCall("message_append", map[string]any{"messages": []any{}}),
			agent.ToolCall("big", nil),
		)),
		func(req llm.ChatRequest) llm.ChatResponse {
			var kinds []string
			for _, r := range agent.ToolResults(req.Messages) {
				var e struct {
					Error struct{ Type string } `json:"error"`
				}
				_ = json.Unmarshal([]byte(r.Content), &e)
				kinds = append(kinds, e.Error.Type)
			}
			return agent.Answer(strings.Join(kinds, ","))
		},
	}}
	a := newAgent(t, f, s.model(), nil)
	res, err := a.Turn(context.Background(), "hello")
	if err != nil {
		t.Fatalf("turn: %v", err)
	}
	// message_append is the loop's, not offered: unknown to the model.
	if res.Answer != "unknown-tool,invalid-arguments,invalid-arguments,unknown-tool,tool-unavailable" {
		t.Fatalf("the model read %q", res.Answer)
	}
	var bigErr string
	for _, e := range res.Trace {
		if e.Name == "big" {
			bigErr = e.Err
		}
	}
	if !strings.Contains(bigErr, "connection reset") {
		t.Fatalf("trace of the broken call: %q", bigErr)
	}
	// Only the offered, well-formed call reached the tools; the invalid
	// ones never did.
	if n := strings.Count(strings.Join(f.callNames(), " "), "message_append"); n != 2 {
		t.Fatalf("message_append called %d times, want the loop's 2", n)
	}
	// A tool that answers an error (IsError) goes back too.
	f.fail["session_patch"] = "revision-conflict"
	s2 := &script{steps: []func(llm.ChatRequest) llm.ChatResponse{
		fixed(agent.CallTool("session_patch", map[string]any{"patch": map[string]any{}})),
		func(req llm.ChatRequest) llm.ChatResponse {
			return agent.Answer(agent.ToolResults(req.Messages)[0].Content)
		},
	}}
	a = newAgent(t, f, s2.model(), nil)
	res, err = a.Turn(context.Background(), "again")
	if err != nil || !strings.Contains(res.Answer, "revision-conflict") {
		t.Fatalf("%q %v", res.Answer, err)
	}
}

func TestStepBound(t *testing.T) {
	f := newFake()
	loop := agent.ModelFunc(func(context.Context, llm.ChatRequest) (llm.ChatResponse, error) {
		return agent.CallTool("session_get", nil), nil
	})
	a := newAgent(t, f, loop, func(c *agent.Config) { c.MaxSteps = 3 })
	res, err := a.Turn(context.Background(), "go")
	if !errors.Is(err, agent.ErrMaxSteps) {
		t.Fatalf("err %v", err)
	}
	modelCalls := 0
	for _, e := range res.Trace {
		if e.Step > 0 {
			modelCalls++
		}
	}
	if res.Steps != 3 || modelCalls != 3 || res.Answer != "" {
		t.Fatalf("steps %d, model calls %d, answer %q", res.Steps, modelCalls, res.Answer)
	}
	// No answer was stored.
	if msgs := f.messages["s1"]; len(msgs) != 1 {
		t.Fatalf("transcript %v", msgs)
	}

	empty := agent.ModelFunc(func(context.Context, llm.ChatRequest) (llm.ChatResponse, error) {
		return llm.ChatResponse{FinishReason: "length"}, nil
	})
	if _, err := newAgent(t, f, empty, nil).Turn(context.Background(), "go"); !errors.Is(err, agent.ErrNoAnswer) {
		t.Fatalf("empty answer: %v", err)
	}
	failing := agent.ModelFunc(func(context.Context, llm.ChatRequest) (llm.ChatResponse, error) {
		return llm.ChatResponse{}, errors.New("provider down")
	})
	if _, err := newAgent(t, f, failing, nil).Turn(context.Background(), "go"); err == nil || !strings.Contains(err.Error(), "provider down") {
		t.Fatalf("model error: %v", err)
	}
}

func TestBudget(t *testing.T) {
	f := newFake()
	f.big = 64 << 10
	var seen string
	s := &script{steps: []func(llm.ChatRequest) llm.ChatResponse{
		fixed(agent.CallTool("big", nil)),
		func(req llm.ChatRequest) llm.ChatResponse {
			seen = agent.ToolResults(req.Messages)[0].Content
			return agent.Answer("done")
		},
	}}
	// A long result is cut before the model reads it.
	a := newAgent(t, f, s.model(), func(c *agent.Config) { c.MaxToolResultBytes = 1000 })
	if res, err := a.Turn(context.Background(), "go"); err != nil || res.Answer != "done" {
		t.Fatalf("%v %q", err, res.Answer)
	}
	if !strings.HasPrefix(seen, strings.Repeat("x", 1000)+"\n[cut: ") || len(seen) > 1100 {
		t.Fatalf("the model read %d bytes: %.60q...", len(seen), seen)
	}
	// A result the reserve cannot hold stops the turn before the model is
	// sent an over-budget prompt.
	s = &script{steps: []func(llm.ChatRequest) llm.ChatResponse{fixed(agent.CallTool("big", nil))}}
	a = newAgent(t, f, s.model(), func(c *agent.Config) { c.MaxToolResultBytes = 60 << 10; c.SessionID = "s2" })
	if _, err := a.Turn(context.Background(), "go"); !errors.Is(err, agent.ErrOverBudget) || len(s.reqs) != 1 {
		t.Fatalf("err %v after %d model calls", err, len(s.reqs))
	}
	// A reserve the tools alone overflow is refused before the build.
	a = newAgent(t, f, s.model(), func(c *agent.Config) { c.BudgetTokens, c.ReserveTokens = 1010, 1000 })
	if _, err := a.Turn(context.Background(), "go"); !errors.Is(err, agent.ErrOverBudget) {
		t.Fatalf("tiny budget: %v", err)
	}
}

func TestCheckpoints(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	cp := &agent.Checkpoints{Run: "gift:anna", Workflow: "giftgenius",
		Mark: func(c agent.Call, r agent.ToolResult) (agent.Checkpoint, bool) {
			if c.Name != "session_patch" || r.IsError {
				return agent.Checkpoint{}, false
			}
			var a struct {
				Patch struct{ Step, Next string } `json:"patch"`
			}
			_ = json.Unmarshal(c.Args, &a)
			return agent.Checkpoint{Label: a.Patch.Step, NextStep: a.Patch.Next}, a.Patch.Step != ""
		}}
	patch := func(step string) func(llm.ChatRequest) llm.ChatResponse {
		return fixed(agent.CallTool("session_patch", map[string]any{"patch": map[string]any{"step": step, "next": "after-" + step}}))
	}
	s := &script{steps: []func(llm.ChatRequest) llm.ChatResponse{
		patch("profile_collected"), fixed(agent.CallTool("session_get", nil)), fixed(agent.Answer("profile kept")),
		patch("candidates_generated"), fixed(agent.Answer("here are ideas")),
	}}
	a := newAgent(t, f, s.model(), func(c *agent.Config) { c.Checkpoints = cp })
	res, err := a.Turn(ctx, "for Anna, she likes books")
	if err != nil {
		t.Fatal(err)
	}
	if res.RestoredFrom != "" {
		t.Fatalf("restored from %q with no run", res.RestoredFrom)
	}
	var marked []string
	for _, e := range res.Trace {
		if e.Checkpoint != "" {
			marked = append(marked, e.Name+"/"+e.Checkpoint)
		}
	}
	if !slices.Equal(marked, []string{"session_patch/profile_collected"}) {
		t.Fatalf("marked %v", marked)
	}
	if _, err := a.Turn(ctx, "ideas please"); err != nil {
		t.Fatal(err)
	}
	r := f.runs["gift:anna"]
	if r == nil || r.workflow != "giftgenius" || len(r.checkpoints) != 2 {
		t.Fatalf("run %+v", r)
	}
	if c := r.checkpoints[1]; c.label != "candidates_generated" || c.step != "after-candidates_generated" || c.state["step"] != "candidates_generated" {
		t.Fatalf("checkpoint %+v", c)
	}
	if n := strings.Count(strings.Join(f.callNames(), " "), "run_start"); n != 1 {
		t.Fatalf("run_start %d times", n)
	}

	// Another device, long after: a new session id the server does not
	// know. The loop restores the latest checkpoint into it.
	delete(f.sessions, "s1")
	s = &script{steps: []func(llm.ChatRequest) llm.ChatResponse{func(req llm.ChatRequest) llm.ChatResponse {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, `"step":"candidates_generated"`) {
				return agent.Answer("welcome back, we had ideas")
			}
		}
		return agent.Answer("who are you?")
	}}}
	b := newAgent(t, f, s.model(), func(c *agent.Config) { c.Checkpoints = cp; c.SessionID = "s9" })
	res, err = b.Turn(ctx, "same friend, bigger budget")
	if err != nil || res.RestoredFrom != "candidates_generated" || res.Answer != "welcome back, we had ideas" {
		t.Fatalf("%v: restored %q, answer %q", err, res.RestoredFrom, res.Answer)
	}
	// A step reached again is checkpointed again, under a new label.
	s = &script{steps: []func(llm.ChatRequest) llm.ChatResponse{patch("candidates_generated"), fixed(agent.Answer("new ideas"))}}
	b = newAgent(t, f, s.model(), func(c *agent.Config) { c.Checkpoints = cp; c.SessionID = "s9" })
	res, err = b.Turn(ctx, "bigger budget")
	if err != nil {
		t.Fatal(err)
	}
	var took []string
	for _, e := range res.Trace {
		if e.Checkpoint != "" {
			took = append(took, e.Checkpoint)
		}
	}
	if c := r.checkpoints[len(r.checkpoints)-1]; len(r.checkpoints) != 3 || c.label != "candidates_generated-r4" || !slices.Equal(took, []string{c.label}) {
		t.Fatalf("checkpoints %+v, trace labels %v", r.checkpoints, took)
	}
	// A failed checkpoint fails the turn: the app asked for durability.
	f.fail["run_checkpoint"] = "state-too-large"
	s = &script{steps: []func(llm.ChatRequest) llm.ChatResponse{patch("final")}}
	b = newAgent(t, f, s.model(), func(c *agent.Config) { c.Checkpoints = cp; c.SessionID = "s9" })
	_, err = b.Turn(ctx, "this one")
	var tf *agent.ToolFailedError
	if !errors.As(err, &tf) || tf.Name != "run_checkpoint" || tf.Result.ErrorType() != "state-too-large" {
		t.Fatalf("failed checkpoint: %v", err)
	}
}

func TestLoopToolFailures(t *testing.T) {
	s := &script{}
	// A session_get that fails other than not-found is not papered over
	// with a new session.
	f := newFake()
	f.fail["session_get"] = "unavailable"
	_, err := newAgent(t, f, s.model(), nil).Turn(context.Background(), "hi")
	var tf *agent.ToolFailedError
	if !errors.As(err, &tf) || tf.Name != "session_get" || slices.Contains(f.callNames(), "session_put") {
		t.Fatalf("err %v, calls %v", err, f.callNames())
	}
	// Tools without the loop's own are refused up front.
	l, err := agent.NewLocal()
	if err != nil {
		t.Fatal(err)
	}
	_, err = newAgent(t, l, s.model(), nil).Turn(context.Background(), "hi")
	if !errors.Is(err, agent.ErrMissingTool) || !strings.Contains(err.Error(), "context_build") {
		t.Fatalf("missing tools: %v", err)
	}
	// A cancelled context ends the turn at the tool call.
	f = newFake()
	ctx, cancel := context.WithCancel(context.Background())
	m := agent.ModelFunc(func(context.Context, llm.ChatRequest) (llm.ChatResponse, error) {
		cancel()
		return agent.CallTool("big", nil), nil
	})
	f.broken["big"] = true
	if _, err := newAgent(t, f, m, nil).Turn(ctx, "hi"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if len(s.reqs) != 0 {
		t.Fatalf("the model was called %d times", len(s.reqs))
	}
}

func TestNewChecks(t *testing.T) {
	f := newFake()
	m := (&script{}).model()
	ok := agent.Config{Model: m, ModelName: "gpt-4o", Tools: f, SessionID: "s", BudgetTokens: 100}
	for name, mod := range map[string]func(*agent.Config){
		"no model":            func(c *agent.Config) { c.Model = nil },
		"no model name":       func(c *agent.Config) { c.ModelName = "" },
		"no session":          func(c *agent.Config) { c.SessionID = "" },
		"no budget":           func(c *agent.Config) { c.BudgetTokens = 0 },
		"reserve too big":     func(c *agent.Config) { c.ReserveTokens = 100 },
		"answer over reserve": func(c *agent.Config) { c.ReserveTokens = 10; c.MaxAnswerTokens = 11 },
		"state not object":    func(c *agent.Config) { c.InitialState = json.RawMessage(`[1]`) },
		"checkpoint no mark":  func(c *agent.Config) { c.Checkpoints = &agent.Checkpoints{Run: "r", Workflow: "w"} },
	} {
		c := ok
		mod(&c)
		if _, err := agent.New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := agent.New(ok); err != nil {
		t.Fatal(err)
	}
	a, _ := agent.New(ok)
	if _, err := a.Turn(context.Background(), "  "); err == nil {
		t.Fatal("empty message accepted")
	}
}
