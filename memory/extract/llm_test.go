package extract

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/memory"
)

// fakeOpenAI speaks the OpenAI chat completions wire protocol: it checks
// the request the extractor sends and answers what the test programs.
type fakeOpenAI struct {
	t      *testing.T
	delay  time.Duration
	status int
	finish string
	// answer makes the content for one batch of messages.
	answer func(batch []wireMessage) string

	baseURL string

	mu      sync.Mutex
	batches [][]wireMessage
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		f.t.Errorf("request %s %s", r.Method, r.URL.Path)
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer test-key" {
		f.t.Errorf("authorization %q", got)
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role, Content string
		} `json:"messages"`
		ResponseFormat struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name   string          `json:"name"`
				Strict bool            `json:"strict"`
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.t.Errorf("request body: %v", err)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	rf := req.ResponseFormat
	if req.Model != "test-model" || len(req.Messages) != 2 || req.Messages[0].Role != "system" ||
		req.Messages[1].Role != "user" || rf.Type != "json_schema" || !rf.JSONSchema.Strict ||
		rf.JSONSchema.Name == "" || !strings.Contains(string(rf.JSONSchema.Schema), `"candidates"`) {
		f.t.Errorf("request does not ask for the strict schema: %+v", req)
	}
	user := req.Messages[1].Content
	var batch []wireMessage
	if err := json.Unmarshal([]byte(user[strings.Index(user, "\n")+1:]), &batch); err != nil {
		f.t.Errorf("user prompt carries no message JSON: %v", err)
	}
	f.mu.Lock()
	f.batches = append(f.batches, batch)
	f.mu.Unlock()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if f.status != 0 && f.status != http.StatusOK {
		w.WriteHeader(f.status)
		_, _ = w.Write([]byte(`{"error": {"message": "boom: the model server fell over", "type": "server_error"}}`))
		return
	}
	content := `{"candidates": []}`
	if f.answer != nil {
		content = f.answer(batch)
	}
	finish := f.finish
	if finish == "" {
		finish = "stop"
	}
	resp := map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "test-model",
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish,
			"message": map[string]any{"role": "assistant", "content": content}}},
		"usage": map[string]any{"prompt_tokens": 100 + 10*len(batch), "completion_tokens": 7,
			"total_tokens": 107 + 10*len(batch)},
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func (f *fakeOpenAI) sent() [][]wireMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

// newFake starts the fake and an LLM extractor on it (client timeout 5 s).
func newFake(t *testing.T, f *fakeOpenAI) (*LLM, *fakeOpenAI) {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	f.baseURL = srv.URL + "/v1"
	return &LLM{Chat: NewOpenAIChat(f.baseURL, "test-key", "test-model", 5*time.Second), Model: "test-model"}, f
}

// answerJSON encodes candidates as the model would.
func answerJSON(cands ...map[string]any) string {
	for _, c := range cands {
		fill(c)
	}
	b, _ := json.Marshal(map[string]any{"candidates": cands})
	return string(b)
}

// fill gives c the fields a strict-schema answer always carries.
func fill(c map[string]any) map[string]any {
	{
		for _, k := range []string{"retracts", "about", "valid_from_hint"} {
			if _, ok := c[k]; !ok {
				c[k] = nil
			}
		}
		if _, ok := c["category"]; !ok {
			c["category"] = "other"
		}
		if _, ok := c["kind"]; !ok {
			c["kind"] = "statement"
		}
		if _, ok := c["validated_by"]; !ok {
			c["validated_by"] = "user_stated"
		}
		if _, ok := c["confidence"]; !ok {
			c["confidence"] = 0.9
		}
	}
	return c
}

func cand(key string, value any, ids []string, evidence string) map[string]any {
	return map[string]any{"key": key, "value": value, "message_ids": ids, "evidence": evidence}
}

var chatMsgs = []memory.Message{
	{ID: "s1", Role: "system", Content: "You are a gift assistant."},
	{ID: "u1", Role: "user", Content: "I hate mugs. And please answer in Russian."},
	{ID: "a1", Role: "assistant", Content: "Noted! Where do you live?"},
	{ID: "u2", Role: "user", Content: "I don't live in Paris anymore"},
	{ID: "t1", Role: "tool", Content: `{"customer": {"city": "Lyon"}}`, At: sept1},
}

