package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"

	"github.com/mementohq/memento/agent"
	"github.com/mementohq/memento/llm"
)

// fakeTools stands in for Memento's MCP tools in the loop's unit tests: the
// same names, argument and result shapes and error objects, kept in maps.
// The integration test runs the loop over the real MCP server.
type fakeTools struct {
	mu       sync.Mutex
	sessions map[string]map[string]any
	messages map[string][]map[string]any
	runs     map[string]*fakeRun
	calls    []string
	// fail makes a tool answer an error of this type.
	fail map[string]string
	// broken makes a tool's call itself fail (a transport error).
	broken map[string]bool
	// big is the size of the text the "big" tool answers.
	big int
}

type fakeRun struct {
	workflow    string
	checkpoints []fakeCheckpoint
}

type fakeCheckpoint struct {
	label, step string
	state       map[string]any
}

func newFake() *fakeTools {
	return &fakeTools{sessions: map[string]map[string]any{}, messages: map[string][]map[string]any{},
		runs: map[string]*fakeRun{}, fail: map[string]string{}, broken: map[string]bool{}}
}

func schema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
}

const sid = `"session_id":{"type":"string"}`

func (f *fakeTools) List(context.Context) ([]llm.Tool, error) {
	return []llm.Tool{
		{Name: "session_get", Description: "read the session", Parameters: schema(sid, "session_id")},
		{Name: "session_put", Parameters: schema(sid+`,"state":{"type":"object"},"ttl_seconds":{"type":"integer"}`, "session_id", "state")},
		{Name: "session_patch", Description: "merge-patch the session state", Parameters: schema(sid+`,"patch":{"type":"object"}`, "session_id", "patch")},
		{Name: "message_append", Parameters: schema(sid+`,"messages":{"type":"array"}`, "session_id", "messages")},
		{Name: "context_build", Parameters: schema(`"query":{"type":"string"},`+sid+`,"budget_tokens":{"type":"integer"}`, "query", "budget_tokens")},
		{Name: "run_start", Parameters: schema(`"run":{"type":"string"},"workflow":{"type":"string"},"state":{"type":"object"}`, "run", "workflow", "state")},
		{Name: "run_get", Parameters: schema(`"run":{"type":"string"}`, "run")},
		{Name: "run_checkpoint", Parameters: schema(`"run":{"type":"string"},"label":{"type":"string"},"state":{"type":"object"},"step":{"type":"string"}`, "run", "label", "state", "step")},
		{Name: "run_restore", Parameters: schema(`"run":{"type":"string"},"label":{"type":"string"}`, "run")},
		{Name: "big", Parameters: schema(``)},
	}, nil
}

func errJSON(kind, detail string) agent.ToolResult {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"type": kind, "detail": detail}})
	return agent.ToolResult{Text: string(b), JSON: b, IsError: true}
}

func okJSON(v any) agent.ToolResult {
	b, _ := json.Marshal(v)
	return agent.ToolResult{Text: string(b), JSON: b}
}

func (f *fakeTools) Call(ctx context.Context, name string, raw json.RawMessage) (agent.ToolResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	if f.broken[name] {
		return agent.ToolResult{}, fmt.Errorf("connection reset")
	}
	if kind := f.fail[name]; kind != "" {
		return errJSON(kind, name+" failed"), nil
	}
	var a struct {
		SessionID string           `json:"session_id"`
		State     map[string]any   `json:"state"`
		Patch     map[string]any   `json:"patch"`
		Messages  []map[string]any `json:"messages"`
		Query     string           `json:"query"`
		Budget    int              `json:"budget_tokens"`
		Reserve   int              `json:"reserve_tokens"`
		System    string           `json:"system"`
		Run       string           `json:"run"`
		Workflow  string           `json:"workflow"`
		Label     string           `json:"label"`
		Step      string           `json:"step"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return errJSON("invalid-request", err.Error()), nil
	}
	sessionOut := func(id string) agent.ToolResult {
		return okJSON(map[string]any{"session_id": id, "user_id": "u1", "state": f.sessions[id], "revision": 1})
	}
	switch name {
	case "session_get":
		if _, ok := f.sessions[a.SessionID]; !ok {
			return errJSON("session-not-found", "no session "+a.SessionID), nil
		}
		return sessionOut(a.SessionID), nil
	case "session_put":
		f.sessions[a.SessionID] = a.State
		return sessionOut(a.SessionID), nil
	case "session_patch":
		s, ok := f.sessions[a.SessionID]
		if !ok {
			return errJSON("session-not-found", "no session "+a.SessionID), nil
		}
		maps.Copy(s, a.Patch)
		return sessionOut(a.SessionID), nil
	case "message_append":
		var out []map[string]any
		for _, m := range a.Messages {
			seq := len(f.messages[a.SessionID]) + 1
			f.messages[a.SessionID] = append(f.messages[a.SessionID], m)
			out = append(out, map[string]any{"seq": seq, "role": m["role"]})
		}
		return okJSON(map[string]any{"session_id": a.SessionID, "messages": out}), nil
	case "context_build":
		// Like the builder: system, state, the history (the message just
		// stored included), then the query.
		msgs := []map[string]any{}
		if a.System != "" {
			msgs = append(msgs, map[string]any{"role": "system", "content": a.System})
		}
		st, _ := json.Marshal(f.sessions[a.SessionID])
		msgs = append(msgs, map[string]any{"role": "system", "content": "Session state:\n" + string(st)})
		for _, m := range f.messages[a.SessionID] {
			msgs = append(msgs, map[string]any{"role": m["role"], "content": m["content"]})
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": a.Query})
		return okJSON(map[string]any{"messages": msgs, "accounting": map[string]any{"budget_tokens": a.Budget, "reserve_tokens": a.Reserve}}), nil
	case "run_start":
		if _, ok := f.runs[a.Run]; !ok {
			f.runs[a.Run] = &fakeRun{workflow: a.Workflow}
		}
		return okJSON(map[string]any{"run": a.Run, "status": "running"}), nil
	case "run_checkpoint":
		r, ok := f.runs[a.Run]
		if !ok {
			return errJSON("run-not-found", a.Run), nil
		}
		for _, c := range r.checkpoints {
			if c.label == a.Label {
				return errJSON("checkpoint-exists", a.Label), nil
			}
		}
		r.checkpoints = append(r.checkpoints, fakeCheckpoint{label: a.Label, step: a.Step, state: a.State})
		return okJSON(map[string]any{"run": a.Run, "label": a.Label, "revision": len(r.checkpoints)}), nil
	case "run_get":
		r, ok := f.runs[a.Run]
		if !ok {
			return errJSON("run-not-found", a.Run), nil
		}
		// One commit per checkpoint, after the start.
		return okJSON(map[string]any{"run": a.Run, "revision": len(r.checkpoints) + 1}), nil
	case "run_restore":
		r, ok := f.runs[a.Run]
		if !ok {
			return errJSON("run-not-found", a.Run), nil
		}
		if len(r.checkpoints) == 0 {
			return errJSON("checkpoint-not-found", a.Run), nil
		}
		c := r.checkpoints[len(r.checkpoints)-1]
		return okJSON(map[string]any{"run": a.Run, "label": c.label, "revision": len(r.checkpoints), "state": c.state}), nil
	case "big":
		b := make([]byte, f.big)
		for i := range b {
			b[i] = 'x'
		}
		return agent.ToolResult{Text: string(b)}, nil
	}
	return agent.ToolResult{}, fmt.Errorf("%w: %q", agent.ErrUnknownTool, name)
}

func (f *fakeTools) callNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}
