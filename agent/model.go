package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mementohq/memento/llm"
)

// ModelFunc is an llm.Chat that answers with a Go function: a scripted
// model for offline runs and tests, whose policy decides from the request
// (the messages so far, the tool results, the tools offered).
type ModelFunc func(ctx context.Context, req llm.ChatRequest) (llm.ChatResponse, error)

var _ llm.Chat = ModelFunc(nil)

// Complete calls f.
func (f ModelFunc) Complete(ctx context.Context, req llm.ChatRequest) (llm.ChatResponse, error) {
	return f(ctx, req)
}

// Answer is a final answer.
func Answer(text string) llm.ChatResponse {
	return llm.ChatResponse{Content: text, FinishReason: "stop"}
}

// CallTool is an answer that calls one tool with args marshalled as JSON
// (a json.RawMessage or string is sent as it is). The loop names calls
// that have no id.
func CallTool(name string, args any) llm.ChatResponse {
	return CallTools(ToolCall(name, args))
}

// CallTools is an answer that calls several tools, in order.
func CallTools(calls ...llm.ToolCall) llm.ChatResponse {
	return llm.ChatResponse{ToolCalls: calls, FinishReason: "tool_calls"}
}

// ToolCall is one call of name with args, for CallTools.
func ToolCall(name string, args any) llm.ToolCall {
	var s string
	switch a := args.(type) {
	case string:
		s = a
	case json.RawMessage:
		s = string(a)
	case nil:
		s = "{}"
	default:
		b, err := json.Marshal(a)
		if err != nil {
			panic(fmt.Sprintf("agent.ToolCall %s: arguments do not marshal: %v", name, err))
		}
		s = string(b)
	}
	return llm.ToolCall{Name: name, Arguments: s}
}

// ToolResults returns the tool messages after the last assistant message
// of msgs with the name of the call each answers: what a scripted policy
// reads to decide its next step.
func ToolResults(msgs []llm.Message) []NamedResult {
	last := -1
	for i, m := range msgs {
		if m.Role == llm.RoleAssistant {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	names := map[string]string{}
	for _, tc := range msgs[last].ToolCalls {
		names[tc.ID] = tc.Name
	}
	var out []NamedResult
	for _, m := range msgs[last+1:] {
		if m.Role == llm.RoleTool {
			out = append(out, NamedResult{Name: names[m.ToolCallID], Content: m.Content})
		}
	}
	return out
}

// NamedResult is a tool result as the model got it.
type NamedResult struct {
	Name    string
	Content string
}
