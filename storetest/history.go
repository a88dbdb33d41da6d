package storetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mementohq/memento/run"
)

// testCompactHistory commits a long run whose steps change, add and remove
// a few small members of a state that also carries a large one, and checks
// that every revision reads back exactly, that the history weighs far less
// than a full copy per event, that the hash chain and the spend totals hold,
// and that a fork past several snapshots reads back exactly too.
func testCompactHistory(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	const steps = 3*run.SnapshotEvery + 7
	big := strings.Repeat("lorem ipsum ", 700) // ~8 KB that never changes
	rng := rand.New(rand.NewPCG(7, 11))
	members := map[string]string{"big": fmt.Sprintf("%q", big), "n": "0", "nested": `{"a":[1,2,{"b":null}]}`}
	// Large members a step changes in place: an array of records (one
	// replaced, one edited inside, some appended or dropped) and an object
	// whose keys differ in length, case and script (jsonb orders keys by
	// length first).
	list := make([]string, 24)
	for j := range list {
		list[j] = fmt.Sprintf(`{"id":%d,"text":%q}`, j, strings.Repeat("é<&>x", 8))
	}
	doc := map[string]string{"b": `"` + strings.Repeat("b", 200) + `"`, "aa": `[1,2,3]`, "Z": `{"deep":[` + strings.Repeat(`"y",`, 60) + `"y"]}`, "é日": `"` + strings.Repeat("k", 300) + `"`}
	encodeNested := func() {
		members["list"] = "[" + strings.Join(list, ",") + "]"
		var b strings.Builder
		b.WriteString("{")
		for k, v := range doc {
			if b.Len() > 1 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q:%s", k, v)
		}
		b.WriteString("}")
		members["doc"] = b.String()
	}
	encodeNested()
	encode := func() string {
		var b strings.Builder
		b.WriteString("{")
		first := true
		for k, v := range members {
			if !first {
				b.WriteString(",")
			}
			first = false
			fmt.Fprintf(&b, "%q:%s", k, v)
		}
		b.WriteString("}")
		return b.String()
	}
	r := f.create("history", encode())
	l := f.lease(r.RunID, "w", longTTL)
	want := map[int64]run.Run{1: f.get(r.RunID)}
	wantSpent := map[string]int64{}
	for i := 1; i <= steps; i++ {
		members["n"] = fmt.Sprint(i)
		switch rng.IntN(5) {
		case 0:
			members[fmt.Sprintf("k%d", rng.IntN(6))] = fmt.Sprintf(`{"at":%d,"x":1.50}`, i)
		case 1:
			delete(members, fmt.Sprintf("k%d", rng.IntN(6)))
		case 2:
			members["nested"] = fmt.Sprintf(`{"a":[%d,"<&>",null]}`, i)
		case 3:
			members["none"] = "null"
		}
		list[i%len(list)] = fmt.Sprintf(`{"id":%d,"text":%q,"step":%d}`, i%len(list), strings.Repeat("é<&>x", 8), i)
		switch i % 9 {
		case 2:
			list = append(list, fmt.Sprintf(`{"id":%d}`, len(list)), `"<&>"`)
		case 5:
			list = list[:len(list)-1]
		case 7:
			doc[fmt.Sprintf("k%d", i%4)] = fmt.Sprint(i)
		case 8:
			doc["Z"] = `{"deep":[` + strings.Repeat(`"y",`, 60) + fmt.Sprintf(`%d]}`, i)
		}
		encodeNested()
		req := f.commitReq(r, l, fmt.Sprintf("s%d-é日", i), encode(), "") // multibyte text in the hashed fields
		if i%3 == 0 {
			req.Event.Payload = json.RawMessage(fmt.Sprintf(`{"spend":{"tokens":%d,"steps":1,"note":"x","ratio":0.5}}`, i))
			wantSpent["tokens"] += int64(i)
			wantSpent["steps"]++
		}
		nr, ev, err := f.svc.Commit(ctx, f.tenant, r.RunID, req)
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		if ev.Chain == "" || ev.Chain != nr.Chain {
			t.Fatalf("commit %d: event chain %q, run chain %q", i, ev.Chain, nr.Chain)
		}
		r = nr
		want[r.StateRevision] = f.get(r.RunID)
	}

	// Every revision reads back exactly as the run was right after it.
	for seq := int64(1); seq <= r.StateRevision; seq++ {
		ev := f.event(r.RunID, seq)
		w := want[seq]
		if !jsonEqual(ev.State, w.State) || run.Digest(ev.State) != run.Digest(w.State) {
			t.Fatalf("state at seq %d:\n got %s\nwant %s", seq, ev.State, w.State)
		}
		if ev.NextStep != w.NextStep || ev.Status != w.Status || ev.StateSchemaVersion != w.StateSchemaVersion {
			t.Fatalf("event %d: next %q status %q v%d, want %q %q v%d", seq, ev.NextStep, ev.Status, ev.StateSchemaVersion, w.NextStep, w.Status, w.StateSchemaVersion)
		}
	}

	// The chain runs through the log as ListEvents returns it, and the
	// history weighs far less than a full state per event.
	evs := f.events(r.RunID)
	head, last, err := run.CheckChain("", 0, evs)
	if err != nil || last != r.StateRevision || head != r.Chain {
		t.Fatalf("chain over the log: %v, through %d (run at %d), head %q, run chain %q", err, last, r.StateRevision, head, r.Chain)
	}
	var changeBytes, deltaBytes, deltas int
	for _, ev := range evs {
		changeBytes += len(ev.Change)
		if !ev.Snapshot {
			deltaBytes += len(ev.Change)
			deltas++
		}
	}
	if full := len(evs) * len(big); changeBytes*8 > full {
		t.Fatalf("history keeps %d bytes of changes for %d events of an %d-byte state: not compact", changeBytes, len(evs), len(big))
	}
	// A step that edits inside the large list and object stores that edit,
	// not the members (about 1.3 KB and 1 KB): on average well under 1 KB.
	if deltaBytes > deltas*1024 {
		t.Fatalf("%d deltas keep %d bytes: the large members are stored whole rather than changed in place", deltas, deltaBytes)
	}
	if got := f.get(r.RunID).Spent; fmt.Sprint(got) != fmt.Sprint(wantSpent) {
		t.Fatalf("spend totals %v, want %v", got, wantSpent)
	}

	// VerifiedSeq moves only when a commit says so.
	if r.VerifiedSeq != 0 {
		t.Fatalf("verified seq %d before any verification", r.VerifiedSeq)
	}
	req := f.commitReq(r, l, "verified", string(want[r.StateRevision].State), "")
	req.VerifiedSeq = r.StateRevision
	if r, _, err = f.svc.Commit(ctx, f.tenant, r.RunID, req); err != nil || r.VerifiedSeq != r.StateRevision-1 || f.get(r.RunID).VerifiedSeq != r.StateRevision-1 {
		t.Fatalf("commit with a verified seq: %v, verified %d at revision %d", err, r.VerifiedSeq, r.StateRevision)
	}
	want[r.StateRevision] = f.get(r.RunID)
	r = f.commit(r, l, "after", string(want[r.StateRevision].State), "")
	if got := f.get(r.RunID).VerifiedSeq; got != r.StateRevision-2 {
		t.Fatalf("verified seq %d after a plain commit, want it kept at %d", got, r.StateRevision-2)
	}

	// A fork past several snapshots, at a delta, reads back exactly and
	// goes on from there; the source is untouched.
	at := int64(2*run.SnapshotEvery + 5)
	srcBefore := f.snap(r.RunID)
	fork, err := f.svc.Fork(ctx, f.tenant, r.RunID, run.ForkRequest{FromRevision: at, RunID: newID("fork")})
	if err != nil {
		t.Fatalf("fork at %d: %v", at, err)
	}
	if !jsonEqual(fork.State, want[at].State) || fork.StateRevision != at || fork.Chain != srcBefore.events[at-1].Chain || fork.VerifiedSeq != 0 {
		t.Fatalf("fork at %d: revision %d chain %q verified %d state %s", at, fork.StateRevision, fork.Chain, fork.VerifiedSeq, fork.State)
	}
	forkSpent := map[string]int64{}
	for i := int64(1); i < at; i++ {
		if i%3 == 0 {
			forkSpent["tokens"] += i
			forkSpent["steps"]++
		}
	}
	if fmt.Sprint(f.get(fork.RunID).Spent) != fmt.Sprint(forkSpent) {
		t.Fatalf("fork's spend totals %v, want %v", f.get(fork.RunID).Spent, forkSpent)
	}
	for seq := int64(1); seq <= at; seq++ {
		if d := diffEvent(srcBefore.events[seq-1], f.event(fork.RunID, seq), true); d != "" {
			t.Fatalf("fork event %d: %s", seq, d)
		}
	}
	lf := f.lease(fork.RunID, "forker", longTTL)
	members = map[string]string{"forked": "true", "big": fmt.Sprintf("%q", big)}
	nf := f.commit(fork, lf, "alt", encode(), "")
	if ev := f.event(fork.RunID, at+1); !jsonEqual(ev.State, nf.State) {
		t.Fatalf("fork's own commit reads back as %s, want %s", ev.State, nf.State)
	}
	fevs := f.events(fork.RunID)
	if _, last, err := run.CheckChain("", 0, fevs); err != nil || last != at+1 {
		t.Fatalf("fork's chain: %v through %d", err, last)
	}
	f.assertUnchanged(srcBefore, "forking and committing to the fork")
}
