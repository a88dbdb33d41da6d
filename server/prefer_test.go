package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mementohq/memento/client"
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
	res2, err := e.c.Commit(context.Background(), "m1", commitReq(2, l, "c", `{"secret":"big state"}`), client.ReturnMinimal())
	if err != nil || res2.Run.StateRevision != 3 || res2.Run.RunID != "m1" || res2.Run.NextStep != "next-c" || res2.Event.Seq != 3 || res2.Run.State != nil {
		t.Fatalf("client minimal commit: %+v, %v", res2, err)
	}
	full := e.do(t, "POST", "/v1/runs/m1/commit", commitReq(3, l, "b", `{"secret":"big state"}`), nil)
	if full.status != 200 || full.header.Get("Preference-Applied") != "" || !strings.Contains(string(full.body), `"state":{"secret":"big state"}`) {
		t.Fatalf("full answer %d %v %s", full.status, full.header, full.body)
	}
}
