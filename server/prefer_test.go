package server_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCommitPreferMinimal: with Prefer: return=minimal (RFC 7240) a commit
// answers what a caller needs to go on, without echoing the state, and says
// so in Preference-Applied; without it the whole run comes back.
func TestCommitPreferMinimal(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	_, l := e.leasedRun(t, "m1")
	res := e.do(t, "POST", "/v1/runs/m1/commit", commitReq(1, l, "a", `{"secret":"big state"}`),
		map[string]string{"Prefer": "respond-async, return=minimal"})
	if res.status != 200 || res.header.Get("Preference-Applied") != "return=minimal" {
		t.Fatalf("%d %v %s", res.status, res.header, res.body)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(res.body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got["run"]) != 4 || len(got["event"]) != 1 || got["run"]["run_id"] != "m1" ||
		got["run"]["state_revision"] != 2.0 || got["run"]["status"] != "running" || got["run"]["next_step"] != "next-a" || got["event"]["seq"] != 2.0 {
		t.Fatalf("minimal answer %s", res.body)
	}
	if strings.Contains(string(res.body), "secret") || res.header.Get("ETag") != `"2"` {
		t.Fatalf("minimal answer echoes the state or lacks the ETag: %v %s", res.header, res.body)
	}
	full := e.do(t, "POST", "/v1/runs/m1/commit", commitReq(2, l, "b", `{"secret":"big state"}`), nil)
	if full.status != 200 || full.header.Get("Preference-Applied") != "" || !strings.Contains(string(full.body), `"state":{"secret":"big state"}`) {
		t.Fatalf("full answer %d %v %s", full.status, full.header, full.body)
	}
}
