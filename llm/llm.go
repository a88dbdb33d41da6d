package llm

import (
	"context"
	"encoding/json"
	"math"

	"github.com/viterin/vek/vek32"
)

// Embedder turns texts into vectors. Every returned vector is L2-normalised
// float32 of length Dim(), so cosine similarity is a dot product. An
// implementation may return an all-zero vector for a text it cannot embed
// at all (see its documentation); its dot product with anything is 0.
//
// Model() is the identity stored with every vector: it changes whenever the
// output for the same input would change (model, dimension, weights,
// tokenisation), because a change triggers re-embedding of stored vectors.
type Embedder interface {
	Model() string
	Dim() int
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Chat is a chat-completion model, used for extraction, compaction and
// (later) the agent loop with tool calls.
type Chat interface {
	Complete(ctx context.Context, req ChatRequest) (ChatResponse, error)
}

// Role is the author of a chat message.
type Role string

// The roles of the OpenAI chat protocol.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one chat message. An assistant message may carry ToolCalls; a
// tool message answers one of them and names it in ToolCallID.
//
// Its JSON is the chat protocol's names (role, content, name, tool_calls,
// tool_call_id), as the HTTP API and MCP tools return a built context.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a function call the model asked for. Arguments is the JSON
// text the model produced; it is not guaranteed to be valid JSON.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a function the model may call. Parameters is a JSON Schema of the
// arguments object.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

// ResponseFormat asks for a JSON answer. With a Schema it is OpenAI's
// {"type":"json_schema","json_schema":{name,schema,strict}}; without one it
// is {"type":"json_object"}.
type ResponseFormat struct {
	Name   string
	Schema json.RawMessage
	Strict bool
}

// ChatRequest is one completion request. Zero values mean "provider default":
// Model empty uses the client's model, Temperature nil sends none, MaxTokens
// 0 sends none.
type ChatRequest struct {
	Model          string
	Messages       []Message
	Tools          []Tool
	ToolChoice     string // "", "auto", "none", "required", or a tool name to force it
	ResponseFormat *ResponseFormat
	Temperature    *float64
	MaxTokens      int
}

// ChatResponse is the first choice of a completion.
type ChatResponse struct {
	Model        string
	Content      string
	ToolCalls    []ToolCall
	FinishReason string // "stop", "length", "tool_calls", "content_filter", ...
	Usage        Usage
}

// Usage is the token accounting the provider reports.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int
}

// Float64 returns a pointer to v, for ChatRequest.Temperature.
func Float64(v float64) *float64 { return &v }

// Normalize scales v to unit L2 norm in place and reports whether it could:
// a zero (or non-finite) vector is left as all zeros and false is returned.
func Normalize(v []float32) bool {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		clear(v)
		return false
	}
	inv := 1 / math.Sqrt(s)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return true
}

// Dot is the dot product of two vectors of the same length (the cosine
// similarity of two normalised vectors). It runs the AVX2 kernel of
// viterin/vek where the CPU has one (3 to 6 times a Go loop at 100 to 256
// dimensions), a Go loop elsewhere.
func Dot(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	return vek32.Dot(a, b[:len(a)])
}
