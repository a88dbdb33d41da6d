package tokens

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mementohq/memento/llm"
)

// Published values: OpenAI's cookbook "How to count tokens with tiktoken"
// lists these counts per encoding; "hello world" is [15339 1917] in cl100k.
func TestKnownCounts(t *testing.T) {
	cases := []struct {
		text          string
		o200k, cl100k int
	}{
		{"hello world", 2, 2},
		{"tiktoken is great!", 6, 6},
		{"antidisestablishmentarianism", 6, 6},
		{"2 + 2 = 4", 7, 7},
		{"お誕生日おめでとう", 8, 9},
		{"", 0, 0},
		// Special-token text counts as ordinary text (never a panic).
		{"<|endoftext|> hi", 8, 8},
	}
	for _, c := range cases {
		if got := o200k.Count(c.text); got != c.o200k {
			t.Errorf("o200k %q = %d, want %d", c.text, got, c.o200k)
		}
		if got := cl100k.Count(c.text); got != c.cl100k {
			t.Errorf("cl100k %q = %d, want %d", c.text, got, c.cl100k)
		}
	}
	enc, err := cl100k.load()
	if err != nil {
		t.Fatal(err)
	}
	if ids := enc.EncodeOrdinary("hello world"); !slices.Equal(ids, []int{15339, 1917}) {
		t.Fatalf("cl100k ids %v", ids)
	}
}

func TestForModel(t *testing.T) {
	cases := map[string]string{
		"gpt-4o": O200kBase, "gpt-4o-mini": O200kBase, "gpt-4.1-nano": O200kBase, "gpt-5": O200kBase,
		"o1": O200kBase, "o3-mini": O200kBase, "o4-mini": O200kBase, "openai/gpt-4o": O200kBase,
		"openai:gpt-4.1": O200kBase, "GPT-4o-2024-08-06": O200kBase,
		"gpt-4": Cl100kBase, "gpt-4-turbo": Cl100kBase, "gpt-3.5-turbo": Cl100kBase,
		"text-embedding-3-small": Cl100kBase, "text-embedding-ada-002": Cl100kBase,
		"llama3.1:8b": ApproxName, "mistral-large": ApproxName, "o10-thing": ApproxName, "": ApproxName,
		"claude-3-5-sonnet": ApproxName, "gpt-4oops": ApproxName,
		// Fine-tuned OpenAI models count with their base model's encoding.
		"ft:gpt-4o-mini-2024-07-18:my-org:custom-suffix:9zaaaaaa": O200kBase,
		"ft:gpt-3.5-turbo-0125:acme::8abc":                        Cl100kBase, "openai/ft:gpt-4.1:org::x": O200kBase,
		"ft:davinci-002:org::x": ApproxName,
	}
	for model, want := range cases {
		c := ForModel(model)
		if c.Name() != want {
			t.Errorf("ForModel(%q) = %s, want %s", model, c.Name(), want)
		}
		if c.Exact() != (want != ApproxName) {
			t.Errorf("ForModel(%q).Exact() = %v", model, c.Exact())
		}
	}
	if _, err := Encoding("p50k_base"); err == nil {
		t.Fatal("unknown encoding must fail")
	}
	if c, err := Encoding(O200kBase); err != nil || c.Name() != O200kBase {
		t.Fatal(c, err)
	}
}

func TestApprox(t *testing.T) {
	a := Approx()
	if a.Exact() || a.Name() != ApproxName {
		t.Fatal("approx must be flagged inexact")
	}
	if a.Count("") != 0 {
		t.Fatal("empty")
	}
	// On English prose it stays within 40% of the exact count and mostly above it.
	prose := strings.Repeat("The customer asked for a refund of order 1234 because it arrived damaged. ", 20)
	exact, est := cl100k.Count(prose), a.Count(prose)
	if est < exact || float64(est) > 1.4*float64(exact) {
		t.Fatalf("approx %d vs exact %d", est, exact)
	}
	// CJK: one token per character at least, where bytes/4 would undercount.
	if n := a.Count("お誕生日おめでとう"); n < 9 {
		t.Fatalf("CJK approx %d", n)
	}
}

