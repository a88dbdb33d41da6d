package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/run"
)

// TestRunFlow walks a run through its whole life over HTTP: create (with
// idempotency), get with ETag, lease, commits, events, checkpoints, fork and
// list with a cursor, and checks each answer against the OpenAPI schemas.
func TestRunFlow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		ctx := context.Background()
		schemas := compileOpenAPI(t, e)

		// Create, twice with one Idempotency-Key: one run.
		create := run.CreateRequest{RunID: "flow-1", WorkflowName: "refund", WorkflowVersion: "1.0.0",
			State: json.RawMessage(`{"order":"o-1","amount":100}`), NextStep: "check"}
		res := e.do(t, "POST", "/v1/runs", create, map[string]string{"Idempotency-Key": "k-1"})
		if res.status != http.StatusCreated {
			t.Fatalf("create: %d %s", res.status, res.body)
		}
		schemas.validate(t, "Run", res.body)
		if res.header.Get("ETag") != `"1"` || res.header.Get("Location") != "/v1/runs/flow-1" {
			t.Fatalf("create headers: ETag %q Location %q", res.header.Get("ETag"), res.header.Get("Location"))
		}
		r, created, err := e.c.CreateRun(ctx, create, client.IdempotencyKey("k-1"))
		if err != nil || created || r.RunID != "flow-1" || r.StateRevision != 1 {
			t.Fatalf("replayed create: created=%v run=%+v err=%v", created, r, err)
		}
		other := create
		other.State = json.RawMessage(`{"order":"o-2"}`)
		other.RunID = ""
		_, _, err = e.c.CreateRun(ctx, other, client.IdempotencyKey("k-1"))
		if client.KindOf(err) != problem.IdempotencyMismatch || client.StatusOf(err) != http.StatusUnprocessableEntity {
			t.Fatalf("same key, other body: %v", err)
		}
		_, _, err = e.c.CreateRun(ctx, create)
		if !errors.Is(err, run.ErrAlreadyExists) || client.StatusOf(err) != http.StatusConflict {
			t.Fatalf("duplicate run id: %v", err)
		}

		// Get with ETag and If-None-Match.
		res = e.do(t, "GET", "/v1/runs/flow-1", nil, nil)
		if res.status != 200 || res.header.Get("ETag") != `"1"` {
			t.Fatalf("get: %d ETag %q", res.status, res.header.Get("ETag"))
		}
		schemas.validate(t, "Run", res.body)
		res = e.do(t, "GET", "/v1/runs/flow-1", nil, map[string]string{"If-None-Match": `"1"`})
		if res.status != http.StatusNotModified || len(res.body) != 0 {
			t.Fatalf("If-None-Match current: %d %s", res.status, res.body)
		}

		// Lease and three commits.
		res = e.do(t, "POST", "/v1/runs/flow-1/lease", map[string]any{"owner": "w1", "ttl_ms": 60000}, nil)
		if res.status != 200 {
			t.Fatalf("lease: %d %s", res.status, res.body)
		}
		schemas.validate(t, "Lease", res.body)
		var l run.Lease
		if err := json.Unmarshal(res.body, &l); err != nil || l.Owner != "w1" || l.Epoch != 1 {
			t.Fatalf("lease: %+v %v", l, err)
		}
		states := map[int64]string{1: `{"order":"o-1","amount":100}`}
		for i, step := range []string{"check", "refund", "notify"} {
			rev := int64(i + 1)
			state := fmt.Sprintf(`{"order":"o-1","amount":100,"done":%q}`, step)
			res = e.do(t, "POST", "/v1/runs/flow-1/commit", commitReq(rev, l, step, state), nil)
			if res.status != 200 {
				t.Fatalf("commit %d: %d %s", rev, res.status, res.body)
			}
			schemas.validate(t, "CommitResponse", res.body)
			var cr client.CommitResult
			if err := json.Unmarshal(res.body, &cr); err != nil {
				t.Fatal(err)
			}
			if cr.Run.StateRevision != rev+1 || cr.Event.Seq != rev+1 || res.header.Get("ETag") != strconv.Quote(strconv.FormatInt(rev+1, 10)) {
				t.Fatalf("commit %d: run rev %d, event seq %d, ETag %s", rev, cr.Run.StateRevision, cr.Event.Seq, res.header.Get("ETag"))
			}
			states[rev+1] = state
		}
		_, changed, err := e.c.GetRunIfChanged(ctx, "flow-1", 1)
		if err != nil || !changed {
			t.Fatalf("If-None-Match stale: changed=%v err=%v", changed, err)
		}

		// Events, in pages of 2.
		var seqs []int64
		after := int64(0)
		for {
			res = e.do(t, "GET", fmt.Sprintf("/v1/runs/flow-1/events?after=%d&limit=2", after), nil, nil)
			if res.status != 200 {
				t.Fatalf("events: %d %s", res.status, res.body)
			}
			schemas.validate(t, "EventList", res.body)
			var page client.Page[run.Event]
			if err := json.Unmarshal(res.body, &page); err != nil {
				t.Fatal(err)
			}
			for _, ev := range page.Items {
				seqs = append(seqs, ev.Seq)
			}
			if page.NextCursor == "" {
				break
			}
			if after, err = strconv.ParseInt(page.NextCursor, 10, 64); err != nil {
				t.Fatalf("events next_cursor %q: %v", page.NextCursor, err)
			}
		}
		if fmt.Sprint(seqs) != "[1 2 3 4]" {
			t.Fatalf("event seqs %v, want [1 2 3 4]", seqs)
		}
		// The same pages by cursor, as a generic paginator follows next_cursor.
		seqs, cursor := nil, ""
		for pages := 0; pages < 10; pages++ {
			res = e.do(t, "GET", "/v1/runs/flow-1/events?limit=2&cursor="+cursor, nil, nil)
			var page client.Page[run.Event]
			if res.status != 200 || json.Unmarshal(res.body, &page) != nil {
				t.Fatalf("events by cursor: %d %s", res.status, res.body)
			}
			for _, ev := range page.Items {
				seqs = append(seqs, ev.Seq)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if fmt.Sprint(seqs) != "[1 2 3 4]" {
			t.Fatalf("event seqs by cursor %v, want [1 2 3 4]", seqs)
		}
		expectProblem(t, e.do(t, "GET", "/v1/runs/flow-1/events?cursor=zzz", nil, nil), http.StatusUnprocessableEntity, "invalid-request")

		// Checkpoints: current revision, an explicit one, a duplicate label.
		res = e.do(t, "POST", "/v1/runs/flow-1/checkpoints", map[string]any{"label": "after-refund", "revision": 3}, nil)
		if res.status != http.StatusCreated {
			t.Fatalf("checkpoint: %d %s", res.status, res.body)
		}
		schemas.validate(t, "Checkpoint", res.body)
		if cp, err := e.c.CreateCheckpoint(ctx, "flow-1", "latest", 0); err != nil || cp.Revision != 4 {
			t.Fatalf("checkpoint current: %+v %v", cp, err)
		}
		_, err = e.c.CreateCheckpoint(ctx, "flow-1", "latest", 2)
		if client.KindOf(err) != problem.CheckpointExists || client.StatusOf(err) != http.StatusConflict {
			t.Fatalf("duplicate checkpoint: %v", err)
		}
		_, err = e.c.CreateCheckpoint(ctx, "flow-1", "future", 99)
		if client.KindOf(err) != problem.RevisionNotFound {
			t.Fatalf("checkpoint of a missing revision: %v", err)
		}
		res = e.do(t, "GET", "/v1/runs/flow-1/checkpoints", nil, nil)
		schemas.validate(t, "CheckpointList", res.body)
		cps, err := e.c.Checkpoints(ctx, "flow-1")
		if err != nil || len(cps) != 2 {
			t.Fatalf("checkpoints: %+v %v", cps, err)
		}
		// One at a time: the cursor leads to the second and then to the end.
		res = e.do(t, "GET", "/v1/runs/flow-1/checkpoints?limit=1", nil, nil)
		schemas.validate(t, "CheckpointList", res.body)
		var cpPage client.Page[run.Checkpoint]
		_ = json.Unmarshal(res.body, &cpPage)
		if len(cpPage.Items) != 1 || cpPage.Items[0].Label != cps[0].Label || cpPage.NextCursor == "" {
			t.Fatalf("first page of 1: %s", res.body)
		}
		p2, err := e.c.ListCheckpoints(ctx, "flow-1", cpPage.NextCursor, 1)
		if err != nil || len(p2.Items) != 1 || p2.Items[0].Label != cps[1].Label {
			t.Fatalf("second page: %+v %v", p2, err)
		}
		if p3, err := e.c.ListCheckpoints(ctx, "flow-1", p2.NextCursor, 1); p2.NextCursor != "" && (err != nil || len(p3.Items) != 0 || p3.NextCursor != "") {
			t.Fatalf("third page: %+v %v", p3, err)
		}
		expectProblem(t, e.do(t, "GET", "/v1/runs/flow-1/checkpoints?cursor=%21%21", nil, nil), http.StatusUnprocessableEntity, "invalid-request")
		expectProblem(t, e.do(t, "GET", "/v1/runs/flow-1/checkpoints?limit=5000", nil, nil), http.StatusUnprocessableEntity, "invalid-request")

		// Fork from a checkpoint and from a revision: the state is the one of then.
		res = e.do(t, "POST", "/v1/runs/flow-1/fork", map[string]any{"checkpoint": "after-refund", "run_id": "flow-1-fork"}, nil)
		if res.status != http.StatusCreated {
			t.Fatalf("fork: %d %s", res.status, res.body)
		}
		schemas.validate(t, "Run", res.body)
		var fork run.Run
		_ = json.Unmarshal(res.body, &fork)
		if fork.RunID != "flow-1-fork" || fork.ParentRunID != "flow-1" || fork.ParentRevision != 3 ||
			fork.StateRevision != 3 || !jsonEqual(fork.State, []byte(states[3])) || fork.NextStep != "next-refund" {
			t.Fatalf("fork from checkpoint: %+v", fork)
		}
		fork2, err := e.c.Fork(ctx, "flow-1", run.ForkRequest{FromRevision: 1})
		if err != nil || fork2.StateRevision != 1 || !jsonEqual(fork2.State, []byte(states[1])) || fork2.LeaseOwner != "" {
			t.Fatalf("fork from revision 1: %+v %v", fork2, err)
		}
		forkEvents, err := e.c.Events(ctx, "flow-1-fork", 0, 0)
		if err != nil || len(forkEvents.Items) != 3 {
			t.Fatalf("fork events: %+v %v", forkEvents, err)
		}
		_, err = e.c.Fork(ctx, "flow-1", run.ForkRequest{Checkpoint: "nope"})
		if !errors.Is(err, run.ErrCheckpointNotFound) {
			t.Fatalf("fork from a missing checkpoint: %v", err)
		}

		// Release: 204, then the old lease is gone.
		if err := e.c.ReleaseLease(ctx, "flow-1", l); err != nil {
			t.Fatalf("release: %v", err)
		}
		if err := e.c.ReleaseLease(ctx, "flow-1", l); !errors.Is(err, run.ErrLeaseLost) {
			t.Fatalf("second release: %v", err)
		}

		// List with a cursor: 3 runs so far plus 4 more, pages of 2.
		for i := range 4 {
			if _, _, err := e.c.CreateRun(ctx, run.CreateRequest{RunID: fmt.Sprintf("list-%d", i), WorkflowName: "other"}); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]int{}
		cursor, pages := "", 0
		for {
			path := "/v1/runs?limit=2"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			res = e.do(t, "GET", path, nil, nil)
			if res.status != 200 {
				t.Fatalf("list: %d %s", res.status, res.body)
			}
			schemas.validate(t, "RunList", res.body)
			var page client.Page[run.Run]
			_ = json.Unmarshal(res.body, &page)
			pages++
			if len(page.Items) > 2 {
				t.Fatalf("page of %d items with limit 2", len(page.Items))
			}
			for _, r := range page.Items {
				seen[r.RunID]++
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		if len(seen) != 7 || pages != 4 {
			t.Fatalf("list saw %d runs in %d pages: %v", len(seen), pages, seen)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("run %s listed %d times", id, n)
			}
		}
		var n int
		for r, err := range e.c.Runs(ctx, client.ListRunsOptions{Workflow: "other", Limit: 3}) {
			if err != nil || r.WorkflowName != "other" {
				t.Fatalf("filtered list: %+v %v", r, err)
			}
			n++
		}
		if n != 4 {
			t.Fatalf("workflow filter: %d runs, want 4", n)
		}
		page, err := e.c.ListRuns(ctx, client.ListRunsOptions{Status: run.StatusCompleted})
		if err != nil || len(page.Items) != 0 || page.Items == nil {
			t.Fatalf("status filter: %+v %v", page, err)
		}
	})
}

