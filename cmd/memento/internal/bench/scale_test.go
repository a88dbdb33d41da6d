package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The scale benchmark, briefly, on both backends: the tenants hold what
// the report says (the healthy poll returns nothing, the recovering one
// every run with a free lease), every figure is measured in every round,
// and nothing is left behind.
func TestRunScaleSmoke(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "scale")
	var progress strings.Builder
	rep, err := RunScale(context.Background(), ScaleConfig{
		PostgresURL: testPostgresURL(t), DataDir: dir,
		Sizes: []int{2000, 4000}, ActiveEvery: 100, Rounds: 2, Polls: 2, RetainBatches: 1,
		CommitDuration: 400 * time.Millisecond, ResumeEvents: 40, StorageSteps: 20, StateBytes: 10 << 10,
		Progress: &progress,
	})
	if err != nil {
		t.Fatalf("RunScale: %v\n%s", err, progress.String())
	}
	if len(rep.Rows) != 4 {
		t.Fatalf("%d rows, want 2 backends x 2 sizes: %+v", len(rep.Rows), rep.Rows)
	}
	for _, row := range rep.Rows {
		if row.PollReturned != 0 {
			t.Errorf("%s %d: the healthy poll returned %d runs, want none", row.Backend, row.Runs, row.PollReturned)
		}
		if row.DuePollReturned != row.Active {
			t.Errorf("%s %d: the due poll returned %d runs, want %d", row.Backend, row.Runs, row.DuePollReturned, row.Active)
		}
		rd := row.Rounds
		for name, got := range map[string]int{"poll": len(rd.PollMS), "due poll": len(rd.DuePollMS),
			"commit": len(rd.CommitsPerSec), "resume": len(rd.ResumeMS), "retention": len(rd.RetainBatchMS)} {
			if got != 2 {
				t.Errorf("%s %d: %d samples of %s, want one per round", row.Backend, row.Runs, got, name)
			}
		}
		if row.Runs == 2000 && (row.PollPaired != 1 || row.CommitsPaired != 1) {
			t.Errorf("%s %d: the first size's paired ratios are %v and %v, want 1", row.Backend, row.Runs, row.PollPaired, row.CommitsPaired)
		}
		if row.CommitsPerSec <= 0 || row.ResumeMS <= 0 || row.RetainBatchMS <= 0 {
			t.Errorf("%s %d: a figure is missing: %+v", row.Backend, row.Runs, row)
		}
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("SQLite files left behind: %v", left)
	}
}

// The paired ratio is the median of the rounds' own ratios.
func TestPairedRatio(t *testing.T) {
	if got := pairedRatio([]float64{2, 4, 9}, []float64{1, 4, 3}); got != 2 {
		t.Fatalf("pairedRatio = %v, want 2 (the median of 2, 1 and 3)", got)
	}
	if got := pairedRatio([]float64{5, 6}, []float64{0, 3}); got != 2 {
		t.Fatalf("pairedRatio = %v, want 2 (a round of base 0 left out)", got)
	}
}
