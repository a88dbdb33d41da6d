package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchLocomoJSON: `bench locomo --json` prints exactly one JSON object
// with the figures per mode, on a tiny file in the LoCoMo layout.
func TestBenchLocomoJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.json")
	data := `[{"sample_id": "s1", "conversation": {"speaker_a": "Ann", "speaker_b": "Ben",
	  "session_1_date_time": "10:00 am on 3 April, 2023",
	  "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I bought a red kayak."},
	                {"speaker": "Ben", "dia_id": "D1:2", "text": "I prefer hiking in the Alps."}]},
	  "qa": [{"question": "What did Ann buy?", "answer": "a kayak", "evidence": ["D1:1"], "category": 4},
	         {"question": "Where does Ben like hiking?", "answer": "the Alps", "evidence": ["D1:2"], "category": 1}]}]`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
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