// TestCommitStaleRevision: a commit with a stale revision is 409
// revision-conflict and changes nothing.
func TestCommitStaleRevision(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		ctx := context.Background()
		r, l := e.leasedRun(t, "stale-rev")
		if _, err := e.c.Commit(ctx, r.RunID, commitReq(1, l, "step-a", `{"a":1}`)); err != nil {
			t.Fatalf("first commit: %v", err)
		}
		before := e.snapshot(t, r.RunID)
		res := e.do(t, "POST", "/v1/runs/stale-rev/commit", commitReq(1, l, "step-b", `{"b":2}`), nil)
		p := expectProblem(t, res, http.StatusConflict, "revision-conflict")
		if p.Instance != "/v1/runs/stale-rev/commit" || p.RequestID == "" || p.RequestID != res.header.Get("X-Request-Id") {
			t.Fatalf("problem instance/request id: %+v (header %q)", p, res.header.Get("X-Request-Id"))
		}
		before.assertSame(t, e.snapshot(t, r.RunID))

		// The client surfaces the same as a typed error matching the sentinel.
		_, err := e.c.Commit(ctx, r.RunID, commitReq(1, l, "step-b", `{"b":2}`))
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Kind() != problem.RevisionConflict || !errors.Is(err, run.ErrRevisionConflict) || errors.Is(err, run.ErrLeaseLost) {
			t.Fatalf("client error: %#v", err)
		}
		before.assertSame(t, e.snapshot(t, r.RunID))
	})
}

