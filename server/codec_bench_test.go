package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
)

// BenchmarkCommitCodec: checking and decoding a commit request and
// encoding its answer, with a state full of '&', '<' or non-ASCII text,
// must cost no more per byte than with plain ASCII (encoding/json
// HTML-escapes, and the hand-written codec this replaced fell back to it
// for such states). The three bodies take turns in every iteration, so
// a noisy machine slows them alike; the metrics are ns per body byte of
// each relative to plain (goal ≤ 1.1).
func BenchmarkCommitCodec(b *testing.B) {
	const size = 8 << 10
	names := []string{"plain", "html", "unicode"}
	texts := map[string]string{
		"plain":   strings.Repeat("plain text ", size/11),
		"html":    strings.Repeat("<a href=x&y>", size/12),
		"unicode": strings.Repeat("héllo wörld ünïcødé ", size/24),
	}
	bodies := map[string][]byte{}
	for _, n := range names {
		state := `{"text":"` + texts[n] + `","items":[{"k":"` + texts[n][:60] + `"}]}`
		bodies[n] = []byte(`{"expected_revision":3,"lease":{"owner":"w","epoch":1,"expires_at":"2026-01-01T00:00:00Z"},"event":{"event_type":"step","step_id":"s","attempt":1,"payload":` + state + `},"state":` + state + `,"next_step":"n"}`)
	}
	now := time.Now().UTC()
	w := httptest.NewRecorder()
	roundTrip := func(body []byte) {
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
	spent := map[string]time.Duration{}
	for b.Loop() {
		for _, n := range names {
			t0 := time.Now()
			roundTrip(bodies[n])
			spent[n] += time.Since(t0)
		}
	}
	perByte := func(n string) float64 { return float64(spent[n]) / float64(len(bodies[n])) }
	b.ReportMetric(perByte("html")/perByte("plain"), "html/plain")
	b.ReportMetric(perByte("unicode")/perByte("plain"), "unicode/plain")
}
