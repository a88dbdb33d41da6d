package pii

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func noTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// A request line with nothing to mask comes out exactly as the wrapped
// handler writes it; one personal value anywhere in it is still masked.
func TestLogHandlerCleanAndDirtyRecords(t *testing.T) {
	logLine := func(h slog.Handler, tenant string) {
		slog.New(h).Info("request", "request_id", "0a1b2c3d-0612-3456-7890-123456789012", "method", "POST",
			"route", "POST /v1/runs/{run_id}/commit", "status", 200, "duration_ms", 1.25, "tenant", tenant)
	}
	var plain, masked bytes.Buffer
	opts := &slog.HandlerOptions{ReplaceAttr: noTime}
	logLine(slog.NewJSONHandler(&plain, opts), "default")
	logLine(NewLogHandler(slog.NewJSONHandler(&masked, opts), nil), "default")
	if plain.String() != masked.String() || !strings.Contains(plain.String(), `"status":200`) {
		t.Fatalf("clean line changed:\n got %s\nwant %s", masked.String(), plain.String())
	}
	masked.Reset()
	logLine(NewLogHandler(slog.NewJSONHandler(&masked, opts), nil), "eve@example.org")
	if out := masked.String(); strings.Contains(out, "eve@example.org") || !strings.Contains(out, `"tenant":"[redacted:email]"`) {
		t.Fatalf("the last attribute was not masked: %s", out)
	}
}
