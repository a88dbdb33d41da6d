package bench

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mementohq/memento/llm/hashembed"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/store/memstore"
)

// syntheticLocomo is a tiny data set in the LoCoMo layout, made up for the
// tests (the real one is read in place, never copied). Its evidence ids
// include the malformed shapes the real file has.
var syntheticLocomo = []LocomoConversation{
	{SampleID: "conv-a", SpeakerA: "Alice", SpeakerB: "Bob", Sessions: []LocomoSession{
		{Number: 2, DateTime: "4:10 pm on 2 June, 2023", Turns: []LocomoTurn{
			{Speaker: "Bob", DiaID: "D2:1", Text: "The cello recital went well."},
			{Speaker: "Alice", DiaID: "D2:2", Text: "Look at this!", Caption: "a golden retriever on a beach"}}},
		{Number: 1, DateTime: "4:25 pm on 13 May, 2023", Turns: []LocomoTurn{
			{Speaker: "Alice", DiaID: "D1:1", Text: "I adopted a puppy named Biscuit yesterday."},
			{Speaker: "Bob", DiaID: "D1:2", Text: "Congrats! I started learning the cello."},
			{Speaker: "Alice", DiaID: "D1:3", Text: "My sister visits from Lisbon next week."}}}},
		QA: []LocomoQA{
			{Question: "What is the name of Alice's puppy?", Evidence: []string{"D1:1"}, Category: 4},
			{Question: "Which instrument did Bob learn and play at a recital?", Evidence: []string{"D1:2; D2:1"}, Category: 1},
			{Question: "When does Alice's sister come from Lisbon?", Evidence: []string{"D:1:3"}, Category: 2},
			{Question: "What kind of dog is in Alice's photo?", Evidence: []string{"D2:2", "D9:9"}, Category: 3},
			{Question: "What is Bob's puppy called?", Evidence: []string{"D1:1"}, Category: 5},
			{Question: "Where does Alice live?", Evidence: []string{"D"}, Category: 4}}},
	{SampleID: "conv-b", SpeakerA: "Carol", SpeakerB: "Dan", Sessions: []LocomoSession{
		{Number: 1, DateTime: "9:00 am on 1 March, 2022", Turns: []LocomoTurn{
			{Speaker: "Carol", DiaID: "D1:1", Text: "Our puppy is called Pepper."},
			{Speaker: "Dan", DiaID: "D1:2", Text: "Nice, I love dogs."}}}},
		QA: []LocomoQA{{Question: "What is the puppy called?", Evidence: []string{"D1:1"}, Category: 4}}},
}

// writeLocomoFile writes convs to a file of the test in the LoCoMo layout.
func writeLocomoFile(t *testing.T, convs []LocomoConversation) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "locomo.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteLocomo(f, convs); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// readSynthetic is syntheticLocomo through a file and ReadLocomo.
func readSynthetic(t *testing.T) []LocomoConversation {
	t.Helper()
	return readThroughFile(t, syntheticLocomo)
}

