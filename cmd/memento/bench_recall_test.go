package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mementohq/memento/cmd/memento/internal/bench"
)

// TestBenchLocomoJSON: `bench locomo --json` prints exactly one JSON object
// with the figures per mode, on a tiny file in the LoCoMo layout.
func TestBenchLocomoJSON(t *testing.T) {
	path := tinyLocomo(t)
	out, _, err := execute(t, context.Background(), "bench", "locomo", "--data", path, "--json", "-q", "--k", "1")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var rep struct {
		Modes map[string]struct {
			Recall1    *float64                   `json:"recall@1"`
			ByCategory map[string]json.RawMessage `json:"by_category"`
			Tokens     *float64                   `json:"mean_top1_tokens"`
		} `json:"modes"`
		Questions int `json:"questions"`
	}
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value: %q", out)
	}
	if rep.Questions != 2 || len(rep.Modes) != 3 {
		t.Fatalf("report = %+v", rep)
	}
	for name, m := range rep.Modes {
		if m.Recall1 == nil || m.Tokens == nil || len(m.ByCategory) != 2 {
			t.Fatalf("mode %s = %+v in %s", name, m, out)
		}
	}
	if r := *rep.Modes["fulltext"].Recall1; r != 1 {
		t.Fatalf("fulltext recall@1 = %v, want 1: %s", r, out)
	}
}

// tinyLocomo writes a two-turn file in the LoCoMo layout and returns its path.
func tinyLocomo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	err = bench.WriteLocomo(f, []bench.LocomoConversation{{SampleID: "s1", SpeakerA: "Ann", SpeakerB: "Ben",
		Sessions: []bench.LocomoSession{{Number: 1, DateTime: "10:00 am on 3 April, 2023", Turns: []bench.LocomoTurn{
			{Speaker: "Ann", DiaID: "D1:1", Text: "I bought a red kayak."},
			{Speaker: "Ben", DiaID: "D1:2", Text: "I prefer hiking in the Alps."}}}},
		QA: []bench.LocomoQA{
			{Question: "What did Ann buy?", Evidence: []string{"D1:1"}, Category: 4},
			{Question: "Where does Ben like hiking?", Evidence: []string{"D1:2"}, Category: 1}}}})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBenchCPUProfile: --cpuprofile on any bench command writes a profile
// pprof reads (gzip-compressed), also after a run that failed (the profile
// stops with the command), and a file it cannot create is an error.
func TestBenchCPUProfile(t *testing.T) {
	path := tinyLocomo(t)
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	if _, _, err := execute(t, context.Background(), "bench", "context", "--data", path+".missing", "-q", "--cpuprofile", prof); err == nil {
		t.Fatal("a missing data file was taken")
	}
	if _, _, err := execute(t, context.Background(), "bench", "context", "--data", path, "--json", "-q", "--cpuprofile", prof); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile of %d bytes is not gzip-compressed", len(b))
	}
	if _, _, err := execute(t, context.Background(), "bench", "context", "--data", path, "-q", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.prof")); err == nil || !strings.Contains(err.Error(), "cpu profile") {
		t.Fatalf("err = %v, want a cpu profile error", err)
	}
}
