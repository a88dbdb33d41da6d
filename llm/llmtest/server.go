package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/mementohq/memento/llm/hashembed"
)

// The endpoints the fake serves.
const (
	Embeddings = "/v1/embeddings"
	Chat       = "/v1/chat/completions"
)

// FaultKind is how one request goes wrong.
type FaultKind int

// The faults.
const (
	// FaultStatus answers Status with an OpenAI error body carrying Message
	// (and a Retry-After header when RetryAfter is set).
	FaultStatus FaultKind = iota + 1
	// FaultMalformed answers 200 with a body that is not JSON.
	FaultMalformed
	// FaultWrongShape answers 200 with valid JSON of the wrong shape
	// ({"data":"nope"} or {"choices":"nope"}).
	FaultWrongShape
	// FaultWrongCount answers one vector fewer than inputs (embeddings).
	FaultWrongCount
	// FaultWrongDim answers one vector of another dimension (embeddings).
	FaultWrongDim
	// FaultSlow waits Delay (or until the client goes away) before answering
	// normally.
	FaultSlow
	// FaultNoChoices answers a chat completion with an empty choices list.
	FaultNoChoices
)

// Fault is one scripted failure, used by exactly one request.
type Fault struct {
	Kind       FaultKind
	Status     int
	Message    string
	RetryAfter string
	Delay      time.Duration
}

// Status is a FaultStatus.
func Status(code int, message string) Fault {
	return Fault{Kind: FaultStatus, Status: code, Message: message}
}

// Slow is a FaultSlow.
func Slow(d time.Duration) Fault { return Fault{Kind: FaultSlow, Delay: d} }

// ToolCall is a scripted tool call of a chat answer.
type ToolCall struct {
	ID, Name, Arguments string
}

// Reply is a scripted chat answer.
type Reply struct {
	Content      string
	ToolCalls    []ToolCall
	FinishReason string // default "stop", or "tool_calls" when there are tool calls
}

// Request is a request the fake received.
type Request struct {
	Path          string
	Authorization string
	Body          []byte
}

// Options configure the fake.
type Options struct {
	// Dim is the dimension of the embeddings (default 64). Vectors are the
	// hashing embedder's, scaled by 3 so the client's normalisation shows.
	Dim int
	// APIKey, when set, is required as a Bearer token (401 otherwise).
	APIKey string
	// Reverse answers embeddings in reverse order, with correct indices.
	Reverse bool
	// Model is the model name the chat answers report (default: the request's).
	Model string
	// Answer, when set, answers the chat requests no scripted Reply is
	// queued for, from the request's messages (an extraction test can
	// answer from what it was asked).
	Answer func(ChatCall) Reply
}

// Message is a chat message as the fake received it: an assistant's tool
// calls too, so an Answer function can follow a tool-calling loop.
type Message struct {
	Role       string
	Content    string
	ToolCallID string
	ToolCalls  []ToolCall
}

// ChatCall is what Options.Answer sees of a chat request.
type ChatCall struct {
	Model    string
	Messages []Message
	// Schema is the response_format JSON schema, if one was asked.
	Schema json.RawMessage
	// Tools is the raw "tools" array of the request.
	Tools json.RawMessage
}

// Server is the fake. Scripts (faults, replies) are consumed in order.
type Server struct {
	URL string

	opts  Options
	hs    *httptest.Server
	embed *hashembed.Embedder

	mu       sync.Mutex
	faults   map[string][]Fault
	replies  []Reply
	requests []Request
}

// New starts a fake on a loopback port. Close it when done.
func New(opts Options) *Server {
	if opts.Dim <= 0 {
		opts.Dim = 64
	}
	s := &Server{opts: opts, embed: hashembed.New(opts.Dim), faults: map[string][]Fault{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Embeddings, s.serveEmbeddings)
	mux.HandleFunc("POST "+Chat, s.serveChat)
	s.hs = httptest.NewServer(mux)
	s.URL = s.hs.URL
	return s
}

// Close stops the server and waits for its handlers.
func (s *Server) Close() { s.hs.Close() }

// Fail queues faults for the next requests to path (Embeddings or Chat).
func (s *Server) Fail(path string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[path] = append(s.faults[path], faults...)
}

// Reply queues chat answers. With none queued, the fake answers
// "echo: <last user message>" (or "{}" when a JSON format was asked).
func (s *Server) Reply(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, replies...)
}

