package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/tokens"
)

// The Memento tools the loop calls itself.
const (
	ToolSessionGet    = "session_get"
	ToolSessionPut    = "session_put"
	ToolMessageAppend = "message_append"
	ToolContextBuild  = "context_build"
	ToolRunStart      = "run_start"
	ToolRunGet        = "run_get"
	ToolRunCheckpoint = "run_checkpoint"
	ToolRunRestore    = "run_restore"
)

// LoopTools are the tools the loop owns and, by default, does not offer
// the model: the transcript, the context and the checkpoints are the
// loop's, so a model cannot append turns, replace the state wholesale or
// checkpoint where the app did not mark a step.
var LoopTools = []string{ToolSessionPut, ToolMessageAppend, ToolContextBuild, ToolRunStart, ToolRunGet, ToolRunCheckpoint, ToolRunRestore}

// Defaults of Config.
const (
	DefaultMaxSteps           = 8
	DefaultMaxToolResultBytes = 16 << 10
)

// Errors a turn ends with; callers branch on them with errors.Is.
var (
	// ErrMaxSteps: the model still called tools after MaxSteps model calls.
	ErrMaxSteps = errors.New("the model did not answer within the step bound")
	// ErrOverBudget: the turn's own tool traffic outgrew the reserve, so
	// the next prompt would not fit the budget.
	ErrOverBudget = errors.New("the prompt outgrew the token budget")
	// ErrNoAnswer: the model answered with neither text nor tool calls.
	ErrNoAnswer = errors.New("the model answered nothing")
	// ErrMissingTool: the tools lack one the loop needs.
	ErrMissingTool = errors.New("a tool the loop needs is missing")
)

// ToolFailedError is a call the loop made itself that answered an error:
// the turn cannot go on without it (a model's failed call goes back to the
// model instead).
type ToolFailedError struct {
	Name   string
	Result ToolResult
}

func (e *ToolFailedError) Error() string {
	return fmt.Sprintf("tool %s failed: %s", e.Name, e.Result.Text)
}

// Config is one agent: a model, its tools and the session it talks in.
type Config struct {
	// Model answers; ModelName is sent with every request and picks the
	// tokenizer budgets are counted with (required).
	Model     llm.Chat
	ModelName string
	// Tools must include Memento's session_get, session_put,
	// message_append and context_build (and run_start, run_get,
	// run_checkpoint, run_restore when Checkpoints is set), usually over
	// MCP (NewMCP), joined with the app's own (Join).
	Tools Tools
	// SessionID is the session the turns belong to. The user is the one
	// the tools are bound to, never an argument.
	SessionID string
	// System is the system prompt; the context builder keeps it whole.
	System string
	// BudgetTokens bounds every prompt, tool definitions included.
	// ReserveTokens of it are kept out of the built context for what the
	// turn adds (tool calls, their results, the answer); default a quarter.
	BudgetTokens  int
	ReserveTokens int
	// MaxAnswerTokens, when set, bounds each completion and is kept free
	// of every prompt.
	MaxAnswerTokens int
	Temperature     *float64
	// MaxSteps bounds the model calls of one turn (default DefaultMaxSteps).
	MaxSteps int
	// MaxToolResultBytes cuts a tool result longer than this before the
	// model reads it (default DefaultMaxToolResultBytes).
	MaxToolResultBytes int
	// InitialState is the state of a session the loop creates (default {});
	// SessionTTL its time to live (default: the server's).
	InitialState json.RawMessage
	SessionTTL   time.Duration
	// Checkpoints, when set, checkpoints a run at the steps the app marks
	// and restores a missing session from the run's latest checkpoint.
	Checkpoints *Checkpoints
	// ModelTools chooses the tools the model may call (default: all but
	// LoopTools). A tool whose input has a session_id property is offered
	// without it; the loop fills in SessionID, so the model can neither
	// forget it nor reach another session.
	ModelTools func(name string) bool
}

