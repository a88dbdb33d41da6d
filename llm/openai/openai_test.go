package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/llm/llmtest"
	"github.com/mementohq/memento/llm/openai"
)

const key = "sk-test-0123"

func newClient(t *testing.T, url string, mod ...func(*openai.Config)) *openai.Client {
	t.Helper()
	cfg := openai.Config{BaseURL: url + "/v1", APIKey: key, Timeout: 5 * time.Second, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newEmbedder(t *testing.T, c *openai.Client, cfg openai.EmbedderConfig) *openai.Embedder {
	t.Helper()
	if cfg.Model == "" {
		cfg.Model = "text-embedding-3-small"
	}
	e, err := c.NewEmbedder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func unit(v []float32) []float32 {
	out := append([]float32(nil), v...)
	llm.Normalize(out)
	return out
}

func TestEmbedBatchesOrderAndNormalises(t *testing.T) {
	srv := llmtest.New(llmtest.Options{Dim: 32, APIKey: key, Reverse: true})
	defer srv.Close()
	e := newEmbedder(t, newClient(t, srv.URL), openai.EmbedderConfig{BatchSize: 3})
	if e.Model() != "openai:text-embedding-3-small" || e.Dim() != 0 {
		t.Fatalf("model %q dim %d", e.Model(), e.Dim())
	}
	texts := []string{"alpha one", "beta two", "", "gamma three", "delta four", "epsilon five", "zeta six", "eta seven"}
	vs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if e.Dim() != 32 || len(vs) != len(texts) {
		t.Fatalf("dim %d, %d vectors", e.Dim(), len(vs))
	}
	for i, txt := range texts {
		if txt == "" {
			if len(vs[i]) != 32 || llm.Dot(vs[i], vs[i]) != 0 {
				t.Fatalf("empty text: want a zero vector of 32, got %v", vs[i])
			}
			continue
		}
		want := unit(srv.Vector(txt))
		if d := llm.Dot(vs[i], want); math.Abs(float64(d)-1) > 1e-5 {
			t.Fatalf("text %d %q: cosine with its own vector %v (order lost?)", i, txt, d)
		}
	}
	reqs := srv.Requests(llmtest.Embeddings)
	if len(reqs) != 3 { // 7 non-empty texts in batches of 3
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	var body map[string]any
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if reqs[0].Authorization != "Bearer "+key || body["model"] != "text-embedding-3-small" || body["encoding_format"] != "float" {
		t.Fatalf("request %v auth %q", body, reqs[0].Authorization)
	}
	if _, ok := body["dimensions"]; ok {
		t.Fatal("dimensions sent though not asked")
	}
}

func TestEmbedDimensions(t *testing.T) {
	srv := llmtest.New(llmtest.Options{Dim: 16, APIKey: key})
	defer srv.Close()
	c := newClient(t, srv.URL)
	e := newEmbedder(t, c, openai.EmbedderConfig{Dim: 16, SendDimensions: true, Provider: "vllm"})
	if e.Model() != "vllm:text-embedding-3-small@16" || e.Dim() != 16 {
		t.Fatalf("model %q", e.Model())
	}
	if _, err := e.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(srv.Requests(llmtest.Embeddings)[0].Body), `"dimensions":16`) {
		t.Fatalf("body %s", srv.Requests(llmtest.Embeddings)[0].Body)
	}
	// A configured dimension the server does not honour is an error.
	bad := newEmbedder(t, c, openai.EmbedderConfig{Dim: 8})
	if _, err := bad.Embed(context.Background(), []string{"x"}); !errors.Is(err, openai.ErrMalformed) {
		t.Fatalf("want malformed for a dimension mismatch, got %v", err)
	}
	if _, err := c.NewEmbedder(openai.EmbedderConfig{Model: "m", SendDimensions: true}); err == nil {
		t.Fatal("SendDimensions without Dim must be refused")
	}
}

func TestEmbedMalformedAnswers(t *testing.T) {
	srv := llmtest.New(llmtest.Options{Dim: 8, APIKey: key})
	defer srv.Close()
	e := newEmbedder(t, newClient(t, srv.URL), openai.EmbedderConfig{})
	for _, f := range []llmtest.FaultKind{llmtest.FaultMalformed, llmtest.FaultWrongShape, llmtest.FaultWrongCount, llmtest.FaultWrongDim} {
		srv.Fail(llmtest.Embeddings, llmtest.Fault{Kind: f})
		_, err := e.Embed(context.Background(), []string{"a b", "c d", "e f"})
		if !errors.Is(err, openai.ErrMalformed) {
			t.Fatalf("fault %d: want ErrMalformed, got %v", f, err)
		}
	}
	// Malformed answers are not retried: one request each.
	if n := len(srv.Requests(llmtest.Embeddings)); n != 4 {
		t.Fatalf("%d requests, want 4", n)
	}
	// And the embedder still works after them.
	if _, err := e.Embed(context.Background(), []string{"fine"}); err != nil {
		t.Fatal(err)
	}
}

func TestRetries(t *testing.T) {
	srv := llmtest.New(llmtest.Options{Dim: 8, APIKey: key})
	defer srv.Close()
	e := newEmbedder(t, newClient(t, srv.URL), openai.EmbedderConfig{})
	ctx := context.Background()

	srv.Fail(llmtest.Embeddings, llmtest.Status(500, "boom"), llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, Message: "slow down", RetryAfter: "0"})
	if _, err := e.Embed(ctx, []string{"x"}); err != nil {
		t.Fatalf("500 then 429 then success: %v", err)
	}
	if n := len(srv.Requests(llmtest.Embeddings)); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}

	srv.Fail(llmtest.Embeddings, llmtest.Status(429, "rate limited"), llmtest.Status(429, "rate limited"), llmtest.Status(429, "rate limited"))
	_, err := e.Embed(ctx, []string{"x"})
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Message != "rate limited" || apiErr.Attempts != 3 || apiErr.Type != "rate_limit_exceeded" {
		t.Fatalf("want APIError 429 after 3 attempts, got %#v", err)
	}

	// A 400 is the caller's fault: never retried.
	before := len(srv.Requests(llmtest.Embeddings))
	srv.Fail(llmtest.Embeddings, llmtest.Status(400, "bad input"))
	_, err = e.Embed(ctx, []string{"x"})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Retryable() {
		t.Fatalf("want APIError 400, got %v", err)
	}
	if n := len(srv.Requests(llmtest.Embeddings)) - before; n != 1 {
		t.Fatalf("400 sent %d times", n)
	}

	// A wrong key is a 401 with the provider's message.
	bad := newEmbedder(t, newClient(t, srv.URL, func(c *openai.Config) { c.APIKey = "wrong" }), openai.EmbedderConfig{})
	_, err = bad.Embed(ctx, []string{"x"})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || !strings.Contains(err.Error(), "Incorrect API key") {
		t.Fatalf("want 401, got %v", err)
	}
}

func TestTimeoutBoundsEveryCall(t *testing.T) {
	srv := llmtest.New(llmtest.Options{Dim: 8, APIKey: key})
	defer srv.Close()
	c := newClient(t, srv.URL, func(c *openai.Config) { c.Timeout = 100 * time.Millisecond })
	e := newEmbedder(t, c, openai.EmbedderConfig{})
	srv.Fail(llmtest.Embeddings, llmtest.Slow(10*time.Second))
	start := time.Now()
	_, err := e.Embed(context.Background(), []string{"x"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a deadline error, got %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("timeout not enforced: %v", el)
	}
	if n := len(srv.Requests(llmtest.Embeddings)); n != 1 {
		t.Fatalf("a timeout must not be retried: %d requests", n)
	}

	ch, err := c.NewChat(openai.ChatConfig{Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Fail(llmtest.Chat, llmtest.Slow(10*time.Second))
	if _, err := ch.Complete(context.Background(), llm.ChatRequest{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("chat: want a deadline error, got %v", err)
	}

	// A caller's cancellation during the backoff ends the wait.
	slowRetry := newClient(t, srv.URL, func(c *openai.Config) { c.Backoff = time.Hour; c.MaxBackoff = time.Hour })
	e2 := newEmbedder(t, slowRetry, openai.EmbedderConfig{})
	srv.Fail(llmtest.Embeddings, llmtest.Status(503, "unavailable"))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := e2.Embed(ctx, []string{"x"}); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("want a deadline during backoff naming the 503, got %v", err)
	}
}

func TestChat(t *testing.T) {
	srv := llmtest.New(llmtest.Options{APIKey: key})
	defer srv.Close()
	c := newClient(t, srv.URL)
	ch, err := c.NewChat(openai.ChatConfig{Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Default answer: an echo with usage.
	resp, err := ch.Complete(ctx, llm.ChatRequest{Messages: []llm.Message{{Role: llm.RoleSystem, Content: "be brief"}, {Role: llm.RoleUser, Content: "hello there"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "echo: hello there" || resp.FinishReason != "stop" || resp.Model != "gpt-4o-mini" ||
		resp.Usage.PromptTokens == 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Fatalf("%+v", resp)
	}

	// Tool calls, a forced tool, a JSON schema, temperature and max tokens.
	srv.Reply(llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "call_9", Name: "lookup_order", Arguments: `{"order":"1234"}`}}})
	schema := json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}},"required":["order"],"additionalProperties":false}`)
	req := llm.ChatRequest{
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "where is my order 1234"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "lookup_order", Arguments: `{"order":"1"}`}}},
			{Role: llm.RoleTool, ToolCallID: "call_1", Content: `{"status":"shipped"}`},
		},
		Tools:          []llm.Tool{{Name: "lookup_order", Description: "find an order", Parameters: schema, Strict: true}},
		ToolChoice:     "lookup_order",
		ResponseFormat: &llm.ResponseFormat{Name: "order", Schema: schema, Strict: true},
		Temperature:    llm.Float64(0),
		MaxTokens:      50,
	}
	resp, err = ch.Complete(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0] != (llm.ToolCall{ID: "call_9", Name: "lookup_order", Arguments: `{"order":"1234"}`}) ||
		resp.FinishReason != "tool_calls" || resp.Content != "" {
		t.Fatalf("%+v", resp)
	}
	reqs := srv.Requests(llmtest.Chat)
	var body struct {
		Model    string `json:"model"`
		Messages []struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
				Strict     bool            `json:"strict"`
			} `json:"function"`
		} `json:"tools"`
		ToolChoice struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tool_choice"`
		ResponseFormat struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
				Strict bool            `json:"strict"`
			} `json:"json_schema"`
		} `json:"response_format"`
		Temperature *float64 `json:"temperature"`
		MaxTokens   int      `json:"max_tokens"`
	}
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &body); err != nil {
		t.Fatal(err)
	}
	m := body.Messages
	if len(m) != 3 || m[1].Content != nil || len(m[1].ToolCalls) != 1 || m[1].ToolCalls[0].Type != "function" ||
		m[1].ToolCalls[0].Function.Name != "lookup_order" || m[2].Role != "tool" || m[2].ToolCallID != "call_1" {
		t.Fatalf("messages on the wire: %s", reqs[len(reqs)-1].Body)
	}
	if len(body.Tools) != 1 || body.Tools[0].Type != "function" || !body.Tools[0].Function.Strict ||
		body.ToolChoice.Type != "function" || body.ToolChoice.Function.Name != "lookup_order" {
		t.Fatalf("tools on the wire: %s", reqs[len(reqs)-1].Body)
	}
	if body.ResponseFormat.Type != "json_schema" || body.ResponseFormat.JSONSchema.Name != "order" || !body.ResponseFormat.JSONSchema.Strict ||
		body.Temperature == nil || *body.Temperature != 0 || body.MaxTokens != 50 {
		t.Fatalf("format on the wire: %s", reqs[len(reqs)-1].Body)
	}

	// max_completion_tokens for the o-series.
	o, _ := c.NewChat(openai.ChatConfig{Model: "o3-mini", MaxCompletionTokens: true})
	if _, err := o.Complete(ctx, llm.ChatRequest{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}, MaxTokens: 9}); err != nil {
		t.Fatal(err)
	}
	reqs = srv.Requests(llmtest.Chat)
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, `"max_completion_tokens":9`) || strings.Contains(last, `"max_tokens"`) {
		t.Fatalf("body %s", last)
	}

	// Refused before sending: a forced tool that is not in the request.
	if _, err := ch.Complete(ctx, llm.ChatRequest{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}, ToolChoice: "nope"}); err == nil {
		t.Fatal("unknown forced tool must be refused")
	}
}

