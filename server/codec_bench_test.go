package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
)

// BenchmarkCommitCodec: decoding a commit request and encoding its answer
// with a state full of '&', '<' and non-ASCII text must cost no more than
// with plain ASCII of the same size (encoding/json HTML-escapes, which made
// such states slower). Each sub-benchmark reports ns per byte of state; the
// "ratio" metric of the last is special/plain in the same run (goal ≤ 1.1).
func BenchmarkCommitCodec(b *testing.B) {
	const size = 8 << 10
	states := map[string]string{
		"plain":   strings.Repeat("plain text ", size/11),
		"html":    strings.Repeat("<a href=x&y>", size/12),
		"unicode": strings.Repeat("héllo wörld ünïcødé ", size/24),
	}
	now := time.Now().UTC()
	perByte := map[string]float64{}
	for _, name := range []string{"plain", "html", "unicode"} {
		state := `{"text":` + mustQuote(states[name]) + `,"items":[{"k":` + mustQuote(states[name][:64]) + `}]}`
		body := []byte(`{"expected_revision":3,"lease":{"owner":"w","epoch":1,"expires_at":"2026-01-01T00:00:00Z"},"event":{"event_type":"step","step_id":"s","attempt":1,"payload":` + state + `},"state":` + state + `,"next_step":"n"}`)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			w := httptest.NewRecorder()
			for b.Loop() {
				var req run.CommitRequest
				if err := checkJSON(body); err != nil {
					b.Fatal(err)
				}
				if err := decodeStrict(body, &req); err != nil {
					b.Fatal(err)
				}
				rn := run.Run{TenantID: "t", RunID: "r", WorkflowName: "w", WorkflowVersion: "1", StateSchemaVersion: 1,
					Status: run.StatusRunning, NextStep: req.NextStep, State: req.State, StateRevision: 4, CreatedAt: now, UpdatedAt: now}
				ev := run.Event{Seq: 4, EventType: req.Event.EventType, StepID: req.Event.StepID, Attempt: req.Event.Attempt, Payload: req.Event.Payload, CreatedAt: now}
				w.Body.Reset()
				writeCommit(w, false, &rn, &ev)
				if w.Code != http.StatusOK {
					b.Fatal(w.Code)
				}
			}
			perByte[name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(len(body))
			if name != "plain" && perByte["plain"] > 0 {
				b.ReportMetric(perByte[name]/perByte["plain"], "ratio-to-plain")
			}
		})
	}
}

// mustQuote quotes s as a client without HTML escaping sends it (s has no
// '"', '\\' or control characters).
func mustQuote(s string) string { return `"` + s + `"` }