// Checkpoints is where and when the loop checkpoints.
type Checkpoints struct {
	// Run is the run's name (the bound user's own), Workflow its workflow.
	// A run outlives sessions: a user back on another device, long after
	// the session expired, continues from its latest checkpoint.
	Run, Workflow string
	// Mark says, after each tool call of the model, whether an app step is
	// done: the session state is then checkpointed under the label.
	Mark func(call Call, result ToolResult) (cp Checkpoint, ok bool)
}

// Checkpoint is a marked step: Label names what was reached (a label the
// run already has, from a step reached again, gets the suffix
// "-r<revision>"); NextStep is the step the run continues with.
type Checkpoint struct {
	Label, NextStep string
}

// Call is one tool call. Step is the model call (1-based) that asked for
// it; 0 is a call the loop made itself.
type Call struct {
	Step int
	ID   string
	Name string
	Args json.RawMessage
}

// TraceEntry is a call with its outcome: the result, Err when it could not
// be made at all, and the label of the checkpoint taken after it.
type TraceEntry struct {
	Call
	Result     ToolResult
	Err        string
	Checkpoint string
}

// Result is a turn. On an error it holds what happened up to it.
type Result struct {
	Answer string
	// State is the session state after the turn.
	State json.RawMessage
	// RestoredFrom is the checkpoint label a missing session was restored
	// from ("" when the session existed or there was none).
	RestoredFrom string
	Trace        []TraceEntry
	// Steps is the number of model calls; Usage their tokens.
	Steps int
	Usage llm.Usage
	// Accounting is context_build's account of the built context.
	Accounting json.RawMessage
	// UserMessageSeq and AnswerMessageSeq are the seqs the session stored
	// the turn's messages under (a memory's evidence cites them).
	UserMessageSeq, AnswerMessageSeq int64
}

// Agent runs turns in one session. Turns of one Agent run one at a time.
type Agent struct {
	cfg     Config
	counter tokens.Counter

	mu      sync.Mutex
	started bool // run_start done for Checkpoints.Run
}

// New checks cfg and returns an agent.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.Model == nil || cfg.Tools == nil:
		return nil, fmt.Errorf("agent: a model and tools are required")
	case cfg.ModelName == "":
		return nil, fmt.Errorf("agent: a model name is required (it picks the tokenizer)")
	case cfg.SessionID == "":
		return nil, fmt.Errorf("agent: a session id is required")
	case cfg.BudgetTokens <= 0:
		return nil, fmt.Errorf("agent: budget_tokens must be positive")
	case cfg.ReserveTokens < 0 || cfg.ReserveTokens >= cfg.BudgetTokens:
		return nil, fmt.Errorf("agent: reserve_tokens must be within [0, budget_tokens)")
	case cfg.MaxAnswerTokens < 0 || cfg.MaxSteps < 0 || cfg.MaxToolResultBytes < 0:
		return nil, fmt.Errorf("agent: negative limits")
	case cfg.Checkpoints != nil && (cfg.Checkpoints.Run == "" || cfg.Checkpoints.Workflow == "" || cfg.Checkpoints.Mark == nil):
		return nil, fmt.Errorf("agent: checkpoints need a run, a workflow and a Mark function")
	case len(cfg.InitialState) > 0 && !isObject(cfg.InitialState):
		return nil, fmt.Errorf("agent: the initial state must be a JSON object")
	}
	if cfg.ReserveTokens == 0 {
		cfg.ReserveTokens = cfg.BudgetTokens / 4
	}
	if cfg.MaxAnswerTokens > cfg.ReserveTokens {
		return nil, fmt.Errorf("agent: max_answer_tokens (%d) must fit in reserve_tokens (%d)", cfg.MaxAnswerTokens, cfg.ReserveTokens)
	}
	if cfg.MaxSteps == 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	if cfg.MaxToolResultBytes == 0 {
		cfg.MaxToolResultBytes = DefaultMaxToolResultBytes
	}
	if len(cfg.InitialState) == 0 {
		cfg.InitialState = json.RawMessage("{}")
	}
	if cfg.ModelTools == nil {
		cfg.ModelTools = func(name string) bool { return !slices.Contains(LoopTools, name) }
	}
	return &Agent{cfg: cfg, counter: tokens.ForModel(cfg.ModelName)}, nil
}

