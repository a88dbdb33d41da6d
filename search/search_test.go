package search

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"
)

func TestTerms(t *testing.T) {
	got := Terms("Where does Ingrid LIVE now? Ingrid, where!")
	want := []string{"ingrid", "live"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Terms = %q, want %q", got, want)
	}
	if got := Terms("what is it"); !reflect.DeepEqual(got, []string{"what", "is", "it"}) {
		t.Fatalf("stopword-only query = %q, want its words kept", got)
	}
	long := ""
	for i := 0; i < 200; i++ {
		long += fmt.Sprintf("w%d ", i)
	}
	if n := len(Terms(long)); n != MaxTerms {
		t.Fatalf("len(Terms(200 words)) = %d, want %d", n, MaxTerms)
	}
}

func TestRRF(t *testing.T) {
	a := []Ranked{{"x", 9}, {"y", 5}, {"z", 1}}
	b := []Ranked{{"y", 0.9}, {"w", 0.8}}
	got := RRF(60, nil, a, b)
	if got[0].ID != "y" {
		t.Fatalf("top = %s, want y (ranked in both lists)", got[0].ID)
	}
	if got[0].Ranks[0] != 2 || got[0].Ranks[1] != 1 || got[0].Scores[1] != 0.9 {
		t.Fatalf("y parts = %+v", got[0])
	}
	ids := []string{}
	for _, f := range got {
		ids = append(ids, f.ID)
	}
	if !reflect.DeepEqual(ids, []string{"y", "x", "w", "z"}) {
		t.Fatalf("order = %v", ids)
	}
	weighted := RRF(60, []float64{0, 1}, a, b)
	if weighted[0].ID != "y" || weighted[1].ID != "w" {
		t.Fatalf("weight 0 on the first list still ranks by it: %+v", weighted)
	}
}

func TestDecay(t *testing.T) {
	now := time.Now()
	if d := Decay(now.Add(-time.Hour), now, time.Hour); d < 0.499 || d > 0.501 {
		t.Fatalf("one half-life = %v, want 0.5", d)
	}
	if Decay(now.Add(-time.Hour), now, 0) != 1 || Decay(now.Add(time.Hour), now, time.Hour) != 1 {
		t.Fatal("no half-life or a future time must weigh 1")
	}
}

func randVec(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	Normalize(v)
	return v
}

// TestVectorIndexExact checks Search against a full sort, with removals
// and a filter.
func TestVectorIndexExact(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	x := NewVectorIndex(16)
	vecs := map[string][]float32{}
	for i := 0; i < 500; i++ {
		id := fmt.Sprintf("m%03d", i)
		vecs[id] = randVec(r, 16)
		ns := "a"
		if i%3 == 0 {
			ns = "b"
		}
		x.Upsert(id, vecs[id], Meta{Namespace: ns})
	}
	for i := 0; i < 500; i += 7 {
		id := fmt.Sprintf("m%03d", i)
		x.Remove(id)
		delete(vecs, id)
	}
	if x.Len() != len(vecs) {
		t.Fatalf("Len = %d, want %d", x.Len(), len(vecs))
	}
	q := randVec(r, 16)
	keep := func(_ string, m Meta) bool { return m.Namespace == "a" }
	got := x.Search(q, 10, keep)
	var want []Ranked
	for id, v := range vecs {
		var n int
		fmt.Sscanf(id, "m%03d", &n)
		m := Meta{Namespace: "a"}
		if n%3 == 0 {
			m.Namespace = "b"
		}
		if keep(id, m) {
			want = append(want, Ranked{id, float64(Dot(q, v))})
		}
	}
	sort.Slice(want, func(i, j int) bool { return better(want[i], want[j]) })
	want = want[:10]
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Search =\n%v\nwant\n%v", got, want)
	}
}
func TestTextIndexBM25(t *testing.T) {
	x := NewTextIndex()
	x.Add("a", "Ingrid went to the chess club meeting")
	x.Add("b", "Tomas painted a sunset over the lake")
	x.Add("c", "Ingrid is researching adoption agencies; adoption is her dream")
	x.Add("d", "temporary")
	x.Remove("d")
	if x.Len() != 3 {
		t.Fatalf("Len = %d", x.Len())
	}
	got := x.Search("When did Ingrid go to the chess clubs?", 10, nil)
	if len(got) != 2 || got[0].ID != "a" || got[1].ID != "c" {
		t.Fatalf("Search = %+v, want a (chess club, stemmed) then c", got)
	}
	if got := x.Search("adopting", 10, func(id string) bool { return id != "c" }); len(got) != 0 {
		t.Fatalf("filtered search = %+v", got)
	}
	if got := x.Search("temporary", 10, nil); len(got) != 0 {
		t.Fatalf("removed doc found: %+v", got)
	}
}

