package hashembed

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/llm"
)

func embed1(t testing.TB, e *Embedder, s string) []float32 {
	t.Helper()
	v, err := e.Embed(context.Background(), []string{s})
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestIdentityAndShape(t *testing.T) {
	e := New(0)
	if e.Model() != "memento-hash-v1-256" || e.Dim() != 256 {
		t.Fatalf("model %q dim %d", e.Model(), e.Dim())
	}
	if New(64).Model() == e.Model() {
		t.Fatal("a different dimension must change the identity")
	}
	vs, err := e.Embed(context.Background(), []string{"The user prefers dark mode.", "Ünïcödé wörds ünd ßtraße", ""})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs[:2] {
		if len(v) != 256 || math.Abs(norm(v)-1) > 1e-5 {
			t.Fatalf("vector %d: len %d norm %v", i, len(v), norm(v))
		}
	}
	if norm(vs[2]) != 0 {
		t.Fatalf("empty text must embed to the zero vector, norm %v", norm(vs[2]))
	}
	if n := norm(embed1(t, e, " ,.;!? ")); n != 0 {
		t.Fatalf("punctuation only: norm %v", n)
	}
}

func TestDeterministic(t *testing.T) {
	a := embed1(t, New(0), "Refund order 1234 to the customer's card")
	b := embed1(t, New(0), "Refund order 1234 to the customer's card")
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("dimension %d differs: %v vs %v", i, a[i], b[i])
		}
	}
	// Golden values pin version 1: if this fails, the output changed and the
	// version in Model() must be bumped (stored vectors would be stale).
	var sum, first float64
	for i, x := range a {
		sum += float64(x) * float64(i%7+1)
		if first == 0 && x != 0 {
			first = float64(i)
		}
	}
	if math.Abs(sum-(-4.712435)) > 1e-4 || first != 2 {
		t.Fatalf("version 1 output changed: checksum %.6f first nonzero %v", sum, first)
	}
}

func TestSimilarityOrdering(t *testing.T) {
	e := New(0)
	q := embed1(t, e, "which theme does the user prefer")
	near := embed1(t, e, "The user prefers the dark theme")
	far := embed1(t, e, "Shipping address is 12 Main Street, Berlin")
	if dn, df := llm.Dot(q, near), llm.Dot(q, far); !(dn > df+0.2) {
		t.Fatalf("near %.3f should beat far %.3f clearly", dn, df)
	}
	// Stemming: inflections of one word meet.
	a := embed1(t, e, "running payments")
	b := embed1(t, e, "runs payment")
	c := embed1(t, e, "invoice archive")
	if !(llm.Dot(a, b) > llm.Dot(a, c)+0.3) {
		t.Fatalf("stems: %.3f vs %.3f", llm.Dot(a, b), llm.Dot(a, c))
	}
	// Char trigrams: a typo still lands close.
	x := embed1(t, e, "subscription")
	y := embed1(t, e, "subscripton")
	if d := llm.Dot(x, y); d < 0.3 {
		t.Fatalf("typo similarity %.3f", d)
	}
}

func TestLongTextAndCancel(t *testing.T) {
	e := New(0)
	long := strings.Repeat("alpha beta gamma ", 50000)
	if n := norm(embed1(t, e, long)); math.Abs(n-1) > 1e-5 {
		t.Fatalf("long text norm %v", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{"x"}); err == nil {
		t.Fatal("a cancelled context must fail")
	}
}

func TestConcurrent(t *testing.T) {
	e := New(128)
	want := embed1(t, e, "concurrent embedding is safe")
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				v := embed1(t, e, "concurrent embedding is safe")
				for k := range v {
					if v[k] != want[k] {
						errs <- "mismatch"
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

var sentences = []string{
	"The customer asked for a refund of order 1234 because it arrived damaged.",
	"User prefers dark mode and wants notifications only on weekdays.",
	"Meeting with the finance team moved to Thursday at 3pm, Berlin time.",
	"Her daughter is allergic to peanuts; avoid suggesting nut-based gifts.",
}

// BenchmarkEmbed reports ns per embedded sentence and the ratio to a
// baseline measured in the same run: lowercasing and splitting the same
// sentence into words (the least any embedder must do).
func BenchmarkEmbed(b *testing.B) {
	e := New(0)
	v := make([]float32, e.Dim())
	n := 0
	baseStart := time.Now()
	for i := 0; i < 20000; i++ {
		n += len(strings.Fields(strings.ToLower(sentences[i%len(sentences)])))
	}
	base := float64(time.Since(baseStart).Nanoseconds()) / 20000
	report := func(b *testing.B) {
		per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(per, "ns/sentence")
		b.ReportMetric(per/base, "x-baseline")
	}
	// warm: the words were stemmed before (the stem cache hits).
	b.Run("warm", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			e.EmbedInto(v, sentences[i%len(sentences)])
		}
		report(b)
	})
	_ = n
}
