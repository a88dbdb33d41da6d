// Package run holds durable runs: the record from which an agent workflow
// continues at the exact step after a crash. It defines runs, events, leases,
// checkpoints and schema migrations, the Store interface backends implement,
// and the Service that enforces the rules (revisions, fencing, transitions, limits).
//
// # Compact history
//
// An event keeps what its commit changed, not a copy of the state. The event
// at seq 1 and at every multiple of SnapshotEvery (32) keeps the whole state
// (a snapshot); every other event keeps a Delta against the event before:
// the top-level members added or replaced, with their new value, the names
// of those removed, and the large members changed in place. A member of at
// least 512 bytes that is an object or an array in both states, whose own
// change is under half its new size, keeps that change instead (the same
// Delta one level down; for an array its new length and the elements
// replaced, appended or changed in place by index), down to 8 levels. The
// state at any seq is the snapshot at or before it with at most 31 deltas
// applied (ApplyDeltas), read in one query of at most 32 rows; it is exact
// because a delta replaces whole values wherever it does not descend. A
// step that edits a little of a 100 KB state, among its top-level members
// or inside one large array, costs about 100 KB / 32 plus the edit per
// event instead of 100 KB: the stores measure 13 to 30 times less
// (`memento bench scale`, BenchmarkHistoryBytesPerEvent in store/postgres
// and store/sqlite).
//
// Why snapshots and deltas rather than content-addressed state blobs: an
// agent's state changes a little at every step, so every step's blob would
// be new and addressing saves nothing; blobs would also need reference
// counting or a sweep on retention. Why not JSON Patch: a Delta is applied
// to members and elements by name and index with no path syntax to parse,
// and the top-level form is what PostgreSQL computes inside the
// one-statement commit (jsonb_each against the row at exactly the expected
// revision) when the store has not just written the run itself. When it
// has, it computes the delta, in-place changes included, and the chain in
// Go, guarded by the chain head it computed them against
// (store/postgres/commitcache.go); a state of 8 KB or more whose run it
// has not (another instance wrote it last) is read first, one more round
// trip, so that it goes that way too. A delta from SQL is only less compact.
// Array edits are found by position: an element inserted near the front
// shifts the rest, so the array is stored whole.
//
// Fork copies the compact rows of events 1..revision as they are (deltas
// stay deltas, chains stay valid) rather than sharing them with the parent
// by lineage. A copy costs what the parent's history costs up to there,
// already about 30 times less than before, and keeps every run
// self-contained: reading a fork's history never walks its ancestors,
// retention deletes a run without copying into or refusing for its
// children (a refusal would stall retention batches behind undeletable
// parents), and the rows of a run stay colocated by (tenant, run) for a
// distributed database. Forks are rare next to commits.
//
// # Hash chain and running totals
//
// Every event carries Chain = ChainNext(chain of the event before, the
// event): a SHA-256 over the previous value and every field of the event as
// the store returns it, including its stored change. The run keeps the head,
// the seq a resume last verified the chain through (VerifiedSeq) and the
// running totals of the payloads' "spend" objects (Spent). A resume verifies
// only the events after VerifiedSeq, compares the head and the state of the
// last event, and checks budgets against Spent, so it never reads the whole
// log; the resume.verified commit then moves VerifiedSeq. An event altered
// behind the store's back after the verified point breaks the chain and the
// resume is refused. The chain detects corruption and stray writes, not an
// adversary who can rewrite the database (it carries no key).
package run
