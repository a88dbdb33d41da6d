package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/internal/enginetest"
	"github.com/mementohq/memento/mcp"
)

// TestStdioSurvivesBadLines: over stdio a malformed line, invalid UTF-8, a
// lone surrogate or nesting past the bound is answered with a JSON-RPC
// error and changes nothing; the lines around it are served, and a request
// followed straight by the end of input is still answered.
func TestStdioSurvivesBadLines(t *testing.T) {
	eng := enginetest.Open(t, "sqlite", memento.Config{})
	s := newServer(eng)
	call := func(id int, args string) string {
		return `{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"method":"tools/call","params":{"name":"session_put","arguments":` + args + `}}`
	}
	deep := strings.Repeat(`{"a":`, 80) + `1` + strings.Repeat(`}`, 80)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`garbage not json`,
		call(2, `{"session_id":"ok1","state":{"a":1}}`),
		call(3, "{\"session_id\":\"bad\xff\",\"state\":{\"v\":\"\xc3\x28\"}}"),
		call(4, `{"session_id":"bad2","state":{"k":"\ud800x"}}`),
		call(5, `{"session_id":"bad3","state":`+deep+`}`),
		`{"jsonrpc":"2.0","id":6,"method":"tools/list"`,
		call(7, `{"session_id":"ok2","state":{"b":2}}`),
	}, "\n") + "\n"
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.Serve(ctx, mcp.Binding{Tenant: "default", User: "ann"}, strings.NewReader(in), &out)

	answers := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("output line is not JSON: %q", l)
		}
		id, _ := json.Marshal(m["id"])
		answers[string(id)] = m
	}
	for _, id := range []string{"1", "2", "7"} {
		if a := answers[id]; a == nil || a["error"] != nil {
			t.Fatalf("request %s: %v, want an answer; output:\n%s", id, a, out.String())
		}
		if r, _ := answers[id]["result"].(map[string]any); r["isError"] == true {
			t.Fatalf("request %s failed: %v", id, r)
		}
	}
	for _, id := range []string{"3", "4", "5"} {
		e, _ := answers[id]["error"].(map[string]any)
		if e == nil || e["code"].(float64) != -32600 || e["message"] == "" {
			t.Fatalf("request %s: %v, want an invalid-request error", id, answers[id])
		}
	}
	if e, _ := answers["null"]["error"].(map[string]any); e == nil || e["code"].(float64) != -32700 {
		t.Fatalf("malformed lines: %v, want a parse error", answers["null"])
	}
	for _, id := range []string{"ok1", "ok2"} {
		if _, err := eng.Sessions.Get(ctx, "default", id, "ann"); err != nil {
			t.Fatalf("session %s: %v", id, err)
		}
	}
	for _, id := range []string{"bad\ufffd", "bad2", "bad3"} {
		if _, err := eng.Sessions.Get(ctx, "default", id, "ann"); err == nil {
			t.Fatalf("a refused call made session %q", id)
		}
	}
}