// turn is the work of one Turn.
type turn struct {
	a   *Agent
	res *Result
	// visible are the tools offered to the model; pinned those of them
	// whose session_id the loop fills in.
	visible []llm.Tool
	pinned  map[string]bool
}

// Turn answers one user message: it loads (or creates or restores) the
// session, stores the message, builds the context under the budget, lets
// the model call tools until it answers (at most MaxSteps model calls),
// checkpoints at the marked steps and stores the answer. A tool call of the
// model that fails goes back to it as the tool's result; what fails the
// turn is the model, the loop's own calls, a budget or the step bound.
func (a *Agent) Turn(ctx context.Context, userText string) (Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	res := Result{}
	if strings.TrimSpace(userText) == "" {
		return res, fmt.Errorf("agent: empty user message")
	}
	t := &turn{a: a, res: &res}
	err := t.run(ctx, userText)
	return res, err
}

func (t *turn) run(ctx context.Context, userText string) error {
	cfg := &t.a.cfg
	all, err := cfg.Tools.List(ctx)
	if err != nil {
		return fmt.Errorf("agent: list tools: %w", err)
	}
	if err := t.offer(all); err != nil {
		return err
	}
	if err := t.loadSession(ctx); err != nil {
		return err
	}
	seq, err := t.appendMessage(ctx, llm.RoleUser, userText)
	if err != nil {
		return err
	}
	t.res.UserMessageSeq = seq
	msgs, err := t.buildContext(ctx, userText)
	if err != nil {
		return err
	}
	toolTokens := t.toolTokens()
	for step := 1; ; step++ {
		if step > cfg.MaxSteps {
			return fmt.Errorf("agent: %w (%d model calls)", ErrMaxSteps, cfg.MaxSteps)
		}
		if n := tokens.ChatTokens(t.a.counter, msgs) + toolTokens; n > cfg.BudgetTokens-cfg.MaxAnswerTokens {
			return fmt.Errorf("agent: step %d: %w: %d tokens, the budget leaves %d", step, ErrOverBudget, n, cfg.BudgetTokens-cfg.MaxAnswerTokens)
		}
		resp, err := cfg.Model.Complete(ctx, llm.ChatRequest{Model: cfg.ModelName, Messages: msgs, Tools: t.visible,
			MaxTokens: cfg.MaxAnswerTokens, Temperature: cfg.Temperature})
		t.res.Steps = step
		if err != nil {
			return fmt.Errorf("agent: step %d: model: %w", step, err)
		}
		t.res.Usage.PromptTokens += resp.Usage.PromptTokens
		t.res.Usage.CompletionTokens += resp.Usage.CompletionTokens
		t.res.Usage.TotalTokens += resp.Usage.TotalTokens
		if len(resp.ToolCalls) == 0 {
			if resp.Content == "" {
				return fmt.Errorf("agent: step %d: %w (finish reason %q)", step, ErrNoAnswer, resp.FinishReason)
			}
			t.res.Answer = resp.Content
			break
		}
		calls := slices.Clone(resp.ToolCalls)
		for i := range calls {
			if calls[i].ID == "" {
				// Some OpenAI-compatible servers send calls without ids;
				// the tool messages still need one to answer.
				calls[i].ID = fmt.Sprintf("call_%d_%d", step, i+1)
			}
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: resp.Content, ToolCalls: calls})
		for _, tc := range calls {
			content, err := t.modelCall(ctx, step, tc)
			if err != nil {
				return err
			}
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: content})
		}
	}
	seq, err = t.appendMessage(ctx, llm.RoleAssistant, t.res.Answer)
	if err != nil {
		return err
	}
	t.res.AnswerMessageSeq = seq
	st, err := t.sessionState(ctx)
	if err != nil {
		return err
	}
	t.res.State = st
	return nil
}