// TestCommitOldEpoch: after the lease expired and another owner took it,
// the old owner's commit is 409 lease-lost (distinct from revision-conflict)
// and changes nothing, even with the right revision.
func TestCommitOldEpoch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		ctx := context.Background()
		r, _, err := e.c.CreateRun(ctx, run.CreateRequest{RunID: "old-epoch", WorkflowName: "refund"})
		if err != nil {
			t.Fatal(err)
		}
		// A lease long enough that the next request comes within it on a
		// loaded machine (100 ms was not, under -race in CI).
		const ttl = time.Second
		old, err := e.c.AcquireLease(ctx, r.RunID, "worker-old", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.AcquireLease(ctx, r.RunID, "worker-new", time.Minute); !errors.Is(err, run.ErrLeaseHeld) || client.StatusOf(err) != 409 {
			t.Fatalf("lease while held: %v", err)
		}
		time.Sleep(time.Until(old.ExpiresAt) + 50*time.Millisecond) // real lease expiry
		cur, err := e.c.AcquireLease(ctx, r.RunID, "worker-new", time.Minute)
		if err != nil || cur.Epoch != old.Epoch+1 {
			t.Fatalf("takeover: %+v %v", cur, err)
		}
		before := e.snapshot(t, r.RunID)
		res := e.do(t, "POST", "/v1/runs/old-epoch/commit", commitReq(1, old, "late", `{"late":true}`), nil)
		expectProblem(t, res, http.StatusConflict, "lease-lost")
		before.assertSame(t, e.snapshot(t, r.RunID))
		// Same owner name with the old epoch is fenced off too.
		stale := cur
		stale.Epoch = old.Epoch
		res = e.do(t, "POST", "/v1/runs/old-epoch/commit", commitReq(1, stale, "late", `{"late":true}`), nil)
		expectProblem(t, res, http.StatusConflict, "lease-lost")
		if _, err := e.c.RenewLease(ctx, r.RunID, old, time.Minute); !errors.Is(err, run.ErrLeaseLost) {
			t.Fatalf("renew of an old epoch: %v", err)
		}
		before.assertSame(t, e.snapshot(t, r.RunID))
		// The current owner commits fine.
		if _, err := e.c.Commit(ctx, r.RunID, commitReq(1, cur, "on-time", `{"ok":true}`)); err != nil {
			t.Fatalf("current owner commit: %v", err)
		}
	})
}

