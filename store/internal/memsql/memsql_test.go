package memsql

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestWords(t *testing.T) {
	got := Words([]string{`Green-TEA "OR" tea*`, "", "NEAR(x)", "café2go"})
	want := []string{"green", "tea", "or", "near", "x", "café2go"}
	if !slices.Equal(got, want) {
		t.Fatalf("words %q, want %q", got, want)
	}
	if n := len(Words([]string{strings.Repeat("w ", 10) + strings.Repeat("a b c d e f g h i j k l m n o p q r s t u v w x y z ", 3)})); n != 26 {
		t.Fatalf("%d distinct words, want 26", n)
	}
	var many []string
	for i := range 200 {
		many = append(many, strings.Repeat("a", i+1))
	}
	if n := len(Words(many)); n != MaxWords {
		t.Fatalf("%d words, want the cap %d", n, MaxWords)
	}
}

func TestScopes(t *testing.T) {
	a, b := SubjectScope("t1", "s1"), SubjectScope("t1s", "1")
	if a == b || a == SubjectScope("t2", "s1") || NamespaceScope("t1", "s1", "") == a {
		t.Fatalf("scopes collide: %s %s", a, b)
	}
	if a[0] != 's' || a[len(a)-1] != '0' || len(a) != 34 {
		t.Fatalf("scope token %q", a)
	}
}

func TestVectorRoundTrip(t *testing.T) {
	in := []float32{0, -1.5, 3e-8, float32(math.Inf(1)), math.MaxFloat32}
	b := EncodeVector(in)
	if len(b) != 20 || b[4] != 0 || b[7] != 0xbf { // -1.5 is 0xbfc00000, little-endian
		t.Fatalf("encoding % x", b)
	}
	out, err := DecodeVector(b, len(in))
	if err != nil || !slices.Equal(in, out) {
		t.Fatalf("round trip %v %v", out, err)
	}
	if _, err := DecodeVector(b[:19], 5); err == nil {
		t.Fatal("a short blob decoded")
	}
}

func TestTokens(t *testing.T) {
	if got := Tokens("Drinks green TEAS, drinking-teas!"); !slices.Equal(got, []string{"drink", "green", "tea", "drink", "tea"}) {
		t.Fatalf("tokens %q", got)
	}
	if got := QueryTokens([]string{"drinks", "drinking", "Tea"}); !slices.Equal(got, []string{"drink", "tea"}) {
		t.Fatalf("query tokens %q", got)
	}
}