// offer checks the loop's tools are there and chooses the model's.
func (t *turn) offer(all []llm.Tool) error {
	cfg := &t.a.cfg
	need := []string{ToolSessionGet, ToolSessionPut, ToolMessageAppend, ToolContextBuild}
	if cfg.Checkpoints != nil {
		need = append(need, ToolRunStart, ToolRunGet, ToolRunCheckpoint, ToolRunRestore)
	}
	have := map[string]bool{}
	for _, tl := range all {
		have[tl.Name] = true
	}
	var missing []string
	for _, n := range need {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("agent: %w: %s", ErrMissingTool, strings.Join(missing, ", "))
	}
	t.pinned = map[string]bool{}
	for _, tl := range all {
		if !cfg.ModelTools(tl.Name) {
			continue
		}
		if params, ok := withoutSessionID(tl.Parameters); ok {
			tl.Parameters = params
			t.pinned[tl.Name] = true
		}
		t.visible = append(t.visible, tl)
	}
	return nil
}

// withoutSessionID returns the schema without its session_id property,
// and whether it had one.
func withoutSessionID(schema json.RawMessage) (json.RawMessage, bool) {
	var s map[string]any
	if json.Unmarshal(schema, &s) != nil {
		return schema, false
	}
	props, _ := s["properties"].(map[string]any)
	if _, ok := props["session_id"]; !ok {
		return schema, false
	}
	delete(props, "session_id")
	if req, ok := s["required"].([]any); ok {
		s["required"] = slices.DeleteFunc(req, func(v any) bool { return v == "session_id" })
	}
	b, err := json.Marshal(s)
	if err != nil {
		return schema, false
	}
	return b, true
}

// toolTokens estimates what the tool definitions cost in a prompt, the way
// the context builder counts them.
func (t *turn) toolTokens() int {
	if len(t.visible) == 0 {
		return 0
	}
	b, _ := json.Marshal(t.visible)
	return tokens.MessageTokens(t.a.counter, llm.Message{Role: llm.RoleSystem, Content: "Tools:\n" + string(b)})
}

// own calls a tool for the loop itself; a failed result is a
// *ToolFailedError.
func (t *turn) own(ctx context.Context, name string, args any) (ToolResult, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return ToolResult{}, fmt.Errorf("agent: encode %s arguments: %w", name, err)
	}
	e := TraceEntry{Call: Call{Name: name, Args: b}}
	r, err := t.a.cfg.Tools.Call(ctx, name, b)
	e.Result = r
	if err != nil {
		e.Err = err.Error()
	}
	t.res.Trace = append(t.res.Trace, e)
	if err != nil {
		return r, fmt.Errorf("agent: %s: %w", name, err)
	}
	if r.IsError {
		return r, &ToolFailedError{Name: name, Result: r}
	}
	return r, nil
}

// decode reads a loop call's JSON result into v.
func decode(name string, r ToolResult, v any) error {
	if err := json.Unmarshal(r.JSON, v); err != nil {
		return fmt.Errorf("agent: %s answered %q: %w", name, snippet(r.Text), err)
	}
	return nil
}

// notFound reports whether err is a loop call that found nothing.
func notFound(err error) bool {
	var tf *ToolFailedError
	return errors.As(err, &tf) && strings.HasSuffix(tf.Result.ErrorType(), "not-found")
}

