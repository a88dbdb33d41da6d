package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/run"
)

// The Go-computed delta and chain (commitFast) must be exactly what the SQL
// path computes: two stores on one schema, one without the cache, commit
// the same history to two runs, whose chains (which name no run) and
// deltas must then agree at every step; the log must verify; a stale cache
// entry must cost only a fallback.
func TestCommitFastMatchesSQL(t *testing.T) {
	conn := testenv.PostgresURL(t)
	ctx := ctxT(t)
	fast, err := Open(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fast.Close)
	slow, err := Open(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slow.Close)
	if fast.commits == nil {
		t.Fatal("the test database is UTF8, yet the commit cache is off")
	}
	slow.commits = nil

	states := []string{
		`{"n": 1, "a": [1, 2], "big": "x"}`,
		`{"big":"x","a":[1,2],"n":2}`,                      // same members, other spelling
		`{"n":3,"a":[1,2],"big":"x","new":{"z":1,"y":-0}}`, // added, -0
		`{"n":4,"big":"x","new":{"y":0,"z":1}}`,            // removed a; new unchanged in jsonb
		`{"n":5,"big":"x\u00e9\n","b":1,"B":2,"é":true,"a":null,"a":"dup"}`,
		`{"n":6}`,           // many removed
		`{"n":7,"e":1.5e3}`, // exponent: SQL path
		`{"n":8,"e":1500}`,  // back to fast after a fallback
		`{}`,
		`{"k":"\ud83d\ude00","n":10}`,
	}
	type side struct {
		db *DB
		id string
		r  run.Run
		l  run.Lease
	}
	sides := []*side{{db: fast, id: "fast"}, {db: slow, id: "slow"}}
	for _, s := range sides {
		s.r = newRun(t, s.db, "t1", s.id)
		if s.l, err = s.db.AcquireLease(ctx, "t1", s.id, "w", 0, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(i int, state, payload string) {
		t.Helper()
		var evs [2]run.Event
		for j, s := range sides {
			c := commitReq(s.r.StateRevision, s.l, i)
			c.State, c.Event.Payload = json.RawMessage(state), json.RawMessage(payload)
			c.Spend = run.SpendOf(c.Event.Payload) // as the Service does
			if i%7 == 3 {
				c.Status, c.StateSchemaVersion = run.StatusSuspended, 2
			}
			r, ev, err := s.db.Commit(ctx, "t1", s.id, c)
			if err != nil {
				t.Fatalf("%s commit %d: %v", s.id, i, err)
			}
			s.r, evs[j] = r, ev
		}
		if !maps.Equal(sides[0].r.Spent, sides[1].r.Spent) {
			t.Fatalf("commit %d: fast spent %v, SQL spent %v", i, sides[0].r.Spent, sides[1].r.Spent)
		}
		if sides[0].r.Chain != sides[1].r.Chain || sides[0].r.Status != sides[1].r.Status {
			t.Fatalf("commit %d (%s): fast chain %s status %s, SQL chain %s status %s", i, state,
				sides[0].r.Chain, sides[0].r.Status, sides[1].r.Chain, sides[1].r.Status)
		}
		if evs[0].Snapshot != evs[1].Snapshot || !jsonEqual(t, orEmptyObject(evs[0].Change), orEmptyObject(evs[1].Change)) {
			t.Fatalf("commit %d: fast change %s, SQL change %s", i, evs[0].Change, evs[1].Change)
		}
	}
	for i := 1; i <= 2*run.SnapshotEvery+3; i++ {
		commit(i, states[i%len(states)], fmt.Sprintf(`{"i": %d, "spend": {"tokens": 2}, "s": "\u00e9", "z": [1.0]}`, i))
	}
	// A payload with an exponent and one with duplicate keys.
	commit(100, states[0], `{"x": 1e2}`)
	commit(101, states[1], `{"x": 1, "x": 2}`)
	made := fast.fastCommits.Load()
	if made < int64(run.SnapshotEvery) { // all but the exponent states and the commit after each
		t.Fatalf("only %d fast commits", made)
	}

	// A stale entry (say the run was deleted and made again under its id)
	// is refused by the guard and the commit still lands, chain intact.
	e := fast.commits.get("t1", "fast", sides[0].r.StateRevision)
	if e == nil {
		t.Fatal("no cache entry after a fast commit")
	}
	fast.commits.put("t1", "fast", &commitEntry{rev: e.rev, chain: "stale", status: e.status, version: e.version, members: e.members})
	commit(200, states[2], `{}`)
	if fast.fastCommits.Load() != made {
		t.Fatal("a stale entry made a fast commit")
	}
	commit(201, states[3], `{}`)
	if fast.fastCommits.Load() != made+1 {
		t.Fatal("no fast commit after the fallback")
	}
	// An entry whose spend totals are not the row's is refused the same way
	// when the commit adds spend, and the totals stay exact.
	e = fast.commits.get("t1", "fast", sides[0].r.StateRevision)
	if e == nil || e.spent["tokens"] == 0 {
		t.Fatalf("cache entry after a fast commit: %+v", e)
	}
	wrong := maps.Clone(e.spent)
	wrong["tokens"]++
	fast.commits.put("t1", "fast", &commitEntry{rev: e.rev, chain: e.chain, status: e.status, version: e.version, members: e.members, spent: wrong})
	commit(202, states[4], `{"spend": {"tokens": 5, "new": 1}}`)
	if fast.fastCommits.Load() != made+1 {
		t.Fatal("an entry with wrong spend totals made a fast commit")
	}
	commit(203, states[5], `{"spend": {"tokens": 1}}`)
	if fast.fastCommits.Load() != made+2 {
		t.Fatal("no fast commit with spend after the fallback")
	}
	stored, err := fast.GetRun(ctx, "t1", "fast")
	if err != nil || !maps.Equal(stored.Spent, sides[0].r.Spent) || stored.Spent["new"] != 1 {
		t.Fatalf("stored spent %v, committed %v (%v)", stored.Spent, sides[0].r.Spent, err)
	}
	for _, s := range sides {
		evs, err := s.db.ListEvents(ctx, "t1", s.id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		head, last, err := run.CheckChain("", 0, evs)
		if err != nil || last != s.r.StateRevision || head != s.r.Chain {
			t.Fatalf("%s: chain over the log: %v, through %d (run at %d)", s.id, err, last, s.r.StateRevision)
		}
	}
	// A refused commit through the fast path still names its check.
	c := commitReq(sides[0].r.StateRevision-1, sides[0].l, 300)
	if _, _, err := fast.Commit(ctx, "t1", "fast", c); !errors.Is(err, run.ErrRevisionConflict) {
		t.Fatalf("a commit at an old revision: %v", err)
	}
	// A finished run leaves the cache.
	r := sides[0].r
	for i, st := range []run.Status{run.StatusRunning, run.StatusCompleted} {
		c = commitReq(r.StateRevision, sides[0].l, 301+i)
		c.Status, c.FromStatuses = st, run.AllowedFrom(st)
		if r, _, err = fast.Commit(ctx, "t1", "fast", c); err != nil {
			t.Fatalf("commit to %s: %v", st, err)
		}
	}
	if err != nil || r.Status != run.StatusCompleted {
		t.Fatalf("complete: %+v %v", r, err)
	}
	if fast.commits.get("t1", "fast", r.StateRevision) != nil {
		t.Fatal("a completed run stays in the commit cache")
	}
}

// A delta that changes large members in place (jsonbDelta through
// run.DiffMember) must be the very text PostgreSQL returns for it, since
// the chain hashes that text, and must rebuild the new state.
func TestJSONBDeltaInPlaceIsJSONBText(t *testing.T) {
	conn := openOracle(t)
	ctx := ctxT(t)
	rec := func(i int, extra string) string {
		return fmt.Sprintf(`{"id": %d, "text": "é<&>\"\n\u0001 %s", "tags": ["a", "bb"]%s}`, i, strings.Repeat("w", 40), extra)
	}
	list := func(n int, edit func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = rec(i, "")
			if edit != nil {
				if s := edit(i); s != "" {
					parts[i] = s
				}
			}
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	obj := func(z string) string {
		return `{"b": "` + strings.Repeat("b", 300) + `", "aa": ` + list(6, nil) + `, "Z日": ` + z + `, "ccc": 1}`
	}
	pairs := [][2]string{
		{`{"items": ` + list(20, nil) + `, "n": 1}`, `{"items": ` + list(20, func(i int) string {
			if i == 7 {
				return rec(7, `, "done": true`)
			}
			return ""
		}) + `, "n": 2}`},
		{`{"items": ` + list(20, nil) + `}`, `{"items": ` + list(23, nil) + `}`},                                    // appended
		{`{"items": ` + list(20, nil) + `}`, `{"items": ` + list(19, nil) + `, "x": null}`},                         // dropped
		{`{"o": ` + obj(`[1, 2]`) + `}`, `{"o": ` + obj(`{"deep": `+list(4, nil)+`}`) + `}`},                        // nested object
		{`{"o": ` + obj(`[1, 2]`) + `, "k": 1}`, `{"o": ` + obj(`[1, 3]`) + `, "new": [1]}`},                        // small edit deep down
		{`{"o": ` + obj(`[1, 2]`) + `}`, `{"o": ` + strings.Replace(obj(`[1, 2]`), `"ccc": 1`, `"dd": 2`, 1) + `}`}, // member renamed
	}
	for i, p := range pairs {
		_, prev, ok1 := jsonbObject([]byte(p[0]))
		_, next, ok2 := jsonbObject([]byte(p[1]))
		if !ok1 || !ok2 {
			t.Fatalf("pair %d: not jsonb-reproducible", i)
		}
		delta := jsonbDelta(prev, next)
		if !bytes.Contains(delta, []byte(`"n": {`)) {
			t.Fatalf("pair %d: no change in place: %s", i, delta)
		}
		var back string
		if err := conn.QueryRow(ctx, `SELECT $1::jsonb::text`, string(delta)).Scan(&back); err != nil {
			t.Fatal(err)
		}
		if back != string(delta) {
			t.Fatalf("pair %d: Go wrote\n%s\nPostgreSQL returns\n%s", i, delta, back)
		}
		prevText, _ := jsonbText([]byte(p[0]))
		got, err := run.ApplyDeltas(prevText, []json.RawMessage{delta})
		if err != nil || !jsonEqual(t, got, json.RawMessage(p[1])) {
			t.Fatalf("pair %d: rebuilt %s (%v)", i, got, err)
		}
	}
}

// Two instances committing to one run in turn (a load balancer in front)
// never find the run in their cache, yet a large state edited inside an
// array still gets an in-place delta: the store reads the run first. The
// log verifies and every revision reads back exactly.
func TestCommitAcrossInstancesChangesInPlace(t *testing.T) {
	conn := testenv.PostgresURL(t)
	ctx := ctxT(t)
	var dbs [2]*DB
	for i := range dbs {
		db, err := Open(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		dbs[i] = db
	}
	r := newRun(t, dbs[0], "t1", "across")
	l, err := dbs[0].AcquireLease(ctx, "t1", "across", "w", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]string, 100)
	for i := range items {
		items[i] = fmt.Sprintf("%q", strings.Repeat(fmt.Sprintf("item %d é<&> ", i), 16))
	}
	states := map[int64]string{}
	for i := 1; i <= run.SnapshotEvery+8; i++ {
		items[i%len(items)] = fmt.Sprintf(`{"edited": %d}`, i)
		state := fmt.Sprintf(`{"n": %d, "items": [%s]}`, i, strings.Join(items, ", "))
		c := commitReq(r.StateRevision, l, i)
		c.State = json.RawMessage(state)
		if i%3 == 0 {
			c.Event.Payload = json.RawMessage(`{"spend": {"tokens": 3}}`)
			c.Spend = run.SpendOf(c.Event.Payload)
		}
		if r, _, err = dbs[i%2].Commit(ctx, "t1", "across", c); err != nil {
			t.Fatalf("commit %d on instance %d: %v", i, i%2, err)
		}
		states[r.StateRevision] = state
	}
	if r.Spent["tokens"] != 3*int64((run.SnapshotEvery+8)/3) {
		t.Fatalf("spend totals %v", r.Spent)
	}
	evs, err := dbs[0].ListEvents(ctx, "t1", "across", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if head, last, err := run.CheckChain("", 0, evs); err != nil || last != r.StateRevision || head != r.Chain {
		t.Fatalf("chain over the log: %v, through %d (run at %d)", err, last, r.StateRevision)
	}
	for _, ev := range evs[2:] { // seq 2 adds the array
		if ev.Snapshot {
			continue
		}
		if len(ev.Change) > 600 || !bytes.Contains(ev.Change, []byte(`"n": {"items"`)) {
			t.Fatalf("event %d keeps %d bytes, not the element changed in place: %.200s", ev.Seq, len(ev.Change), ev.Change)
		}
	}
	for seq, want := range states {
		ev, err := dbs[1].GetEvent(ctx, "t1", "across", seq)
		if err != nil || !jsonEqual(t, ev.State, json.RawMessage(want)) {
			t.Fatalf("state at %d reads back as %.200s (%v)", seq, ev.State, err)
		}
	}
}
