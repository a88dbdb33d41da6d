package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mementohq/memento/llm"
)

// Func is a local tool: a typed Go function with the JSON Schema of its
// input inferred from In. Make one with NewFunc.
type Func struct {
	tool     llm.Tool
	resolved *jsonschema.Resolved
	call     func(ctx context.Context, args json.RawMessage) (ToolResult, error)
}

// ToolError is an error a Func returns for the model to read with its kind,
// like Memento's tool errors ({"error":{"type","detail"}}). Any other error
// of a Func reaches the model as type "tool-failed".
type ToolError struct {
	Type   string
	Detail string
}

func (e *ToolError) Error() string { return e.Type + ": " + e.Detail }

// NewFunc makes a local tool of fn. In is the arguments object (a struct;
// fields without omitempty are required, a `jsonschema:"..."` tag is the
// field's description); Out is marshalled as the result. Arguments that do
// not validate against the schema never reach fn.
func NewFunc[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) (*Func, error) {
	if name == "" {
		return nil, fmt.Errorf("agent: a tool needs a name")
	}
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %s: infer the input schema: %w", name, err)
	}
	if schema.Type != "object" {
		return nil, fmt.Errorf("agent: tool %s: input must be a struct (an object), not %q", name, schema.Type)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %s: resolve the input schema: %w", name, err)
	}
	params, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %s: encode the input schema: %w", name, err)
	}
	f := &Func{tool: llm.Tool{Name: name, Description: description, Parameters: params}, resolved: resolved}
	f.call = func(ctx context.Context, args json.RawMessage) (ToolResult, error) {
		var in In
		dec := json.NewDecoder(bytes.NewReader(args))
		if err := dec.Decode(&in); err != nil {
			return errorResult("invalid-arguments", err.Error()), nil
		}
		out, err := fn(ctx, in)
		if err != nil {
			if ctx.Err() != nil {
				return ToolResult{}, ctx.Err()
			}
			var te *ToolError
			if errors.As(err, &te) {
				return errorResult(te.Type, te.Detail), nil
			}
			return errorResult("tool-failed", err.Error()), nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return ToolResult{}, fmt.Errorf("agent: tool %s: encode the result: %w", name, err)
		}
		return ToolResult{Text: string(b), JSON: b}, nil
	}
	return f, nil
}

// Tool is the tool as the model sees it.
func (f *Func) Tool() llm.Tool { return f.tool }

// Local is a set of local tools.
type Local struct {
	tools []llm.Tool
	funcs map[string]*Func
}

// NewLocal makes Tools of fns; two with one name are ErrToolClash.
func NewLocal(fns ...*Func) (*Local, error) {
	l := &Local{funcs: map[string]*Func{}}
	for _, f := range fns {
		if _, dup := l.funcs[f.tool.Name]; dup {
			return nil, fmt.Errorf("%w: %q", ErrToolClash, f.tool.Name)
		}
		l.funcs[f.tool.Name] = f
		l.tools = append(l.tools, f.tool)
	}
	return l, nil
}

// List returns the tools.
func (l *Local) List(context.Context) ([]llm.Tool, error) {
	return append([]llm.Tool(nil), l.tools...), nil
}

// Call validates args against the tool's schema and runs it. Arguments
// that are not a valid object for it come back as an "invalid-arguments"
// result for the model, never as a call with zero values.
func (l *Local) Call(ctx context.Context, name string, args json.RawMessage) (ToolResult, error) {
	f, ok := l.funcs[name]
	if !ok {
		return ToolResult{}, fmt.Errorf("%w: %q", ErrUnknownTool, name)
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	var inst any
	if err := json.Unmarshal(args, &inst); err != nil {
		return errorResult("invalid-arguments", "arguments are not JSON: "+err.Error()), nil
	}
	if err := f.resolved.Validate(inst); err != nil {
		return errorResult("invalid-arguments", err.Error()), nil
	}
	return f.call(ctx, args)
}