func TestChatMalformed(t *testing.T) {
	srv := llmtest.New(llmtest.Options{APIKey: key})
	defer srv.Close()
	ch, _ := newClient(t, srv.URL).NewChat(openai.ChatConfig{Model: "m"})
	req := llm.ChatRequest{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}
	for _, f := range []llmtest.FaultKind{llmtest.FaultMalformed, llmtest.FaultWrongShape, llmtest.FaultNoChoices} {
		srv.Fail(llmtest.Chat, llmtest.Fault{Kind: f})
		if _, err := ch.Complete(context.Background(), req); !errors.Is(err, openai.ErrMalformed) {
			t.Fatalf("fault %d: want ErrMalformed, got %v", f, err)
		}
	}
	srv.Fail(llmtest.Chat, llmtest.Status(500, "overloaded"))
	if resp, err := ch.Complete(context.Background(), req); err != nil || resp.Content != "echo: x" {
		t.Fatalf("500 then success: %v %+v", err, resp)
	}
}

// Other servers' error bodies: Ollama's {"error":"..."}, a plain-text proxy page.
func TestErrorBodies(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   string
	}{
		{404, `{"error":"model \"nomic\" not found, try pulling it first"}`, `model "nomic" not found`},
		{502, `<html>Bad Gateway</html>`, "Bad Gateway"},
		{422, `{"detail":"input too long"}`, "input too long"},
		{400, `{"error":{"message":"too many inputs","type":"invalid_request_error","code":"bad_input"}}`, "too many inputs"},
	}
	for _, tc := range cases {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			fmt.Fprint(w, tc.body)
		}))
		c := newClient(t, hs.URL, func(c *openai.Config) { c.MaxRetries = -1 })
		e := newEmbedder(t, c, openai.EmbedderConfig{})
		_, err := e.Embed(context.Background(), []string{"x"})
		hs.Close()
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || !strings.Contains(apiErr.Message, tc.want) {
			t.Fatalf("status %d: got %v", tc.status, err)
		}
	}
}

