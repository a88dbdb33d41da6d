package tokens

import (
	"math/rand"
	"strings"
	"testing"
)

// The long path (own pre-tokenization, heap merge of long pre-tokens) must
// give exactly tiktoken's tokens. Texts here have runs long enough to take
// it yet short enough for tiktoken's quadratic merge to be the reference.
func TestLongRunsExact(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	alpha := []rune("aAbZ zq 0129\n\t.,'’é漢字😀-_/\\\r\u0301")
	texts := []string{
		strings.Repeat("a", 700), strings.Repeat("ab", 400), strings.Repeat("Zx", 390) + "'s end",
		strings.Repeat(" ", 700) + "x", strings.Repeat("\n \n", 300), strings.Repeat("-", 600) + "\n\n\n/",
		strings.Repeat("Ü", 300), strings.Repeat("漢字", 200), strings.Repeat("e\u0301", 300),
		"prefix words " + strings.Repeat("antidisestablishmentarianism", 40) + " and after, 12345.",
		strings.Repeat("😀", 200), strings.Repeat("AbC", 300) + "'ll",
	}
	for i := 0; i < 40; i++ {
		var b strings.Builder
		for j := 0; j < 1+r.Intn(4); j++ {
			// a long run of one character class between random short text
			run := []string{"q", "Xy", " ", "*", "é", "\t"}[r.Intn(6)]
			b.WriteString(strings.Repeat(run, 300+r.Intn(900)/len(run)))
			for k := r.Intn(40); k > 0; k-- {
				b.WriteRune(alpha[r.Intn(len(alpha))])
			}
		}
		texts = append(texts, b.String())
	}
	for _, c := range []*bpeCounter{o200k, cl100k} {
		enc, err := c.load()
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range texts {
			if !hasLongRun(text) {
				t.Fatalf("%q... should take the long path", text[:20])
			}
			var want []int
			for _, id := range enc.EncodeOrdinary(text) {
				want = append(want, len(enc.Decode([]int{id})))
			}
			got, err := Lengths(c.name, text)
			if err != nil {
				t.Fatal(err)
			}
			if !equalInts(got, want) {
				t.Fatalf("%s %q...: %d tokens, tiktoken %d", c.name, text[:40], len(got), len(want))
			}
			if n := c.Count(text); n != len(want) {
				t.Fatalf("%s Count %d, tiktoken %d", c.name, n, len(want))
			}
		}
	}
}

// One word of a megabyte (a pasted blob, a hostile document) is counted
// in O(n log n): tiktoken's own merge would take hours and hold a request
// past every deadline. The test finishing at all is the check.
func TestHugeWord(t *testing.T) {
	for _, text := range []string{strings.Repeat("x", 1<<20), strings.Repeat("_", 1<<18), strings.Repeat(" ", 1<<18) + "a"} {
		n := o200k.Count(text)
		lens, err := Lengths(O200kBase, text)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, l := range lens {
			sum += l
		}
		if n != len(lens) || sum != len(text) || n < len(text)/128 {
			t.Fatalf("count %d, %d lengths summing to %d of %d bytes", n, len(lens), sum, len(text))
		}
	}
}

func TestHasLongRun(t *testing.T) {
	prose := strings.Repeat("The order 12345 shipped on time; ", 100)
	if hasLongRun(prose) {
		t.Fatal("prose has no long run")
	}
	if hasLongRun(strings.Repeat("1", 5000)) {
		t.Fatal("digits split into threes: never a long pre-token")
	}
	if !hasLongRun(prose + strings.Repeat("é", 129) + prose) {
		t.Fatal("258 bytes of letters is a long run")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
