package server_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/session"
)

// FuzzSessionRequest feeds arbitrary bodies, query strings, content types
// and If-Match headers to every session route of a real server on SQLite:
// never a 5xx, every error a well-formed problem.
func FuzzSessionRequest(f *testing.F) {
	e := newEnv(f, "sqlite", envOptions{cfg: memento.Config{Sessions: session.Options{MaxStateBytes: 2048, MaxMessageBytes: 512, MaxMessages: 5}}})
	seed := httptest.NewRecorder()
	e.srv.ServeHTTP(seed, httptest.NewRequest(http.MethodPut, "/v1/sessions/fz", bytes.NewReader([]byte(`{"user_id":"u","state":{"a":1}}`))))
	if seed.Code != http.StatusCreated {
		f.Fatalf("seed session: %d %s", seed.Code, seed.Body.String())
	}
	f.Add(uint8(0), []byte(`{"user_id":"u","state":{"current_step":"x"},"ttl_seconds":5}`), "", "", "application/json")
	f.Add(uint8(1), []byte(`{"a":null,"b":{"c":"mail x@y.io"}}`), "user_id=u", `"1"`, "application/merge-patch+json")
	f.Add(uint8(2), []byte(`{"messages":[{"role":"user","content":"card 4111 1111 1111 1111","metadata":{"k":[1]}}]}`), "user_id=u", "", "application/json")
	f.Add(uint8(3), []byte(nil), "user_id=u&limit=2&since=2024-01-01T00:00:00Z&after_seq=1", "", "")
	f.Add(uint8(4), []byte(`{"text":"s","data":{"n":1},"through_seq":3}`), "user_id=u", "", "application/json")
	f.Add(uint8(5), []byte(nil), "user_id=%zz", "*", "")
	f.Add(uint8(6), []byte(`{"ttl_seconds":1e30,"user_id":""}`), "", `W/"1"`, "text/plain")
	f.Add(uint8(7), []byte(nil), "", "", "")
	routes := []struct{ method, path string }{
		{http.MethodPut, "/v1/sessions/fz"},
		{http.MethodPatch, "/v1/sessions/fz"},
		{http.MethodPost, "/v1/sessions/fz/messages"},
		{http.MethodGet, "/v1/sessions/fz/messages"},
		{http.MethodPut, "/v1/sessions/fz/summary"},
		{http.MethodGet, "/v1/sessions/fz"},
		{http.MethodGet, "/v1/sessions"},
		{http.MethodGet, "/v1/pii/pii:card:abcdefghijklmnopqrstuvwxyz"},
		{http.MethodPost, "/v1/sessions/fz/close"},
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte, rawQuery, ifMatch, contentType string) {
		rt := routes[int(which)%len(routes)]
		req := httptest.NewRequest(rt.method, rt.path, bytes.NewReader(body))
		req.URL.RawQuery = rawQuery
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)
		checkAnswer(t, rec, rt.method+" "+rt.path)
	})
}
