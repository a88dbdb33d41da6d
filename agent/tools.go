package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mementohq/memento/llm"
)

// Tools is what the loop and the model call. Memento's own tools come over
// MCP (NewMCP); app tools can be Go functions (Local); Join combines them.
type Tools interface {
	// List returns the tools, each with its input JSON Schema.
	List(ctx context.Context) ([]llm.Tool, error)
	// Call runs a tool. A tool that ran and failed answers a result with
	// IsError; an error means it could not be called at all (transport,
	// unknown tool).
	Call(ctx context.Context, name string, args json.RawMessage) (ToolResult, error)
}

// ToolResult is a tool's answer. Text is what the model reads; JSON is the
// structured answer when the tool gave one (for Memento's tools the same
// JSON as Text).
type ToolResult struct {
	Text    string
	JSON    json.RawMessage
	IsError bool
}

// ErrorType is the kind of a failed result: the "type" of Memento's error
// object {"error":{"type","detail"}} ("session-not-found", ...), "" when
// the result is not an error or carries no such object.
func (r ToolResult) ErrorType() string {
	if !r.IsError {
		return ""
	}
	var e struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	for _, b := range [][]byte{r.JSON, []byte(r.Text)} {
		if len(b) > 0 && json.Unmarshal(b, &e) == nil && e.Error.Type != "" {
			return e.Error.Type
		}
	}
	return ""
}

// errorResult is a failed result in Memento's error shape, so the model
// reads every tool error alike.
func errorResult(kind, detail string) ToolResult {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"type": kind, "detail": detail}})
	return ToolResult{Text: string(b), JSON: b, IsError: true}
}

// ErrUnknownTool is wrapped by a call to a tool no Tools has.
var ErrUnknownTool = errors.New("unknown tool")

// ErrToolClash is a name two joined Tools both have.
var ErrToolClash = errors.New("two tools share a name")

// Join combines several Tools into one. Their names must not clash: List
// fails with ErrToolClash when they do, rather than let one shadow the other.
func Join(parts ...Tools) Tools {
	return &joined{parts: parts}
}

type joined struct {
	parts []Tools

	mu    sync.Mutex
	route map[string]Tools
}

func (j *joined) List(ctx context.Context) ([]llm.Tool, error) {
	var all []llm.Tool
	route := map[string]Tools{}
	for _, p := range j.parts {
		ts, err := p.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if _, dup := route[t.Name]; dup {
				return nil, fmt.Errorf("%w: %q", ErrToolClash, t.Name)
			}
			route[t.Name] = p
			all = append(all, t)
		}
	}
	j.mu.Lock()
	j.route = route
	j.mu.Unlock()
	return all, nil
}

func (j *joined) Call(ctx context.Context, name string, args json.RawMessage) (ToolResult, error) {
	j.mu.Lock()
	p, ok := j.route[name]
	listed := j.route != nil
	j.mu.Unlock()
	if !ok && !listed {
		// Called before any List: route by listing now.
		if _, err := j.List(ctx); err != nil {
			return ToolResult{}, err
		}
		j.mu.Lock()
		p, ok = j.route[name]
		j.mu.Unlock()
	}
	if !ok {
		return ToolResult{}, fmt.Errorf("%w: %q", ErrUnknownTool, name)
	}
	return p.Call(ctx, name, args)
}

// toolNames lists names sorted, for messages.
func toolNames(ts []llm.Tool) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