// loadSession reads the session; a missing or expired one is created,
// from the run's latest checkpoint when there is one.
func (t *turn) loadSession(ctx context.Context) error {
	cfg := &t.a.cfg
	_, err := t.own(ctx, ToolSessionGet, map[string]string{"session_id": cfg.SessionID})
	if err == nil || !notFound(err) {
		return err
	}
	state := cfg.InitialState
	if cp := cfg.Checkpoints; cp != nil {
		r, err := t.own(ctx, ToolRunRestore, map[string]string{"run": cp.Run})
		switch {
		case err == nil:
			var out struct {
				Label string          `json:"label"`
				State json.RawMessage `json:"state"`
			}
			if err := decode(ToolRunRestore, r, &out); err != nil {
				return err
			}
			if isObject(out.State) {
				state, t.res.RestoredFrom = out.State, out.Label
			}
		case !notFound(err):
			return err
		}
	}
	args := map[string]any{"session_id": cfg.SessionID, "state": state}
	if cfg.SessionTTL > 0 {
		args["ttl_seconds"] = int(cfg.SessionTTL / time.Second)
	}
	_, err = t.own(ctx, ToolSessionPut, args)
	return err
}

// sessionState reads the session's current state.
func (t *turn) sessionState(ctx context.Context) (json.RawMessage, error) {
	r, err := t.own(ctx, ToolSessionGet, map[string]string{"session_id": t.a.cfg.SessionID})
	if err != nil {
		return nil, err
	}
	var out struct {
		State json.RawMessage `json:"state"`
	}
	if err := decode(ToolSessionGet, r, &out); err != nil {
		return nil, err
	}
	return out.State, nil
}

// appendMessage stores one message of the session and returns its seq.
func (t *turn) appendMessage(ctx context.Context, role llm.Role, content string) (int64, error) {
	r, err := t.own(ctx, ToolMessageAppend, map[string]any{"session_id": t.a.cfg.SessionID,
		"messages": []map[string]string{{"role": string(role), "content": content}}})
	if err != nil {
		return 0, err
	}
	var out struct {
		Messages []struct {
			Seq int64 `json:"seq"`
		} `json:"messages"`
	}
	if err := decode(ToolMessageAppend, r, &out); err != nil {
		return 0, err
	}
	if len(out.Messages) != 1 || out.Messages[0].Seq <= 0 {
		return 0, fmt.Errorf("agent: %s answered %q, want the seq of one message", ToolMessageAppend, snippet(r.Text))
	}
	return out.Messages[0].Seq, nil
}

// buildContext asks context_build for what the model sees: the system
// prompt, the session state, memories, history and the user's message,
// under the budget less the reserve, the tool definitions and a note
// naming the stored message (a model citing evidence needs its seq).
func (t *turn) buildContext(ctx context.Context, userText string) ([]llm.Message, error) {
	cfg := &t.a.cfg
	note := llm.Message{Role: llm.RoleSystem, Content: fmt.Sprintf("The user's message below is stored as message seq %d.", t.res.UserMessageSeq)}
	reserve := cfg.ReserveTokens + t.toolTokens() + tokens.MessageTokens(t.a.counter, note)
	if reserve >= cfg.BudgetTokens {
		return nil, fmt.Errorf("agent: %w: the reserve and the tool definitions take %d of %d tokens", ErrOverBudget, reserve, cfg.BudgetTokens)
	}
	r, err := t.own(ctx, ToolContextBuild, map[string]any{"query": userText, "session_id": cfg.SessionID,
		"budget_tokens": cfg.BudgetTokens, "reserve_tokens": reserve, "model": cfg.ModelName, "system": cfg.System})
	if err != nil {
		return nil, err
	}
	var out struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
			Name    string `json:"name"`
		} `json:"messages"`
		Accounting json.RawMessage `json:"accounting"`
	}
	if err := decode(ToolContextBuild, r, &out); err != nil {
		return nil, err
	}
	t.res.Accounting = out.Accounting
	msgs := make([]llm.Message, 0, len(out.Messages)+1)
	for _, m := range out.Messages {
		msgs = append(msgs, llm.Message{Role: llm.Role(m.Role), Content: m.Content, Name: m.Name})
	}
	n := len(msgs)
	if n == 0 || msgs[n-1].Role != llm.RoleUser || msgs[n-1].Content != userText {
		return nil, fmt.Errorf("agent: %s did not end with the user's message", ToolContextBuild)
	}
	// The message was stored before the build, so the newest history
	// repeats the query; the model reads it once.
	if n >= 2 && msgs[n-2].Role == llm.RoleUser && msgs[n-2].Content == userText {
		msgs = slices.Delete(msgs, n-2, n-1)
		n--
	}
	return slices.Insert(msgs, n-1, note), nil
}