// TestConcurrentCommitters: 50 committers race one revision over HTTP;
// exactly one wins, the rest get 409 revision-conflict, and the log has
// exactly one new event.
func TestConcurrentCommitters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		r, l := e.leasedRun(t, "race")
		const n = 50
		var (
			wg       sync.WaitGroup
			start    = make(chan struct{})
			statuses = make([]int, n)
			kinds    = make([]string, n)
			errs     = make([]error, n)
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := e.send("POST", "/v1/runs/race/commit", commitReq(1, l, fmt.Sprintf("step-%d", i), fmt.Sprintf(`{"winner":%d}`, i)), nil)
				statuses[i], errs[i] = res.status, err
				if res.status != 200 {
					var p struct {
						Type string `json:"type"`
					}
					_ = json.Unmarshal(res.body, &p)
					kinds[i] = p.Type[strings.LastIndexByte(p.Type, '/')+1:]
				}
			}()
		}
		close(start)
		wg.Wait()
		wins, winner := 0, -1
		for i, s := range statuses {
			switch {
			case errs[i] != nil:
				t.Fatalf("committer %d: %v", i, errs[i])
			case s == 200:
				wins++
				winner = i
			case s == http.StatusConflict && kinds[i] == "revision-conflict":
			default:
				t.Fatalf("committer %d: status %d kind %q", i, s, kinds[i])
			}
		}
		if wins != 1 {
			t.Fatalf("%d commits won, want exactly 1", wins)
		}
		after := e.snapshot(t, r.RunID)
		if after.run.StateRevision != 2 || len(after.events) != 2 ||
			!jsonEqual(after.run.State, []byte(fmt.Sprintf(`{"winner":%d}`, winner))) ||
			after.events[1].EventType != fmt.Sprintf("step-%d", winner) {
			t.Fatalf("after the race: run %+v, %d events", after.run, len(after.events))
		}
	})
}