// TestTextExpansion: feedback terms are what the best hits share beyond the
// query's words; a query word, a word of one document and a word nearly
// every document has are not among them.
func TestTextExpansion(t *testing.T) {
	x := NewTextIndex()
	docs := map[string]string{
		"1":  "we went hiking in the mountains, the trail was steep",
		"2":  "another hiking trip: the trail by the lake",
		"3":  "the lake was cold and the trail muddy",
		"4":  "I baked bread today",
		"5":  "the bakery sells bread",
		"6":  "the kids played chess",
		"7":  "the weather was fine",
		"8":  "the museum was closed",
		"9":  "the garden needs water",
		"10": "the car broke down",
		"11": "the concert was loud",
	}
	for id, d := range docs {
		x.Add(id, d)
	}
	for i := range 20 { // the rest of a conversation: a word per turn
		x.Add(fmt.Sprintf("f%d", i), fmt.Sprintf("the filler%c note", 'a'+i))
	}
	q := Analyze("hiking")
	first := x.SearchTerms(q, 10, nil)
	if len(first) != 2 {
		t.Fatalf("first search: %v", first)
	}
	exp := x.Expansion([]string{first[0].ID, first[1].ID}, q, 5)
	if len(exp) == 0 || exp[0] != "trail" {
		t.Fatalf("expansion %v, want trail first", exp)
	}
	for _, bad := range []string{"hike", "mountain", "the"} {
		if slices.Contains(exp, bad) {
			t.Errorf("expansion %v holds %q", exp, bad)
		}
	}
	// The expansion reaches a document the query's own words miss.
	second := x.SearchTerms(exp, 10, nil)
	if !slices.ContainsFunc(second, func(r Ranked) bool { return r.ID == "3" }) {
		t.Fatalf("expanded search %v misses document 3", second)
	}
	if got, want := x.Search("hiking trail", 10, nil), x.SearchTerms(Analyze("hiking trail"), 10, nil); !slices.Equal(got, want) {
		t.Fatalf("Search %v != SearchTerms %v", got, want)
	}
	x.Remove("3")
	if r := x.SearchTerms([]string{"muddi"}, 10, nil); len(r) != 0 {
		t.Fatalf("removed document still found: %v", r)
	}
}

// TestParallelScanIsTheSerialScan: an exact scan split over workers ranks
// exactly as one goroutine does, filter and ties included.
func TestParallelScanIsTheSerialScan(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	serial := NewVectorIndexWith(8, Options{ExactLimit: -1})
	split := NewVectorIndexWith(8, Options{ExactLimit: -1, Workers: 3})
	for i := range 3*ParallelScanMin + 17 {
		v := make([]float32, 8)
		for j := range v {
			v[j] = float32(r.Intn(3) - 1) // few distinct vectors: many ties
		}
		Normalize(v)
		m := Meta{Namespace: []string{"a", "b"}[i%2]}
		serial.Upsert(fmt.Sprint("v", i), v, m)
		split.Upsert(fmt.Sprint("v", i), v, m)
	}
	keep := func(_ string, m Meta) bool { return m.Namespace == "a" }
	for range 5 {
		q := make([]float32, 8)
		for j := range q {
			q[j] = float32(r.NormFloat64())
		}
		Normalize(q)
		for _, k := range []int{1, 10, 200} {
			want, got := serial.Search(q, k, keep), split.Search(q, k, keep)
			if len(want) != k || !slices.Equal(want, got) {
				t.Fatalf("k %d: split scan %v, serial %v", k, got[:min(3, len(got))], want[:min(3, len(want))])
			}
		}
	}
}

// TestLexicalVectorsFillInAfterText: fused at LexicalVectorWeight, a
// vector-only hit, even the vectors' best, ranks after every one of 400
// full-text hits, whose order the vectors do not change.
func TestLexicalVectorsFillInAfterText(t *testing.T) {
	var text, vecs []Ranked
	for i := range 400 {
		text = append(text, Ranked{ID: fmt.Sprintf("t%03d", i), Score: float64(400 - i)})
	}
	vecs = append(vecs, Ranked{ID: "only-vector", Score: 1})
	for i := 399; i >= 0; i-- { // the vectors rank the text hits backwards
		vecs = append(vecs, Ranked{ID: fmt.Sprintf("t%03d", i), Score: 0.5})
	}
	fused := RRF(RRFK, []float64{1, LexicalVectorWeight}, text, vecs)
	for i, f := range fused[:400] {
		if f.ID != fmt.Sprintf("t%03d", i) {
			t.Fatalf("rank %d is %s, want full text's order", i, f.ID)
		}
	}
	if fused[400].ID != "only-vector" {
		t.Fatalf("the vector-only hit is at %+v, want it last", fused[400])
	}
	if IsLexical(struct{}{}) || !IsLexical(lexical{}) {
		t.Fatal("IsLexical")
	}
}

type lexical struct{}

func (lexical) Lexical() bool { return true }

// TestVariants: an unknown query term brings the index terms it may stand
// for (a typo's neighbour, a compound's halves, two words run together);
// known terms and short unknown ones bring none, so a question about
// something the index lacks is not bent into another word.
func TestVariants(t *testing.T) {
	x := NewTextIndex()
	x.Add("1", "We took a roadtrip along the coast")
	x.Add("2", "My favourite board is the old oak one; the trip was long")
	x.Add("3", "She performed at the fundraiser with the receiver")
	x.Add("4", "The travel plans and the gravel path")
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"Where did the road trip go?", []string{"roadtrip"}},                 // written together
		{"What happened on the boardtrip?", []string{"board", "trip"}},        // written apart
		{"Who preformed at the fundriaser?", []string{"perform", "fundrais"}}, // transposition, swap
		{"Which trip was long?", nil},                                         // every term known
		{"Who went to the grave?", nil},                                       // too short to correct
		{"Where did we trvl?", nil},
	} {
		got := x.Variants(c.query)
		if !slices.Equal(got, c.want) {
			t.Errorf("Variants(%q) = %v, want %v", c.query, got, c.want)
		}
	}
}
