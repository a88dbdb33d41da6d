package run

import (
	"context"
	"time"
)

// Store persists runs. Every method is scoped by tenant first; a run of
// another tenant is ErrNotFound, on every method that names a run (a list
// of an unknown run's events or checkpoints is ErrNotFound, not empty).
// Implementations live under store/ and must pass storetest.RunStoreSuite.
// Times are kept to microsecond precision.
//
// History (see doc.go): every event carries Change, what its commit changed,
// and Chain, the hash chain through it. A store may keep any event as a
// snapshot (Snapshot true, Change the whole state) or as a delta against
// the event before (Change a Delta as MakeDelta writes it); the SQL stores
// keep a snapshot at IsSnapshotSeq seqs and deltas between. Whatever it
// keeps, Chain of the event at seq n must equal ChainNext(Chain of n-1 (""
// for n = 1), the event as ListEvents returns it), and the run's Chain is
// that of its last event. A run's Spent starts as an empty map on
// CreateRun, grows by StoreCommit.Spend on each commit (nil Spent stays
// nil), and VerifiedSeq starts at 0 and changes only by
// StoreCommit.VerifiedSeq. History must stay compact: the suite commits a
// long run of small changes to a large state and wants its Changes to weigh
// well under a full state per event.
//
// State schemas (PutSchema...) are kept per tenant, workflow and version,
// immutable once registered. Commit and CreateRun enforce them (see Commit):
// the Service validates the state first and names what it validated
// against, so that a workflow without registered schemas costs no lookup.
type Store interface {
	// CreateRun inserts the run (its StateRevision is 1) and its first event,
	// EventRunCreated at seq 1, atomically. With a non-empty IdempotencyKey an
	// earlier run created under the same key is returned with created=false if
	// its RequestDigest matches, else ErrIdempotencyMismatch (the key is looked
	// up before the run id). A clashing run id is ErrAlreadyExists.
	// Concurrent creates with one key yield one run. Then, when the
	// workflow has schemas registered for the tenant, the run is created
	// only if nr.Schema.Digest is the digest of the one registered for
	// nr.Run.StateSchemaVersion, else *SchemaRequiredError (Registered false
	// if that version has none), nothing created. With nr.LeaseOwner set
	// the run is created with that lease (epoch 1, expiring LeaseTTL from
	// now), which the returned run carries.
	CreateRun(ctx context.Context, nr NewRun) (r Run, created bool, err error)

	GetRun(ctx context.Context, tenantID, runID string) (Run, error)

	// ListRuns orders by (created_at, run_id) ascending, strictly after the
	// filter's keyset position, at most f.Limit rows.
	ListRuns(ctx context.Context, tenantID string, f ListFilter) ([]Run, error)

	// ListEvents returns events with seq > afterSeq in order, at most limit,
	// with NextStep, Status, StateSchemaVersion, Change, Snapshot and Chain
	// filled; State may be left empty: GetEvent is the way to read a state.
	ListEvents(ctx context.Context, tenantID, runID string, afterSeq int64, limit int) ([]Event, error)

	// GetEvent returns the event at seq, with the whole state at that seq
	// (State, rebuilt from the last snapshot at or before it and the deltas
	// since) and the fields ListEvents fills; a seq not in the log is
	// ErrRevisionNotFound.
	GetEvent(ctx context.Context, tenantID, runID string, seq int64) (Event, error)

	// AcquireLease takes or renews the run's lease, atomically.
	//   epoch == 0: take it if free or expired (epoch+1); if owner already holds
	//     it unexpired, extend it with the same epoch; held by another: ErrLeaseHeld.
	//   epoch > 0: renew; only if owner and epoch match and it has not expired,
	//     else ErrLeaseLost.
	// A terminal run is ErrRunNotActive. The answer's Revision is the run's
	// state revision at that moment.
	AcquireLease(ctx context.Context, tenantID, runID, owner string, epoch int64, ttl time.Duration) (Lease, error)

	// ReleaseLease frees the lease if owner and epoch match (ErrLeaseLost otherwise).
	// The epoch is kept so the next owner gets epoch+1.
	ReleaseLease(ctx context.Context, tenantID, runID, owner string, epoch int64) error

	// Commit appends c.Event at seq ExpectedRevision+1 with the snapshot, and
	// sets state, next step, status (unchanged if c.Status is empty), status
	// reason and schema version (unchanged if 0), revision+1, in ONE
	// transaction, only if: the revision matches, the lease owner and epoch
	// match and the lease has not expired, and the current status is in
	// c.FromStatuses. Otherwise nothing changes and the error tells which check
	// failed, in this order: ErrNotFound, ErrInvalidTransition, ErrLeaseLost,
	// ErrRevisionConflict, then *SchemaRequiredError: when the run's workflow
	// has schemas registered (PutSchema) for the tenant, the commit applies
	// only if c.Schema.Digest is the digest of the one registered for the
	// version it lands at (c.StateSchemaVersion, or the run's if 0); if that
	// version has none, Registered is false. It returns the run as committed and the new event
	// (State the new state; Change, Snapshot and Chain as stored). The run's
	// Chain becomes the new event's, its Spent grows by c.Spend, and its
	// VerifiedSeq becomes c.VerifiedSeq when that is non-zero.
	Commit(ctx context.Context, tenantID, runID string, c StoreCommit) (Run, Event, error)

	// CreateCheckpoint labels revision (which must exist: ErrRevisionNotFound);
	// a label is unique per run (ErrCheckpointExists).
	CreateCheckpoint(ctx context.Context, tenantID, runID, label string, revision int64) (Checkpoint, error)
	// ListCheckpoints orders by (revision, label), strictly after the keyset
	// position (afterRevision, afterLabel) — (0, "") from the start — and
	// returns at most limit (limit <= 0: DefaultListSize).
	ListCheckpoints(ctx context.Context, tenantID, runID string, afterRevision int64, afterLabel string, limit int) ([]Checkpoint, error)
	// GetCheckpoint of an unknown label is ErrCheckpointNotFound.
	GetCheckpoint(ctx context.Context, tenantID, runID, label string) (Checkpoint, error)

	// Fork creates nr.Run as a copy of source run at revision: events 1..revision
	// are copied as stored (compact: deltas stay deltas, chains stay), and
	// state, next step, status and schema version are those of the event at
	// that revision; the fork's Chain is that event's, its Spent the total
	// of SpendOf over the payloads of events 1..revision (nil if the
	// source's is nil), its VerifiedSeq 0. nr.Run carries the new id, parent fields,
	// and the lease cleared; its status is taken from the snapshot unless it is
	// terminal, in which case the fork is suspended. A revision not in the
	// source's log is ErrRevisionNotFound; a taken new run id ErrAlreadyExists.
	// Copied events keep their created_at. With a non-empty IdempotencyKey
	// the key and RequestDigest are kept with the fork, as CreateRun keeps
	// them: a run already holding the key is returned with ErrAlreadyExists
	// if its digest matches, else ErrIdempotencyMismatch, and nothing is made.
	Fork(ctx context.Context, tenantID, sourceRunID string, revision int64, nr NewRun) (Run, error)

	// PutSchema registers s (Digest set by the caller) for the tenant. A
	// version is immutable: the same digest again returns the stored one with
	// created=false, another digest is ErrSchemaConflict.
	PutSchema(ctx context.Context, tenantID string, s Schema) (Schema, bool, error)
	// GetSchema of a version not registered is ErrSchemaNotFound.
	GetSchema(ctx context.Context, tenantID, workflow string, version int) (Schema, error)
	// ListSchemas orders a workflow's schemas by version, strictly after
	// afterVersion, at most limit (an unknown workflow: empty).
	ListSchemas(ctx context.Context, tenantID, workflow string, afterVersion, limit int) ([]Schema, error)

	// DeleteTerminalBefore deletes runs that finished (at the time of the
	// commit that made them terminal) before cutoff, oldest first, with
	// everything that lives with the run: events, checkpoints, wake-ups and,
	// in a backend that also keeps the operation ledger, operations and
	// approvals (and summaries, once they exist), across tenants, at most
	// limit runs per call. It returns how many runs were deleted. A batch
	// costs O(limit): it walks an index of finished runs by finished time,
	// never a scan of the runs table. Only one caller at a time sweeps: while
	// another holds the sweep (another instance), a call returns 0 at once.
	DeleteTerminalBefore(ctx context.Context, cutoff time.Time, limit int) (int, error)

	// ListRecoverable returns, ordered by run id and strictly after
	// q.AfterRunID, at most q.Limit runs of the tenant that a recovery loop
	// must look at, without their state:
	//   - running runs whose lease is free or expired (by the store's clock,
	//     the database's on a server database), and
	//   - suspended runs with a due wake-up (Wakeups: every wake-up of the
	//     run with At <= q.Now, in At order), with their StatusReason and
	//     the state's top-level member q.ControlKey (Control, JSON; nil if
	//     absent or q.ControlKey is empty).
	// Its cost grows with the runs it returns (running runs without a live
	// lease, suspended ones with a due wake-up), never with finished runs,
	// running runs holding a live lease, or suspended runs that nothing woke
	// or whose wake-up is not yet due. Due wake-ups of runs that are no longer active (finished
	// or deleted) are deleted as they are met. Wake-ups of running runs are
	// kept until the run is suspended or finishes: the event may concern
	// what the run is about to wait for.
	//
	// Wake-ups are written, in the same transaction as the event, by the
	// operation ledger of the same backend (see toolop.Store): one immediate
	// wake-up (At = WakeNow) when an operation's status changes to one not in
	// doubt (not started or unknown) or an approval is decided, and one timed
	// wake-up at ExpiresAt when a pending approval is created, each only if
	// the run is running or suspended at that moment. The run store itself
	// writes an immediate wake-up for a run it inserts suspended (Fork of a
	// suspended or terminal revision): it may wait for something that
	// already happened. Writing a wake-up that exists (same run and At)
	// increments its N instead. Wake-ups are deleted with their run
	// (DeleteTerminalBefore).
	ListRecoverable(ctx context.Context, tenantID string, q RecoveryQuery) ([]Recoverable, error)

	// AckWakeups deletes the run's wake-ups that still are exactly as given
	// (same At and N): one written again since it was read (a larger N) is
	// kept, so an event that happened after the caller looked is not lost.
	// Unknown wake-ups are ignored.
	AckWakeups(ctx context.Context, tenantID, runID string, wakeups []Wakeup) error
}