func TestLLMGoodAnswer(t *testing.T) {
	l, fake := newFake(t, &fakeOpenAI{answer: func([]wireMessage) string {
		mugs := cand("dislikes.mugs", "mugs", []string{"u1"}, "I hate mugs")
		mugs["category"] = "dislike"
		lang := cand("preference.language", "Russian", []string{"u1"}, "answer in Russian")
		moved := cand("home.city", nil, []string{"u2"}, "I don't live in Paris anymore")
		moved["kind"], moved["retracts"], moved["category"] = "correction", "Paris", "place"
		city := cand("home.city", "Lyon", []string{"t1"}, `"city": "Lyon"`)
		city["validated_by"], city["valid_from_hint"] = "tool_confirmed", "since May"
		again := cand("dislikes.mugs", "Mugs", []string{"u1"}, "hate mugs")
		return answerJSON(mugs, lang, moved, city, again)
	}})
	if got := l.Name(); got != "llm:test-model@1" {
		t.Errorf("Name %q", got)
	}
	ex, err := l.Extract(context.Background(), chatMsgs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range ex.Candidates {
		got = append(got, render(c)+" "+c.ValidatedBy+" "+strings.Join(c.MessageIDs, ","))
	}
	want := []string{
		`dislikes.mugs="mugs" user_stated u1`,
		`preference.language="Russian" user_stated u1`,
		`home.city=null correction retracts "Paris" user_stated u2`,
		`home.city="Lyon" tool_confirmed t1`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if c := ex.Candidates[3]; c.ValidFromHint != "since May" || c.ValidFrom == nil || !c.ValidFrom.Equal(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("valid from: %q %v", c.ValidFromHint, c.ValidFrom)
	}
	if ex.Usage != (memory.Usage{PromptTokens: 140, CompletionTokens: 7, Calls: 1}) {
		t.Errorf("usage %+v", ex.Usage)
	}
	if len(ex.Rejected) != 0 {
		t.Errorf("rejected %+v", ex.Rejected)
	}
	skipped := map[string]string{}
	for _, s := range ex.Skipped {
		skipped[s.MessageID] = s.Reason
	}
	if len(skipped) != 2 || !strings.Contains(skipped["s1"], "system") || !strings.Contains(skipped["a1"], "no claim") {
		t.Errorf("skipped %v", skipped)
	}
	sent := fake.sent()
	if len(sent) != 1 || len(sent[0]) != 4 || sent[0][0].ID != "u1" || sent[0][0].Content != chatMsgs[1].Content {
		t.Errorf("sent %+v", sent)
	}
}

func TestLLMBatchesNeverTruncate(t *testing.T) {
	l, fake := newFake(t, &fakeOpenAI{})
	l.MaxBatchChars, l.MaxMessageChars = 50, 200
	long := strings.Repeat("long message ", 10) // 130 characters: alone in its batch
	huge := strings.Repeat("x", 201)            // over the message bound: not sent
	msgs := []memory.Message{
		{ID: "1", Role: "user", Content: "I love green tea a lot"},
		{ID: "2", Role: "user", Content: "and I hate coffee, honestly"},
		{ID: "3", Role: "user", Content: "my name is Anna Petrova"},
		{ID: "4", Role: "user", Content: long},
		{ID: "5", Role: "user", Content: huge},
		{ID: "6", Role: "user", Content: "I live in Oslo"},
	}
	ex, err := l.Extract(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	var ids [][]string
	seen := map[string]string{}
	for _, b := range fake.sent() {
		var bid []string
		size := 0
		for _, m := range b {
			bid = append(bid, m.ID)
			seen[m.ID] = m.Content
			size += len(m.Content)
		}
		if size > 50 && len(b) > 1 {
			t.Errorf("batch %v holds %d characters, over the bound", bid, size)
		}
		ids = append(ids, bid)
	}
	if want := [][]string{{"1", "2"}, {"3"}, {"4"}, {"6"}}; !slices.EqualFunc(ids, want, slices.Equal) {
		t.Errorf("batches %v, want %v", ids, want)
	}
	if seen["4"] != long {
		t.Errorf("message 4 was altered: %q", seen["4"])
	}
	if ex.Usage.Calls != 4 || ex.Usage.PromptTokens != 4*100+10*5 || ex.Usage.CompletionTokens != 4*7 {
		t.Errorf("usage %+v", ex.Usage)
	}
	if len(ex.Skipped) != len(msgs) {
		t.Fatalf("skipped %+v", ex.Skipped)
	}
	for _, s := range ex.Skipped {
		if s.MessageID == "5" && !strings.Contains(s.Reason, "never truncated") {
			t.Errorf("huge message reason %q", s.Reason)
		}
	}
}

func TestLLMMalformedAnswer(t *testing.T) {
	cases := []struct {
		name, content, finish, want string
	}{
		{"not json", `{"candidates": [`, "", "not a JSON object"},
		{"prose", `Sure! Here are the facts: the user hates mugs.`, "", "not a JSON object"},
		{"wrong field", `{"facts": []}`, "", `no "candidates" field`},
		{"candidates object", `{"candidates": {"key": "name"}}`, "", "not an array"},
		{"candidates null", `{"candidates": null}`, "", "not an array"},
		{"array", `[{"key": "name"}]`, "", "not a JSON object"},
		{"cut off", `{"candidates": []}`, "length", "cut off"},
		{"empty", ``, "", "empty content"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := newFake(t, &fakeOpenAI{finish: tc.finish, answer: func([]wireMessage) string { return tc.content }})
			ex, err := l.Extract(context.Background(), chatMsgs)
			if !errors.Is(err, ErrMalformedAnswer) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrMalformedAnswer saying %q", err, tc.want)
			}
			if ex.Usage.Calls != 1 || ex.Usage.PromptTokens != 140 {
				t.Errorf("usage of the failed call not reported: %+v", ex.Usage)
			}
		})
	}
}

func TestLLMRejectsWhatFailsChecks(t *testing.T) {
	l, _ := newFake(t, &fakeOpenAI{answer: func([]wireMessage) string {
		good := cand("dislikes.mugs", "mugs", []string{"u1"}, "I hate mugs")
		unknown := cand("name", "Anna", []string{"m99"}, "Anna")
		noKey := cand("", "Russian", []string{"u1"}, "answer in Russian")
		assistant := cand("home.city", "Paris", []string{"a1"}, "Where do you live")
		nullStatement := cand("home.city", nil, []string{"u2"}, "I don't live in Paris anymore")
		conf := cand("likes.tea", "tea", []string{"u1"}, "I hate mugs")
		conf["confidence"] = 1.5
		invented := cand("likes.tea", "tea", []string{"u1"}, "I adore tea")
		badKind := cand("likes.cats", "cats", []string{"u1"}, "I hate mugs")
		badKind["kind"] = "rumour"
		spaced := cand("likes tea", "tea", []string{"u1"}, "I hate mugs")
		upper := cand("Preference.Language", "Russian", []string{"u1"}, "ANSWER IN  russian")
		for _, c := range []map[string]any{good, unknown, noKey, assistant, nullStatement, conf, invented, badKind, spaced, upper} {
			fill(c)
		}
		b, _ := json.Marshal(map[string]any{"candidates": []any{good, unknown, noKey, assistant,
			nullStatement, conf, invented, badKind, spaced, upper,
			map[string]any{"key": 42, "value": "x", "message_ids": []string{"u2"}}, "just a string"}})
		return string(b)
	}})
	ex, err := l.Extract(context.Background(), chatMsgs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range ex.Candidates {
		got = append(got, render(c))
	}
	if want := []string{`dislikes.mugs="mugs"`, `preference.language="Russian"`}; !slices.Equal(got, want) {
		t.Errorf("accepted %q, want %q", got, want)
	}
	wantReasons := []string{
		`names message "m99", which is not in this batch`,
		"no key",
		"validated_by user_stated but it cites no user message",
		"a null value is only a correction",
		"confidence missing or outside [0, 1]",
		"the evidence is not in the messages it cites",
		`kind "rumour"`,
		`key "likes tea" is not a lowercase dotted path`,
		"candidate 10 does not match the schema",
		"candidate 11 does not match the schema",
	}
	if len(ex.Rejected) != len(wantReasons) {
		t.Fatalf("rejected %d: %+v", len(ex.Rejected), ex.Rejected)
	}
	for i, r := range ex.Rejected {
		if !strings.Contains(r.Reason, wantReasons[i]) {
			t.Errorf("rejected[%d] reason %q, want %q", i, r.Reason, wantReasons[i])
		}
	}
	skipped := map[string]string{}
	for _, s := range ex.Skipped {
		skipped[s.MessageID] = s.Reason
	}
	if !strings.Contains(skipped["u2"], "rejected") || !strings.Contains(skipped["a1"], "rejected") || skipped["u1"] != "" {
		t.Errorf("skipped %v", skipped)
	}
}

func TestLLMHTTPError(t *testing.T) {
	l, _ := newFake(t, &fakeOpenAI{status: http.StatusInternalServerError})
	ex, err := l.Extract(context.Background(), chatMsgs)
	if err == nil || !strings.Contains(err.Error(), "HTTP 500") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err %v", err)
	}
	if ex.Usage.Calls != 1 || len(ex.Candidates) != 0 {
		t.Errorf("%+v", ex)
	}
}

func TestLLMTimeout(t *testing.T) {
	t.Run("client timeout", func(t *testing.T) {
		l, fake := newFake(t, &fakeOpenAI{delay: 30 * time.Second})
		l.Chat = NewOpenAIChat(fake.baseURL, "test-key", "test-model", 150*time.Millisecond)
		start := time.Now()
		_, err := l.Extract(context.Background(), chatMsgs)
		if err == nil || time.Since(start) > 5*time.Second {
			t.Fatalf("err %v after %v", err, time.Since(start))
		}
	})
	t.Run("context deadline", func(t *testing.T) {
		l, _ := newFake(t, &fakeOpenAI{delay: 30 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := l.Extract(ctx, chatMsgs)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
			t.Fatalf("err %v after %v", err, time.Since(start))
		}
	})
}

func TestLLMRefusesBadInput(t *testing.T) {
	if _, err := (&LLM{}).Extract(context.Background(), chatMsgs); err == nil {
		t.Error("no chat client: no error")
	}
	l, fake := newFake(t, &fakeOpenAI{})
	_, err := l.Extract(context.Background(), []memory.Message{{ID: "x", Role: "user", Content: "a"}, {ID: "x", Role: "user", Content: "b"}})
	if !errors.Is(err, memory.ErrInvalidInput) || len(fake.sent()) != 0 {
		t.Errorf("duplicate ids: err %v, %d calls", err, len(fake.sent()))
	}
}

func TestLLMSchemaIsStrict(t *testing.T) {
	var s struct {
		AdditionalProperties bool     `json:"additionalProperties"`
		Required             []string `json:"required"`
		Properties           struct {
			Candidates struct {
				Items struct {
					AdditionalProperties bool                       `json:"additionalProperties"`
					Required             []string                   `json:"required"`
					Properties           map[string]json.RawMessage `json:"properties"`
				} `json:"items"`
			} `json:"candidates"`
		} `json:"properties"`
	}
	if err := json.Unmarshal((&LLM{}).Schema(), &s); err != nil {
		t.Fatal(err)
	}
	items := s.Properties.Candidates.Items
	if s.AdditionalProperties || items.AdditionalProperties || !slices.Equal(s.Required, []string{"candidates"}) {
		t.Errorf("schema is not strict: %+v", s)
	}
	// Strict mode requires every property to be listed as required.
	for p := range items.Properties {
		if !slices.Contains(items.Required, p) {
			t.Errorf("property %q is not required", p)
		}
	}
	if len(items.Required) != len(items.Properties) {
		t.Errorf("required %v vs properties %d", items.Required, len(items.Properties))
	}
}

func TestOpenAIChatBadResponses(t *testing.T) {
	cases := []struct {
		name, body, want string
		malformed        bool
	}{
		{"html", `<html>gateway</html>`, "not the chat completion JSON", true},
		{"no choices", `{"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 0}}`, "no choices", true},
		{"refusal", `{"choices": [{"message": {"role": "assistant", "content": null, "refusal": "I can't help with that"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}`, "refused", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			chat := NewOpenAIChat(srv.URL+"/v1", "", "m", time.Second)
			_, pt, _, err := chat(context.Background(), "s", "u", llmSchema)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrMalformedAnswer) != tc.malformed {
				t.Fatalf("err %v", err)
			}
			if tc.name != "html" && pt != 5 {
				t.Errorf("prompt tokens %d, want the usage of the failed answer", pt)
			}
		})
	}
}