// readThroughFile is convs as ReadLocomo reads them back from a file.
func readThroughFile(t *testing.T, convs []LocomoConversation) []LocomoConversation {
	t.Helper()
	f, err := os.Open(writeLocomoFile(t, convs))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	back, err := ReadLocomo(f)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

func TestReadLocomo(t *testing.T) {
	convs := readSynthetic(t)
	if len(convs) != 2 || convs[0].SampleID != "conv-a" || convs[0].SpeakerB != "Bob" {
		t.Fatalf("conversations = %+v", convs)
	}
	s := convs[0].Sessions
	if len(s) != 2 || s[0].Number != 1 || s[1].Number != 2 || len(s[0].Turns) != 3 {
		t.Fatalf("sessions out of order or missing: %+v", s)
	}
	if got := s[0].Date.Format("2006-01-02 15:04"); got != "2023-05-13 16:25" {
		t.Fatalf("session 1 date = %s", got)
	}
	if s[1].Turns[1].Caption != "a golden retriever on a beach" {
		t.Fatalf("caption = %q", s[1].Turns[1].Caption)
	}
	if got := DefaultLocomoIngest.Indexing().TurnText(memory.ConversationTurn{Speaker: "Alice", Text: s[1].Turns[1].Text, Caption: s[1].Turns[1].Caption, At: s[1].Date}); got != "[2 June 2023] Alice: Look at this! [shares a photo: a golden retriever on a beach]" {
		t.Fatalf("turn text = %q", got)
	}
}

func TestNormalizeEvidence(t *testing.T) {
	known := map[string]bool{"D1:3": true, "D1:4": true, "D8:6": true, "D9:17": true, "D10:1": true, "D10:2": true, "D11:26": true, "D30:5": true}
	for _, c := range []struct {
		in      string
		want    []string
		changed bool
	}{
		{"D1:3", []string{"D1:3"}, false},
		{"D1:3; D1:4", []string{"D1:3", "D1:4"}, true},
		{"D8:6;D9:17", []string{"D8:6", "D9:17"}, true},
		{"D:11:26", []string{"D11:26"}, true},
		{"D10:1:2", []string{"D10:1", "D10:2"}, true},
		{"D30:05", []string{"D30:5"}, true},
		{"D", nil, true},
		{"D2:9", nil, true},
	} {
		got, changed := NormalizeEvidence(c.in, known)
		if !reflect.DeepEqual(got, c.want) || changed != c.changed {
			t.Errorf("NormalizeEvidence(%q) = %q, %v; want %q, %v", c.in, got, changed, c.want, c.changed)
		}
	}
}

// TestRunLocomo runs the whole pipeline on the synthetic file: ingest
// through the memory service on the in-memory store, search in every mode,
// score, and print JSON.
func TestRunLocomo(t *testing.T) {
	ctx := context.Background()
	svc := memory.NewService(memstore.New().Memory(), memory.Options{Embedder: hashembed.New(0)})
	rep, err := RunLocomo(ctx, LocomoConfig{Conversations: readSynthetic(t), Service: svc, Ingest: DefaultLocomoIngest, Ks: []int{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Turns != 7 || rep.Conversations != 2 || rep.Questions != 5 {
		t.Fatalf("turns %d, conversations %d, questions %d; want 7, 2, 5", rep.Turns, rep.Conversations, rep.Questions)
	}
	ev := rep.Evidence
	if ev.Entries != 7 || ev.Normalised != 4 || ev.Unresolved != 2 || ev.NoEvidenceQAs != 1 {
		t.Fatalf("evidence = %+v, want 7 entries, 4 normalised, 2 unresolved, 1 question without", ev)
	}
	ft := rep.Modes[memory.ModeFulltext]
	if ft == nil || len(rep.Modes) != 3 {
		t.Fatalf("modes = %v", rep.Modes)
	}
	// Bob's two turns rank first for the multi-hop question, in some order:
	// half its evidence at 1, all at 2. The rest are found at rank 1.
	if r := ft.ByCategory["1"].Recall["recall@1"]; r != 0.5 {
		t.Errorf("multi-hop recall@1 = %v, want 0.5", r)
	}
	if r1, r2 := ft.Recall["recall@1"], ft.Recall["recall@2"]; math.Abs(r1-0.9) > 1e-9 || r2 != 1 {
		t.Errorf("fulltext recall@1, @2 = %v, %v; want 0.9, 1", r1, r2)
	}
	if ft.ByCategory["5"] != nil || ft.ByCategory["3"].Questions != 1 {
		t.Errorf("categories = %v", ft.ByCategory)
	}
	if ft.MeanTopTokens <= 0 || ft.ByConversation["conv-b"]["recall@1"] != 1 {
		t.Errorf("tokens %v, conv-b %v", ft.MeanTopTokens, ft.ByConversation["conv-b"])
	}
	for _, m := range rep.Modes {
		if m.Recall["recall@2"] < m.Recall["recall@1"] || m.Recall["recall@2"] > 1 {
			t.Errorf("recall not monotone in k or above 1: %v", m.Recall)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Modes map[string]map[string]json.RawMessage `json:"modes"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"recall@1", "recall@2", "by_category", "mean_top2_tokens"} {
		if _, ok := out.Modes["hybrid"][k]; !ok {
			t.Errorf("JSON mode lacks %s: %s", k, b)
		}
	}
}

// TestRunLocomoWindows: window items name all their turns, so a window hit
// finds every evidence turn inside it, and with distinct hits a turn inside
// a window already returned does not take a slot.
func TestRunLocomoWindows(t *testing.T) {
	ctx := context.Background()
	ms := memstore.New().Memory()
	svc := memory.NewService(ms, memory.Options{})
	in, err := ParseLocomoIngest("speaker,date,captions,window=3,stride=3")
	if err != nil {
		t.Fatal(err)
	}
	if in.Spec() != "speaker,date,captions,window=3,stride=3" {
		t.Fatalf("spec = %s", in.Spec())
	}
	rep, err := RunLocomo(ctx, LocomoConfig{Conversations: readSynthetic(t), Service: svc, Ingest: in, Ks: []int{1, 3}, Distinct: true, Modes: []string{memory.ModeFulltext}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Turns != 7 || rep.Modes[memory.ModeFulltext].Recall["recall@3"] != 1 {
		t.Fatalf("turns %d, recall %v", rep.Turns, rep.Modes[memory.ModeFulltext].Recall)
	}
	wins, err := ms.List(ctx, memory.ListQuery{TenantID: "locomo", SubjectID: "conv-a", Namespace: WindowNamespace, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(wins) != 2 || !reflect.DeepEqual(wins[0].Provenance.MessageIDs, []string{"D1:1", "D1:2", "D1:3"}) {
		t.Fatalf("windows = %+v", wins)
	}
	res, err := svc.Search(ctx, "locomo", memory.SearchQuery{Query: "Biscuit puppy", SubjectID: "conv-a", K: 5, Mode: memory.ModeFulltext, DistinctMessages: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	sawWindow := false
	for _, h := range res.Items {
		sawWindow = sawWindow || h.Namespace == WindowNamespace
		covered := true
		for _, id := range h.Provenance.MessageIDs {
			covered = covered && seen[id]
			seen[id] = true
		}
		if covered {
			t.Fatalf("hit %s names only turns returned above it: %+v", h.Key, res.Items)
		}
	}
	if !sawWindow || !seen["D1:1"] {
		t.Fatalf("the window of D1:1 or the turn itself not found: %+v", res.Items)
	}
}
