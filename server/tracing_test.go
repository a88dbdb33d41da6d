package server_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/server"
	"github.com/mementohq/memento/telemetry"
	"github.com/mementohq/memento/telemetry/otlptest"
)

// TestTracing: with an OTLP endpoint, a request is a server span that
// continues the caller's traceparent and carries the request id, and each
// store call it makes is a child span in the same trace, all received over
// the real OTLP/HTTP protocol. The request id is also in the log line with
// the trace id.
func TestTracing(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	ctx := context.Background()
	tr, err := telemetry.Start(ctx, telemetry.Config{Endpoint: rcv.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	eng := openEngine(t, "sqlite", memento.Config{Tracer: tr.Tracer})
	e := serveEngineWith(t, eng, "", "", func(o *server.Options) { o.Tracing = tr })

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	resp := e.do(t, "POST", "/v1/runs", map[string]any{"run_id": "traced", "workflow_name": "wf", "state": map[string]any{}},
		map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"})
	if resp.status != 201 {
		t.Fatalf("create: %d %s", resp.status, resp.body)
	}
	reqID := resp.header.Get("X-Request-Id")
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tr.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	var serverSpan, storeSpan bool
	for _, s := range rcv.Spans() {
		if hex.EncodeToString(s.TraceID) != traceID {
			continue
		}
		switch s.Name {
		case "POST /v1/runs":
			serverSpan = true
			if s.Attributes["memento.request_id"] != reqID || reqID == "" {
				t.Errorf("server span request id %q, header %q", s.Attributes["memento.request_id"], reqID)
			}
			if hex.EncodeToString(s.ParentID) != "00f067aa0ba902b7" {
				t.Errorf("server span parent %x, want the caller's span", s.ParentID)
			}
		case "store.CreateRun":
			storeSpan = true
			if s.Attributes["memento.tenant_id"] != "default" {
				t.Errorf("store span tenant %q", s.Attributes["memento.tenant_id"])
			}
		}
	}
	if !serverSpan || !storeSpan {
		t.Fatalf("spans in trace %s: server %v, store %v; received %+v", traceID, serverSpan, storeSpan, rcv.Spans())
	}
	if logs := e.logs.String(); !containsAll(logs, reqID, traceID) {
		t.Errorf("log has no line with request id %s and trace id %s:\n%s", reqID, traceID, logs)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if sub == "" || !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
