package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento/llm"
)

// MCP is Tools over a client session of the official MCP SDK, so the loop
// uses Memento's tools exactly as any MCP client does (and any other MCP
// server's tools the same way).
type MCP struct {
	s *gomcp.ClientSession
}

// NewMCP adapts a connected client session.
func NewMCP(s *gomcp.ClientSession) *MCP { return &MCP{s: s} }

// List returns the server's tools, every page.
func (m *MCP) List(ctx context.Context) ([]llm.Tool, error) {
	var out []llm.Tool
	for t, err := range m.s.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list MCP tools: %w", err)
		}
		params, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("MCP tool %s: encode its input schema: %w", t.Name, err)
		}
		out = append(out, llm.Tool{Name: t.Name, Description: t.Description, Parameters: params})
	}
	return out, nil
}

// Call calls a tool. Its text contents, joined, are Text; its structured
// content is JSON (or the text, when that is JSON and nothing structured
// came).
func (m *MCP) Call(ctx context.Context, name string, args json.RawMessage) (ToolResult, error) {
	p := &gomcp.CallToolParams{Name: name}
	if len(args) > 0 {
		p.Arguments = args
	}
	res, err := m.s.CallTool(ctx, p)
	if err != nil {
		return ToolResult{}, fmt.Errorf("MCP tool %s: %w", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*gomcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	out := ToolResult{Text: strings.Join(texts, "\n"), IsError: res.IsError}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return ToolResult{}, fmt.Errorf("MCP tool %s: encode its structured result: %w", name, err)
		}
		out.JSON = b
	} else if json.Valid([]byte(out.Text)) {
		out.JSON = json.RawMessage(out.Text)
	}
	if out.Text == "" {
		out.Text = string(out.JSON)
	}
	return out, nil
}
