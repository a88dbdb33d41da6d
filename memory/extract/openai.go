package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxAnswerBytes bounds what is read of one answer.
const maxAnswerBytes = 8 << 20

// NewOpenAIChat returns a ChatFunc over an OpenAI-compatible chat
// completions endpoint (OpenAI, Ollama, vLLM, llama.cpp server): baseURL
// includes the API version ("https://api.openai.com/v1",
// "http://localhost:11434/v1"), apiKey may be empty for local servers, and
// timeout bounds each call (so does the caller's context). It asks for a
// strict json_schema answer at temperature 0.
//
// A stand-in until the llm package's client replaces it.
func NewOpenAIChat(baseURL, apiKey, model string, timeout time.Duration) ChatFunc {
	client := &http.Client{Timeout: timeout}
	endpoint := strings.TrimRight(baseURL, "/") + "/chat/completions"
	return func(ctx context.Context, system, user string, schema json.RawMessage) (string, int, int, error) {
		body, err := json.Marshal(chatRequest{
			Model: model,
			Messages: []chatMessage{
				{Role: "system", Content: system},
				{Role: "user", Content: user},
			},
			Temperature: 0,
			ResponseFormat: responseFormat{Type: "json_schema", JSONSchema: jsonSchemaFormat{
				Name: "memory_candidates", Strict: true, Schema: schema,
			}},
		})
		if err != nil {
			return "", 0, 0, fmt.Errorf("chat request: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			return "", 0, 0, fmt.Errorf("chat request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		if apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+apiKey)
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", 0, 0, fmt.Errorf("chat completion: %w", err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
		if err != nil {
			return "", 0, 0, fmt.Errorf("chat completion: read answer: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			return "", 0, 0, fmt.Errorf("chat completion: HTTP %d: %s", resp.StatusCode, errorMessage(data))
		}
		if len(data) > maxAnswerBytes {
			return "", 0, 0, fmt.Errorf("chat completion: answer over %d bytes", maxAnswerBytes)
		}
		var cr chatResponse
		if err := json.Unmarshal(data, &cr); err != nil {
			return "", 0, 0, fmt.Errorf("chat completion: %w: the response is not the chat completion JSON: %v", ErrMalformedAnswer, err)
		}
		pt, ct := cr.Usage.PromptTokens, cr.Usage.CompletionTokens
		if len(cr.Choices) == 0 {
			return "", pt, ct, fmt.Errorf("chat completion: %w: no choices", ErrMalformedAnswer)
		}
		ch := cr.Choices[0]
		switch {
		case ch.Message.Refusal != "":
			return "", pt, ct, fmt.Errorf("chat completion: the model refused: %.200s", ch.Message.Refusal)
		case ch.FinishReason == "length":
			return "", pt, ct, fmt.Errorf("chat completion: %w: cut off at the completion token limit", ErrMalformedAnswer)
		case ch.Message.Content == nil || *ch.Message.Content == "":
			return "", pt, ct, fmt.Errorf("chat completion: %w: empty content", ErrMalformedAnswer)
		}
		return *ch.Message.Content, pt, ct, nil
	}
}

// errorMessage is the message of an OpenAI error body, or a short excerpt.
func errorMessage(data []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
		return fmt.Sprintf("%.300s", e.Error.Message)
	}
	return fmt.Sprintf("%.200q", data)
}

type chatRequest struct {
	Model          string         `json:"model"`
	Messages       []chatMessage  `json:"messages"`
	Temperature    float64        `json:"temperature"`
	ResponseFormat responseFormat `json:"response_format"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type responseFormat struct {
	Type       string           `json:"type"`
	JSONSchema jsonSchemaFormat `json:"json_schema"`
}

type jsonSchemaFormat struct {
	Name   string          `json:"name"`
	Strict bool            `json:"strict"`
	Schema json.RawMessage `json:"schema"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
			Refusal string  `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}