func TestConfig(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "localhost:11434", "http://"} {
		if _, err := openai.New(openai.Config{BaseURL: u}); err == nil {
			t.Errorf("base URL %q accepted", u)
		}
	}
	c, err := openai.New(openai.Config{BaseURL: "http://127.0.0.1:1/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewEmbedder(openai.EmbedderConfig{}); err == nil {
		t.Fatal("embedder without model accepted")
	}
	if _, err := c.NewChat(openai.ChatConfig{}); err == nil {
		t.Fatal("chat without model accepted")
	}
}

func TestAnswerFuncAndConcurrency(t *testing.T) {
	srv := llmtest.New(llmtest.Options{Dim: 16, APIKey: key, Answer: func(c llmtest.ChatCall) llmtest.Reply {
		last := c.Messages[len(c.Messages)-1].Content
		return llmtest.Reply{Content: fmt.Sprintf(`{"n":%d,"schema":%t}`, len(strings.Fields(last)), len(c.Schema) > 0)}
	}})
	defer srv.Close()
	c := newClient(t, srv.URL)
	ch, _ := c.NewChat(openai.ChatConfig{Model: "m"})
	e := newEmbedder(t, c, openai.EmbedderConfig{BatchSize: 2})
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			resp, err := ch.Complete(context.Background(), llm.ChatRequest{
				Messages:       []llm.Message{{Role: llm.RoleUser, Content: "one two three"}},
				ResponseFormat: &llm.ResponseFormat{Name: "n", Schema: json.RawMessage(`{"type":"object"}`)},
			})
			if err == nil && resp.Content != `{"n":3,"schema":true}` {
				err = fmt.Errorf("answer %q", resp.Content)
			}
			if err == nil {
				var vs [][]float32
				vs, err = e.Embed(context.Background(), []string{"a", "b", "c"})
				if err == nil && (len(vs) != 3 || len(vs[2]) != 16) {
					err = fmt.Errorf("vectors %d", len(vs))
				}
			}
			errs <- err
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
