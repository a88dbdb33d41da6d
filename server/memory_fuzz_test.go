package server_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/memory"
)

// FuzzMemoryRequest feeds arbitrary bodies and query strings to every
// memory route of a real server on SQLite: never a 5xx, every error a problem.
func FuzzMemoryRequest(f *testing.F) {
	e := newEnv(f, "sqlite", envOptions{cfg: memento.Config{Memory: memory.Options{Extractor: testExtractor{}}}})
	res := e.do(f, "POST", "/v1/memories", claimBody("s", "home", "Oslo", "m-1"), nil)
	var c struct {
		MemoryID string `json:"memory_id"`
	}
	if err := json.Unmarshal(res.body, &c); err != nil || res.status != 201 {
		f.Fatalf("fixture: %d %s", res.status, res.body)
	}
	id := c.MemoryID
	f.Add(uint8(0), []byte(`{"subject_id":"s","key":"k","value":{"a":[1,"x"]},"provenance":{"source_type":"tool","source_id":"t","validated_by":"tool_confirmed"},"ttl_seconds":5}`), "")
	f.Add(uint8(1), []byte(``), "subject_id=s&as_of=2026-01-01T00:00:00Z&limit=2")
	f.Add(uint8(2), []byte(``), "subject_id=s&cursor=MTox")
	f.Add(uint8(3), []byte(`{"subject_id":"s","query":"oslo home","k":3,"mode":"fulltext","half_life_seconds":60}`), "")
	f.Add(uint8(4), []byte(`{"subject_id":"s","messages":[{"role":"user","content":"I live in Oslo","id":"a"}],"apply":true}`), "")
	f.Add(uint8(5), []byte(``), "")
	f.Add(uint8(7), []byte(`{"reason":"wrong"}`), "")
	f.Add(uint8(10), []byte(`{"namespace":"n","reason":"r"}`), "namespace=n")
	f.Add(uint8(12), []byte(`{"personal":true,"sensitive":true,"ttl_seconds":10}`), "")
	routes := []struct{ method, path string }{
		{"POST", "/v1/memories"},
		{"GET", "/v1/memories"},
		{"GET", "/v1/memories/held"},
		{"POST", "/v1/memories/search"},
		{"POST", "/v1/memories/extract"},
		{"GET", "/v1/memories/" + id},
		{"GET", "/v1/memories/" + id + "/history"},
		{"POST", "/v1/memories/" + id + "/invalidate"},
		{"POST", "/v1/memories/" + id + "/confirm"},
		{"POST", "/v1/memories/" + id + "/reject"},
		{"DELETE", "/v1/subjects/other/memories"},
		{"GET", "/v1/subjects/s/profile"},
		{"PUT", "/v1/memory-namespaces/n"},
		{"GET", "/v1/memory-namespaces/n"},
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte, rawQuery string) {
		rt := routes[int(which)%len(routes)]
		req := httptest.NewRequest(rt.method, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.URL.Path = rt.path
		req.URL.RawQuery = rawQuery
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)
		checkAnswer(t, rec, rt.method+" "+rt.path)
	})
}