// TestForkIdempotency: a fork retried under its Idempotency-Key answers the
// run the first one made instead of making a second; the key sent with
// another revision is refused, and a key never turns a clash into a fork.
func TestForkIdempotency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		ctx := context.Background()
		_, l := e.leasedRun(t, "flow-1")
		if _, err := e.c.Commit(ctx, "flow-1", run.CommitRequest{ExpectedRevision: 1, Lease: l, Event: run.EventInput{EventType: "step"}, State: json.RawMessage(`{"n":1}`)}); err != nil {
			t.Fatal(err)
		}

		// A fork retried under its Idempotency-Key is the same run, not a
		// second one; the key with another revision is refused.
		key := map[string]string{"Idempotency-Key": "fork-k"}
		first := e.do(t, "POST", "/v1/runs/flow-1/fork", map[string]any{"from_revision": 2}, key)
		again := e.do(t, "POST", "/v1/runs/flow-1/fork", map[string]any{"from_revision": 2}, key)
		var f1, f2 run.Run
		_ = json.Unmarshal(first.body, &f1)
		_ = json.Unmarshal(again.body, &f2)
		if first.status != http.StatusCreated || again.status != http.StatusCreated || f1.RunID == "" || f1.RunID != f2.RunID ||
			again.header.Get("Idempotent-Replayed") != "true" || first.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("keyed fork twice: %d %s / %d %s", first.status, first.body, again.status, again.body)
		}
		if res := e.do(t, "POST", "/v1/runs/flow-1/fork", map[string]any{"from_revision": 1}, key); res.status != http.StatusUnprocessableEntity || !strings.HasSuffix(problemType(t, res.body), "/idempotency-mismatch") {
			t.Fatalf("keyed fork, other revision: %d %s", res.status, res.body)
		}
		named, err := e.c.Fork(ctx, "flow-1", run.ForkRequest{FromRevision: 2, RunID: "flow-1-named"}, client.IdempotencyKey("fork-n"))
		named2, err2 := e.c.Fork(ctx, "flow-1", run.ForkRequest{FromRevision: 2, RunID: "flow-1-named"}, client.IdempotencyKey("fork-n"))
		if err != nil || err2 != nil || named.RunID != named2.RunID || named2.ParentRevision != 2 {
			t.Fatalf("keyed fork with a run id: %+v %v / %+v %v", named, err, named2, err2)
		}
		if _, err := e.c.Fork(ctx, "flow-1", run.ForkRequest{FromRevision: 2, RunID: "flow-1-named"}); !errors.Is(err, run.ErrAlreadyExists) {
			t.Fatalf("unkeyed fork onto an existing id: %v", err)
		}
		all, err := e.c.ListRuns(ctx, client.ListRunsOptions{Limit: 100})
		if err != nil {
			t.Fatalf("list runs: %v", err)
		}
		forks := 0
		for _, r := range all.Items {
			if r.ParentRunID == "flow-1" && r.ParentRevision == 2 {
				forks++
			}
		}
		if forks != 2 {
			t.Fatalf("%d forks of flow-1 at revision 2, want 2 (one per key)", forks)
		}
	})
}