// modelCall runs one tool call of the model and returns what the model
// reads back. Only a cancelled context or a failed checkpoint ends the
// turn; anything else the tool or its arguments get wrong is the result.
func (t *turn) modelCall(ctx context.Context, step int, tc llm.ToolCall) (string, error) {
	cfg := &t.a.cfg
	args := json.RawMessage(bytes.TrimSpace([]byte(tc.Arguments)))
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	e := TraceEntry{Call: Call{Step: step, ID: tc.ID, Name: tc.Name, Args: args}}
	offered := slices.ContainsFunc(t.visible, func(tl llm.Tool) bool { return tl.Name == tc.Name })
	switch {
	case !offered:
		e.Result = errorResult("unknown-tool", fmt.Sprintf("there is no tool %q; the tools are: %s", tc.Name, toolNames(t.visible)))
	case !isObject(args):
		e.Result = errorResult("invalid-arguments", "the arguments must be a JSON object")
	default:
		if t.pinned[tc.Name] {
			var m map[string]json.RawMessage
			_ = json.Unmarshal(args, &m)
			m["session_id"], _ = json.Marshal(cfg.SessionID)
			args, _ = json.Marshal(m)
			e.Args = args
		}
		r, err := cfg.Tools.Call(ctx, tc.Name, args)
		if err != nil {
			if ctx.Err() != nil {
				return "", fmt.Errorf("agent: step %d: %s: %w", step, tc.Name, ctx.Err())
			}
			e.Err = err.Error()
			r = errorResult("tool-unavailable", err.Error())
		}
		e.Result = r
	}
	t.res.Trace = append(t.res.Trace, e)
	if cp := cfg.Checkpoints; cp != nil {
		if mark, ok := cp.Mark(e.Call, e.Result); ok {
			at := len(t.res.Trace) - 1
			label, err := t.checkpoint(ctx, mark)
			if err != nil {
				return "", err
			}
			t.res.Trace[at].Checkpoint = label
		}
	}
	return clip(e.Result.Text, cfg.MaxToolResultBytes), nil
}

// checkpoint commits the session state to the run under the mark's label,
// starting the run the first time, and returns the label it took.
func (t *turn) checkpoint(ctx context.Context, mark Checkpoint) (string, error) {
	cp := t.a.cfg.Checkpoints
	st, err := t.sessionState(ctx)
	if err != nil {
		return "", err
	}
	if !t.a.started {
		if _, err := t.own(ctx, ToolRunStart, map[string]any{"run": cp.Run, "workflow": cp.Workflow, "state": st}); err != nil {
			return "", err
		}
		t.a.started = true
	}
	label := mark.Label
	args := map[string]any{"run": cp.Run, "label": label, "state": st, "step": mark.NextStep}
	_, err = t.own(ctx, ToolRunCheckpoint, args)
	var tf *ToolFailedError
	if errors.As(err, &tf) && tf.Result.ErrorType() == "checkpoint-exists" {
		// The step was reached again (the user changed their mind, came
		// back later): checkpoint it again under the revision it makes.
		r, err := t.own(ctx, ToolRunGet, map[string]string{"run": cp.Run})
		if err != nil {
			return "", err
		}
		var out struct {
			Revision int64 `json:"revision"`
		}
		if err := decode(ToolRunGet, r, &out); err != nil {
			return "", err
		}
		label = fmt.Sprintf("%s-r%d", mark.Label, out.Revision+1)
		args["label"] = label
		_, err = t.own(ctx, ToolRunCheckpoint, args)
		return label, err
	}
	return label, err
}

// clip cuts s to at most n bytes on a rune boundary, saying so.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[cut: %d more bytes]", len(s)-cut)
}

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

func snippet(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
