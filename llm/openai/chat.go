package openai

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mementohq/memento/llm"
)

// ChatConfig chooses the chat model.
type ChatConfig struct {
	// Model is the default model of requests that name none.
	Model string
	// MaxCompletionTokens sends ChatRequest.MaxTokens as
	// "max_completion_tokens" (required by OpenAI's o-series and gpt-5)
	// instead of "max_tokens" (what Ollama, vLLM and llama.cpp read).
	MaxCompletionTokens bool
}

// Chat completes through POST {base}/v1/chat/completions.
type Chat struct {
	c   *Client
	cfg ChatConfig
}

var _ llm.Chat = (*Chat)(nil)

// NewChat returns a chat model.
func (c *Client) NewChat(cfg ChatConfig) (*Chat, error) {
	if cfg.Model == "" {
		return nil, fmt.Errorf("openai: chat needs a model name")
	}
	return &Chat{c: c, cfg: cfg}, nil
}

type wireFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function wireFunctionCall `json:"function"`
}

type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

type wireTool struct {
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

type wireResponseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *wireJSONSchema `json:"json_schema,omitempty"`
}

type chatRequest struct {
	Model               string              `json:"model"`
	Messages            []wireMessage       `json:"messages"`
	Tools               []wireTool          `json:"tools,omitempty"`
	ToolChoice          any                 `json:"tool_choice,omitempty"`
	ResponseFormat      *wireResponseFormat `json:"response_format,omitempty"`
	Temperature         *float64            `json:"temperature,omitempty"`
	MaxTokens           int                 `json:"max_tokens,omitempty"`
	MaxCompletionTokens int                 `json:"max_completion_tokens,omitempty"`
	Stream              bool                `json:"stream"`
}

type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string        `json:"content"`
			Refusal   *string        `json:"refusal"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// Complete sends one non-streaming completion and returns its first choice.
// A refusal comes back as the content with FinishReason "refusal".
func (ch *Chat) Complete(ctx context.Context, req llm.ChatRequest) (llm.ChatResponse, error) {
	wr, err := ch.wire(req)
	if err != nil {
		return llm.ChatResponse{}, err
	}
	var resp chatResponse
	if err := ch.c.post(ctx, "/v1/chat/completions", wr, &resp); err != nil {
		return llm.ChatResponse{}, err
	}
	if len(resp.Choices) == 0 {
		return llm.ChatResponse{}, malformed("/v1/chat/completions: no choices")
	}
	c := resp.Choices[0]
	out := llm.ChatResponse{
		Model:        resp.Model,
		FinishReason: c.FinishReason,
		Usage: llm.Usage{
			PromptTokens:     resp.Usage.PromptTokens,
			CompletionTokens: resp.Usage.CompletionTokens,
			TotalTokens:      resp.Usage.TotalTokens,
		},
	}
	if c.Message.Content != nil {
		out.Content = *c.Message.Content
	}
	if c.Message.Refusal != nil && *c.Message.Refusal != "" && out.Content == "" {
		out.Content, out.FinishReason = *c.Message.Refusal, "refusal"
	}
	for _, tc := range c.Message.ToolCalls {
		if tc.Function.Name == "" {
			return llm.ChatResponse{}, malformed("/v1/chat/completions: tool call %q without a function name", tc.ID)
		}
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if out.Usage.TotalTokens == 0 {
		out.Usage.TotalTokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
	}
	return out, nil
}

func (ch *Chat) wire(req llm.ChatRequest) (chatRequest, error) {
	if len(req.Messages) == 0 {
		return chatRequest{}, fmt.Errorf("openai: chat request without messages")
	}
	wr := chatRequest{Model: ch.cfg.Model, Temperature: req.Temperature}
	if req.Model != "" {
		wr.Model = req.Model
	}
	if req.MaxTokens > 0 {
		if ch.cfg.MaxCompletionTokens {
			wr.MaxCompletionTokens = req.MaxTokens
		} else {
			wr.MaxTokens = req.MaxTokens
		}
	}
	for _, m := range req.Messages {
		wm := wireMessage{Role: string(m.Role), Name: m.Name, ToolCallID: m.ToolCallID}
		// An assistant turn that only calls tools has null content.
		if m.Content != "" || len(m.ToolCalls) == 0 {
			content := m.Content
			wm.Content = &content
		}
		for _, tc := range m.ToolCalls {
			wm.ToolCalls = append(wm.ToolCalls, wireToolCall{ID: tc.ID, Type: "function",
				Function: wireFunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
		}
		wr.Messages = append(wr.Messages, wm)
	}
	names := map[string]bool{}
	for _, t := range req.Tools {
		if t.Name == "" {
			return chatRequest{}, fmt.Errorf("openai: tool without a name")
		}
		if len(t.Parameters) > 0 && !json.Valid(t.Parameters) {
			return chatRequest{}, fmt.Errorf("openai: tool %q: parameters are not valid JSON", t.Name)
		}
		names[t.Name] = true
		wr.Tools = append(wr.Tools, wireTool{Type: "function", Function: wireFunction{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		wr.ToolChoice = req.ToolChoice
	default:
		if !names[req.ToolChoice] {
			return chatRequest{}, fmt.Errorf("openai: tool choice %q is not a tool of the request", req.ToolChoice)
		}
		wr.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": req.ToolChoice}}
	}
	if rf := req.ResponseFormat; rf != nil {
		if len(rf.Schema) == 0 {
			wr.ResponseFormat = &wireResponseFormat{Type: "json_object"}
		} else {
			if !json.Valid(rf.Schema) {
				return chatRequest{}, fmt.Errorf("openai: response schema is not valid JSON")
			}
			name := rf.Name
			if name == "" {
				name = "response"
			}
			wr.ResponseFormat = &wireResponseFormat{Type: "json_schema",
				JSONSchema: &wireJSONSchema{Name: name, Schema: rf.Schema, Strict: rf.Strict}}
		}
	}
	return wr, nil
}
