package llmtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The fake speaks the wire format itself, checked here with raw HTTP so a
// client bug cannot hide a fake bug.
func TestWire(t *testing.T) {
	s := New(Options{Dim: 4, APIKey: "k"})
	defer s.Close()
	post := func(path, auth, body string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp, m
	}
	resp, m := post(Embeddings, "k", `{"model":"x","input":["a b","c"]}`)
	data, _ := m["data"].([]any)
	if resp.StatusCode != 200 || m["object"] != "list" || len(data) != 2 {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	if d1 := data[1].(map[string]any); d1["index"] != 1.0 || d1["object"] != "embedding" || len(d1["embedding"].([]any)) != 4 {
		t.Fatalf("%v", d1)
	}
	// A single string input is allowed too.
	if resp, _ := post(Embeddings, "k", `{"model":"x","input":"a"}`); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	resp, m = post(Embeddings, "", `{"model":"x","input":["a"]}`)
	if e, _ := m["error"].(map[string]any); resp.StatusCode != 401 || e["message"] == nil {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	if resp, _ := post(Embeddings, "k", `{"model":"x","input":[""]}`); resp.StatusCode != 400 {
		t.Fatalf("empty input: %d", resp.StatusCode)
	}
	s.Reply(Reply{Content: "hi"})
	resp, m = post(Chat, "k", `{"model":"gpt-x","messages":[{"role":"user","content":"hello"}]}`)
	ch := m["choices"].([]any)[0].(map[string]any)
	if resp.StatusCode != 200 || m["object"] != "chat.completion" || ch["finish_reason"] != "stop" ||
		ch["message"].(map[string]any)["content"] != "hi" || m["usage"].(map[string]any)["total_tokens"] == nil {
		t.Fatalf("%v", m)
	}
	s.Reply(Reply{ToolCalls: []ToolCall{{Name: "f", Arguments: "{}"}}})
	_, m = post(Chat, "k", `{"model":"gpt-x","messages":[{"role":"user","content":"hello"}]}`)
	msg := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != nil || msg["tool_calls"].([]any)[0].(map[string]any)["id"] != "call_1" {
		t.Fatalf("%v", msg)
	}
	if resp, _ := post(Chat, "k", `{"model":"gpt-x","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{}}}`); resp.StatusCode != 400 {
		t.Fatalf("bad schema accepted: %d", resp.StatusCode)
	}
	if n := len(s.Requests(Chat)); n != 3 {
		t.Fatalf("%d chat requests recorded", n)
	}
}

// The fake refuses a conversation that breaks the tool-call protocol, as
// OpenAI does, and shows an Answer function the assistant's tool calls.
func TestToolProtocol(t *testing.T) {
	var seen []Message
	s := New(Options{Answer: func(c ChatCall) Reply {
		seen = c.Messages
		return Reply{Content: "ok"}
	}})
	defer s.Close()
	post := func(body string) int {
		req, _ := http.NewRequest(http.MethodPost, s.URL+Chat, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`
	for name, msgs := range map[string]string{
		"tool without a call":    `{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c1","content":"r"}`,
		"call left unanswered":   `{"role":"user","content":"x"},` + call + `,{"role":"user","content":"y"}`,
		"call unanswered at end": `{"role":"user","content":"x"},` + call,
		"answer to another id":   `{"role":"user","content":"x"},` + call + `,{"role":"tool","tool_call_id":"c2","content":"r"}`,
		"call without an id":     `{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}`,
	} {
		if code := post(`{"model":"m","messages":[` + msgs + `]}`); code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, code)
		}
	}
	if seen != nil {
		t.Fatalf("a refused request reached Answer: %v", seen)
	}
	if code := post(`{"model":"m","messages":[{"role":"user","content":"x"},` + call + `,{"role":"tool","tool_call_id":"c1","content":"r"}]}`); code != 200 {
		t.Fatalf("a well-formed tool turn: status %d", code)
	}
	if len(seen) != 3 || len(seen[1].ToolCalls) != 1 || seen[1].ToolCalls[0] != (ToolCall{ID: "c1", Name: "f", Arguments: `{"a":1}`}) ||
		seen[2].ToolCallID != "c1" || seen[2].Content != "r" {
		t.Fatalf("Answer saw %+v", seen)
	}
}