func TestMessages(t *testing.T) {
	c := ForModel("gpt-4o")
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: "You are a helpful assistant."},
		{Role: llm.RoleUser, Content: "hello world", Name: "ann"},
	}
	want := ReplyPriming +
		TokensPerMessage + c.Count("system") + c.Count("You are a helpful assistant.") +
		TokensPerMessage + c.Count("user") + 2 + TokensPerName + c.Count("ann")
	if got := ChatTokens(c, msgs); got != want {
		t.Fatalf("ChatTokens = %d, want %d", got, want)
	}
	if got := MessageTokens(c, llm.Message{Role: llm.RoleUser, Content: "hello world"}); got != 3+1+2 {
		t.Fatalf("one message = %d, want 6", got)
	}
	if ChatTokens(c, nil) != 0 {
		t.Fatal("no messages, no tokens")
	}
	tc := MessageTokens(c, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":"x"}`}}})
	if tc <= TokensPerMessage+1 {
		t.Fatalf("tool call must count: %d", tc)
	}
}

func TestCacheAndConcurrency(t *testing.T) {
	long := strings.Repeat("concurrent counting of a long history message; ", 200)
	want := o200k.Count(long)
	if got := o200k.Count(long); got != want { // from the cache
		t.Fatalf("cached %d vs %d", got, want)
	}
	if !o200k.cache.Contains(cacheKey{h: hashOf(o200k, long), n: len(long)}) {
		t.Fatal("long text not cached")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				txt := fmt.Sprintf("%s %d", long, i%5)
				n1, n2 := o200k.Count(txt), cl100k.Count(txt)
				if n1 <= want || n2 <= 0 {
					errs <- fmt.Errorf("counts %d %d", n1, n2)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func hashOf(c *bpeCounter, s string) uint64 { return keyOf(c, s).h }

var benchText = strings.Repeat("The customer asked for a refund of order 1234 because it arrived damaged; "+
	"the agent checked the ledger, found payment pay_8f2a and issued the refund. ", 40)

// BenchmarkCount reports throughput of exact counting (uncached: a fresh
// text each time), of a cache hit, and of the approximation as the baseline.
func BenchmarkCount(b *testing.B) {
	o200k.Count("warm up")
	b.Run("approx-baseline", func(b *testing.B) {
		b.SetBytes(int64(len(benchText)))
		for b.Loop() {
			approxCount(benchText)
		}
	})
	b.Run("o200k-uncached", func(b *testing.B) {
		enc, _ := o200k.load()
		b.SetBytes(int64(len(benchText)))
		for b.Loop() {
			enc.EncodeOrdinary(benchText)
		}
	})
	b.Run("cl100k-uncached", func(b *testing.B) {
		enc, _ := cl100k.load()
		b.SetBytes(int64(len(benchText)))
		for b.Loop() {
			enc.EncodeOrdinary(benchText)
		}
	})
	b.Run("o200k-cached", func(b *testing.B) {
		o200k.Count(benchText)
		b.SetBytes(int64(len(benchText)))
		for b.Loop() {
			o200k.Count(benchText)
		}
	})
	// One unbroken word as long as benchText: the long-run path (own
	// pre-tokenization, heap merge). Its MB/s next to o200k-uncached's is
	// the cost of a pathological text; tiktoken's own merge is quadratic.
	word := strings.Repeat("x", len(benchText))
	b.Run("o200k-one-long-word", func(b *testing.B) {
		b.SetBytes(int64(len(word)))
		for b.Loop() {
			if err := o200k.eachToken(word, func(int) {}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestApproxNotUnderIDs: ids, hashes, long numbers and emoji, where bytes/4
// and word counts fall far short of a BPE tokenizer's count, are not
// under-counted by the approximation (a budget counted low overflows).
func TestApproxNotUnderIDs(t *testing.T) {
	a := Approx()
	for name, text := range map[string]string{
		"uuid":   "order 6ed5d1bf-e585-552f-ac95-4ab592c9357d tracking 609500700747957619887872460",
		"digits": strings.Repeat("1234567890", 50),
		"ids":    strings.Repeat("id-9f86d081884c7d65 id-2c26b46b68ffc68f ", 25),
		"emoji":  strings.Repeat("🎁🎉😀", 40),
	} {
		if est, o, c := a.Count(text), o200k.Count(text), cl100k.Count(text); est < o || est < c {
			t.Errorf("%s: approx %d under o200k %d or cl100k %d", name, est, o, c)
		}
	}
}