// Requests returns the requests received on path so far.
func (s *Server) Requests(path string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// Vector is the (unnormalised) vector the fake answers for text.
func (s *Server) Vector(text string) []float32 {
	v := make([]float32, s.opts.Dim)
	s.embed.EmbedInto(v, text)
	for i := range v {
		v[i] *= 3
	}
	return v
}

// begin records the request, checks auth and pops the next fault.
func (s *Server) begin(w http.ResponseWriter, r *http.Request) ([]byte, *Fault, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "cannot read body")
		return nil, nil, false
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Body: body})
	var f *Fault
	if q := s.faults[r.URL.Path]; len(q) > 0 {
		f = &q[0]
		s.faults[r.URL.Path] = q[1:]
	}
	s.mu.Unlock()
	if s.opts.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.opts.APIKey {
		writeError(w, http.StatusUnauthorized, "Incorrect API key provided")
		return nil, nil, false
	}
	if r.Header.Get("Content-Type") != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "want application/json")
		return nil, nil, false
	}
	if f != nil {
		switch f.Kind {
		case FaultStatus:
			if f.RetryAfter != "" {
				w.Header().Set("Retry-After", f.RetryAfter)
			}
			writeError(w, f.Status, f.Message)
			return nil, nil, false
		case FaultMalformed:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"list","data":[{"embedding":[0.1,`)
			return nil, nil, false
		case FaultSlow:
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return nil, nil, false
			}
		}
	}
	return body, f, true
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	typ := "invalid_request_error"
	switch {
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// The wire types below follow OpenAI's API reference independently of the
// client's, so a field the client misnames is caught by the tests.

type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

type embeddingObject struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

func (s *Server) serveEmbeddings(w http.ResponseWriter, r *http.Request) {
	body, f, ok := s.begin(w, r)
	if !ok {
		return
	}
	var req embeddingsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.")
		return
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			writeError(w, http.StatusBadRequest, "'input' must be a string or an array of strings")
			return
		}
		inputs = []string{one}
	}
	if req.Model == "" || len(inputs) == 0 {
		writeError(w, http.StatusBadRequest, "you must provide a model and a non-empty input")
		return
	}
	for _, in := range inputs {
		if in == "" {
			writeError(w, http.StatusBadRequest, "'$.input' is invalid: empty string")
			return
		}
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" {
		writeError(w, http.StatusBadRequest, "this fake speaks encoding_format float only")
		return
	}
	if f != nil && f.Kind == FaultWrongShape {
		writeJSON(w, map[string]any{"object": "list", "data": "nope"})
		return
	}
	data := make([]embeddingObject, 0, len(inputs))
	tokens := 0
	for i, in := range inputs {
		v := s.Vector(in)
		if f != nil && f.Kind == FaultWrongDim && i == len(inputs)-1 {
			v = append(v, 0.5)
		}
		data = append(data, embeddingObject{Object: "embedding", Index: i, Embedding: v})
		tokens += len(strings.Fields(in))
	}
	if f != nil && f.Kind == FaultWrongCount {
		data = data[:len(data)-1]
	}
	if s.opts.Reverse {
		for i, j := 0, len(data)-1; i < j; i, j = i+1, j-1 {
			data[i], data[j] = data[j], data[i]
		}
	}
	writeJSON(w, map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
}

type chatMessage struct {
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
}

type chatCompletionRequest struct {
	Model          string          `json:"model"`
	Messages       []chatMessage   `json:"messages"`
	Tools          json.RawMessage `json:"tools"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Stream bool `json:"stream"`
}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request) {
	body, f, ok := s.begin(w, r)
	if !ok {
		return
	}
	var req chatCompletionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.")
		return
	}
	if req.Model == "" || len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "you must provide a model and messages")
		return
	}
	if req.Stream {
		writeError(w, http.StatusBadRequest, "this fake does not stream")
		return
	}
	if msg := checkToolProtocol(req.Messages); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if rf := req.ResponseFormat; rf != nil && rf.Type == "json_schema" && (rf.JSONSchema == nil || rf.JSONSchema.Name == "" || len(rf.JSONSchema.Schema) == 0) {
		writeError(w, http.StatusBadRequest, "response_format json_schema needs json_schema.name and json_schema.schema")
		return
	}
	if f != nil && f.Kind == FaultWrongShape {
		writeJSON(w, map[string]any{"id": "chatcmpl-fake", "object": "chat.completion", "choices": "nope"})
		return
	}
	model := req.Model
	if s.opts.Model != "" {
		model = s.opts.Model
	}
	if f != nil && f.Kind == FaultNoChoices {
		writeJSON(w, map[string]any{"id": "chatcmpl-fake", "object": "chat.completion", "model": model, "choices": []any{}})
		return
	}
	s.mu.Lock()
	var rep Reply
	scripted := len(s.replies) > 0
	if scripted {
		rep, s.replies = s.replies[0], s.replies[1:]
	}
	s.mu.Unlock()
	prompt := 0
	last := ""
	for _, m := range req.Messages {
		if m.Content != nil {
			prompt += 3 + len(strings.Fields(*m.Content))
			if m.Role == "user" {
				last = *m.Content
			}
		}
	}
	switch {
	case scripted:
	case s.opts.Answer != nil:
		call := ChatCall{Model: req.Model, Tools: req.Tools}
		for _, m := range req.Messages {
			msg := Message{Role: m.Role, ToolCallID: m.ToolCallID}
			if m.Content != nil {
				msg.Content = *m.Content
			}
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			call.Messages = append(call.Messages, msg)
		}
		if rf := req.ResponseFormat; rf != nil && rf.JSONSchema != nil {
			call.Schema = rf.JSONSchema.Schema
		}
		rep = s.opts.Answer(call)
	default:
		rep.Content = "echo: " + last
		if req.ResponseFormat != nil {
			rep.Content = "{}"
		}
	}
	msg := map[string]any{"role": "assistant", "content": rep.Content, "refusal": nil}
	finish := rep.FinishReason
	if len(rep.ToolCalls) > 0 {
		var calls []map[string]any
		for i, tc := range rep.ToolCalls {
			id := tc.ID
			if id == "" {
				id = fmt.Sprintf("call_%d", i+1)
			}
			calls = append(calls, map[string]any{"id": id, "type": "function",
				"function": map[string]string{"name": tc.Name, "arguments": tc.Arguments}})
		}
		msg["tool_calls"] = calls
		if rep.Content == "" {
			msg["content"] = nil
		}
		if finish == "" {
			finish = "tool_calls"
		}
	}
	if finish == "" {
		finish = "stop"
	}
	completion := len(strings.Fields(rep.Content))
	writeJSON(w, map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]int{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

// checkToolProtocol answers the 400 message OpenAI gives a conversation
// that breaks the tool-call protocol, "" for one that keeps it: every tool
// message answers a call of the assistant message before it, and every
// call is answered before the next non-tool message.
func checkToolProtocol(msgs []chatMessage) string {
	open := map[string]bool{}
	for i, m := range msgs {
		if m.Role == "tool" {
			if !open[m.ToolCallID] {
				return fmt.Sprintf("messages[%d]: a message with role 'tool' must be a response to a preceding message with 'tool_calls' (tool_call_id %q)", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 {
			return fmt.Sprintf("messages[%d]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'", i)
		}
		for _, tc := range m.ToolCalls {
			if m.Role != "assistant" || tc.ID == "" || tc.Type != "function" || tc.Function.Name == "" {
				return fmt.Sprintf("messages[%d]: tool calls need role assistant, an id, type function and a function name", i)
			}
			open[tc.ID] = true
		}
	}
	if len(open) > 0 {
		return "an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'"
	}
	return ""
}