// TestIDsUpTo256Bytes: an id the API takes in a path (256 bytes) is one a
// create takes in its body too, for runs and sessions alike, and one byte
// more is refused by both.
func TestIDsUpTo256Bytes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		id := strings.Repeat("r", 256)
		if res := e.do(t, "POST", "/v1/runs", map[string]any{"run_id": id, "workflow_name": "w", "workflow_version": "1"}, nil); res.status != http.StatusCreated {
			t.Fatalf("create a run of a 256-byte id: %d %s", res.status, res.body)
		}
		if res := e.do(t, "GET", "/v1/runs/"+id, nil, nil); res.status != http.StatusOK {
			t.Fatalf("get it: %d %s", res.status, res.body)
		}
		if res := e.do(t, "POST", "/v1/runs", map[string]any{"run_id": id + "r", "workflow_name": "w", "workflow_version": "1"}, nil); res.status != http.StatusUnprocessableEntity {
			t.Fatalf("create a run of a 257-byte id: %d %s", res.status, res.body)
		}
		sid := strings.Repeat("s", 256)
		if res := e.do(t, "PUT", "/v1/sessions/"+sid, map[string]any{"user_id": strings.Repeat("u", 256), "state": map[string]any{}}, nil); res.status != http.StatusCreated {
			t.Fatalf("create a session of a 256-byte id: %d %s", res.status, res.body)
		}
	})
}

// TestSchemaVersionNeverGoesBack: a commit may declare a newer state
// schema version, never an older one (the migrations the run went through
// would be applied again at its next resume); the refusal changes nothing.
func TestSchemaVersionNeverGoesBack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		ctx := context.Background()
		_, l := e.leasedRun(t, "v")
		commit := func(rev int64, version int) (client.CommitResult, error) {
			return e.c.Commit(ctx, "v", run.CommitRequest{ExpectedRevision: rev, Lease: l, Event: run.EventInput{EventType: "step"},
				State: json.RawMessage(`{"n":1}`), StateSchemaVersion: version})
		}
		if res, err := commit(1, 3); err != nil || res.Run.StateSchemaVersion != 3 {
			t.Fatalf("commit at version 3: %+v %v", res.Run, err)
		}
		if _, err := commit(2, 2); client.KindOf(err) != problem.InvalidRequest || client.StatusOf(err) != http.StatusUnprocessableEntity {
			t.Fatalf("commit back to version 2: %v, want 422", err)
		}
		if r, err := e.c.GetRun(ctx, "v"); err != nil || r.StateRevision != 2 || r.StateSchemaVersion != 3 {
			t.Fatalf("after the refusal: %+v %v", r, err)
		}
		if res, err := commit(2, 0); err != nil || res.Run.StateSchemaVersion != 3 {
			t.Fatalf("commit declaring no version: %+v %v", res.Run, err)
		}
	})
}

// TestCheckpointIdempotency: a checkpoint retried under its Idempotency-Key
// answers the label it made (201, Idempotent-Replayed); the label at
// another revision, or asked again without a key, is still 409.
func TestCheckpointIdempotency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		_, l := e.leasedRun(t, "cp-run")
		if _, err := e.c.Commit(context.Background(), "cp-run", run.CommitRequest{ExpectedRevision: 1, Lease: l, Event: run.EventInput{EventType: "step"}, State: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		key := map[string]string{"Idempotency-Key": "cp-k"}
		first := e.do(t, "POST", "/v1/runs/cp-run/checkpoints", map[string]any{"label": "cpx"}, key)
		again := e.do(t, "POST", "/v1/runs/cp-run/checkpoints", map[string]any{"label": "cpx"}, key)
		if first.status != http.StatusCreated || again.status != http.StatusCreated || again.header.Get("Idempotent-Replayed") != "true" || !jsonEqual(first.body, again.body) {
			t.Fatalf("keyed checkpoint twice: %d %s / %d %s", first.status, first.body, again.status, again.body)
		}
		expectProblem(t, e.do(t, "POST", "/v1/runs/cp-run/checkpoints", map[string]any{"label": "cpx"}, nil), http.StatusConflict, "checkpoint-exists")
		expectProblem(t, e.do(t, "POST", "/v1/runs/cp-run/checkpoints", map[string]any{"label": "cpx", "revision": 1}, key), http.StatusConflict, "checkpoint-exists")
	})
}
