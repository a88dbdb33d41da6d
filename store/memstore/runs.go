package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/run"
)

// runRow is a run with its log, labels and wake-ups. events[i] has seq
// i+1 and keeps, besides its stored Change (a snapshot at
// run.IsSnapshotSeq seqs, a delta between, as the SQL stores keep them, so
// the chain is the same), the whole State at that seq.
type runRow struct {
	run         run.Run
	idemKey     string
	digest      string
	events      []run.Event
	checkpoints map[string]run.Checkpoint
	// finished is when the commit that made the run terminal ran (micros;
	// 0: not finished by a commit). Retention goes by it.
	finished int64
	// wakeups maps a wake-up's At (micros; 0 is run.WakeNow) to its N.
	wakeups map[int64]int64
}

func newRow(r run.Run) *runRow {
	return &runRow{run: r, checkpoints: map[string]run.Checkpoint{}, wakeups: map[int64]int64{}}
}

func cloneSpent(m map[string]int64) map[string]int64 {
	if m == nil {
		return nil
	}
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func cloneRun(r run.Run) run.Run {
	r.State = cloneJSON(r.State)
	r.LeaseExpiresAt = cloneTime(r.LeaseExpiresAt)
	r.Spent = cloneSpent(r.Spent)
	return r
}

func cloneEvent(ev run.Event) run.Event {
	ev.Payload = cloneJSON(ev.Payload)
	ev.State = cloneJSON(ev.State)
	ev.Change = cloneJSON(ev.Change)
	return ev
}

// listed is an event as ListEvents returns it: everything but the state.
func listed(ev run.Event) run.Event {
	ev = cloneEvent(ev)
	ev.State = nil
	return ev
}

// active reports a status in which a run waits for or does work.
func active(st run.Status) bool { return st == run.StatusRunning || st == run.StatusSuspended }

// wake writes a wake-up of the run at at (micros), if the run exists and
// (unless always) is active: a rewrite of one that exists increments its N.
func (s *Store) wake(tenantID, runID string, at int64, always bool) {
	rr, ok := s.runs[key{tenantID, runID}]
	if !ok || (!always && !active(rr.run.Status)) {
		return
	}
	rr.wakeups[at]++
}

func (s *Store) row(tenantID, runID string) (*runRow, error) {
	rr, ok := s.runs[key{tenantID, runID}]
	if !ok {
		return nil, run.ErrNotFound
	}
	return rr, nil
}

// CreateRun inserts a run at revision 1 with its run.created event; see run.Store.
func (s *Store) CreateRun(ctx context.Context, nr run.NewRun) (run.Run, bool, error) {
	if err := ctx.Err(); err != nil {
		return run.Run{}, false, err
	}
	r := cloneRun(nr.Run)
	r.StateRevision = 1
	if r.Status == "" {
		r.Status = run.StatusRunning
	}
	if len(r.State) == 0 {
		r.State = json.RawMessage(`{}`)
	}
	if r.StateSchemaVersion == 0 {
		r.StateSchemaVersion = 1
	}
	r.LeaseOwner, r.LeaseEpoch, r.LeaseExpiresAt = "", 0, nil
	r.Spent, r.VerifiedSeq = map[string]int64{}, 0
	payload, err := json.Marshal(map[string]any{
		"workflow_name": r.WorkflowName, "workflow_version": r.WorkflowVersion,
		"state_schema_version": r.StateSchemaVersion,
	})
	if err != nil {
		return run.Run{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if nr.IdempotencyKey != "" {
		if id, ok := s.idem[key{r.TenantID, nr.IdempotencyKey}]; ok {
			rr := s.runs[key{r.TenantID, id}]
			if rr.digest != nr.RequestDigest {
				return run.Run{}, false, run.ErrIdempotencyMismatch
			}
			return cloneRun(rr.run), false, nil
		}
	}
	k := key{r.TenantID, r.RunID}
	if _, ok := s.runs[k]; ok {
		return run.Run{}, false, run.ErrAlreadyExists
	}
	if err := s.schemaGuard(r.TenantID, r, run.StoreCommit{Schema: nr.Schema}); err != nil {
		return run.Run{}, false, err
	}
	now := fromMicros(s.nowMicros())
	r.CreatedAt, r.UpdatedAt = now, now
	if nr.LeaseOwner != "" {
		exp := fromMicros(now.UnixMicro() + nr.LeaseTTL.Microseconds())
		r.LeaseOwner, r.LeaseEpoch, r.LeaseExpiresAt = nr.LeaseOwner, 1, &exp
	}
	ev := run.Event{
		Seq: 1, EventType: run.EventRunCreated, Payload: payload, CreatedAt: now,
		State: cloneJSON(r.State), NextStep: r.NextStep, Status: r.Status, StateSchemaVersion: r.StateSchemaVersion,
		Change: cloneJSON(r.State), Snapshot: true,
	}
	ev.Chain = run.ChainNext("", ev)
	r.Chain = ev.Chain
	rr := newRow(r)
	rr.idemKey, rr.digest = nr.IdempotencyKey, nr.RequestDigest
	rr.events = []run.Event{ev}
	s.runs[k] = rr
	if nr.IdempotencyKey != "" {
		s.idem[key{r.TenantID, nr.IdempotencyKey}] = r.RunID
	}
	if r.Status == run.StatusSuspended {
		// It may wait for something that already happened: look at it once.
		s.wake(r.TenantID, r.RunID, 0, true)
	}
	return cloneRun(r), true, nil
}

// GetRun returns the run; see run.Store.
func (s *Store) GetRun(ctx context.Context, tenantID, runID string) (run.Run, error) {
	if err := ctx.Err(); err != nil {
		return run.Run{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rr, err := s.row(tenantID, runID)
	if err != nil {
		return run.Run{}, err
	}
	return cloneRun(rr.run), nil
}

// ListRuns returns a keyset page of runs ordered by (created_at, run_id); see run.Store.
func (s *Store) ListRuns(ctx context.Context, tenantID string, f run.ListFilter) ([]run.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	keyset := f.AfterRunID != "" || !f.AfterCreated.IsZero()
	after := f.AfterCreated.UnixMicro()
	s.mu.Lock()
	var match []run.Run
	for k, rr := range s.runs {
		r := rr.run
		if k.tenant != tenantID || (f.Status != "" && r.Status != f.Status) || (f.WorkflowName != "" && r.WorkflowName != f.WorkflowName) {
			continue
		}
		if keyset {
			c := r.CreatedAt.UnixMicro()
			if c < after || (c == after && r.RunID <= f.AfterRunID) {
				continue
			}
		}
		match = append(match, cloneRun(r))
	}
	s.mu.Unlock()
	slices.SortFunc(match, func(a, b run.Run) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.RunID, b.RunID))
	})
	out := []run.Run{}
	return append(out, match[:min(limit, len(match))]...), nil
}

// ListEvents returns events after afterSeq, without snapshots; see run.Store.
func (s *Store) ListEvents(ctx context.Context, tenantID, runID string, afterSeq int64, limit int) ([]run.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rr, err := s.row(tenantID, runID)
	if err != nil {
		return nil, err
	}
	out := []run.Event{}
	for _, ev := range rr.events[min(max(afterSeq, 0), int64(len(rr.events))):] {
		if len(out) == limit {
			break
		}
		out = append(out, listed(ev))
	}
	return out, nil
}

// GetEvent returns one event with its snapshot; see run.Store.
func (s *Store) GetEvent(ctx context.Context, tenantID, runID string, seq int64) (run.Event, error) {
	if err := ctx.Err(); err != nil {
		return run.Event{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rr, err := s.row(tenantID, runID)
	if err != nil {
		return run.Event{}, err
	}
	if seq < 1 || seq > int64(len(rr.events)) {
		return run.Event{}, run.ErrRevisionNotFound
	}
	return cloneEvent(rr.events[seq-1]), nil
}

// leaseHeld reports whether the run's lease is held at now (micros).
func leaseHeld(r run.Run, now int64) bool {
	return r.LeaseOwner != "" && r.LeaseExpiresAt != nil && r.LeaseExpiresAt.UnixMicro() > now
}

// AcquireLease takes or renews the lease; see run.Store.
func (s *Store) AcquireLease(ctx context.Context, tenantID, runID, owner string, epoch int64, ttl time.Duration) (run.Lease, error) {
	if err := ctx.Err(); err != nil {
		return run.Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rr, err := s.row(tenantID, runID)
	if err != nil {
		return run.Lease{}, err
	}
	r := &rr.run
	if r.Status.Terminal() {
		return run.Lease{}, fmt.Errorf("%w: status %s", run.ErrRunNotActive, r.Status)
	}
	now := s.nowMicros()
	held := leaseHeld(*r, now)
	newEpoch := r.LeaseEpoch
	switch {
	case epoch > 0:
		if !held || r.LeaseOwner != owner || r.LeaseEpoch != epoch {
			return run.Lease{}, fmt.Errorf("%w: renewing epoch %d", run.ErrLeaseLost, epoch)
		}
	case held && r.LeaseOwner != owner:
		return run.Lease{}, &run.LeaseHeldError{RunID: runID, Owner: r.LeaseOwner, ExpiresAt: cloneTime(r.LeaseExpiresAt)}
	case !held:
		newEpoch = r.LeaseEpoch + 1
	}
	expires := fromMicros(now + ttl.Microseconds())
	r.LeaseOwner, r.LeaseEpoch, r.LeaseExpiresAt = owner, newEpoch, &expires
	return run.Lease{Owner: owner, Epoch: newEpoch, ExpiresAt: expires, Revision: r.StateRevision}, nil
}

// ReleaseLease frees the lease, keeping the epoch; see run.Store.
func (s *Store) ReleaseLease(ctx context.Context, tenantID, runID, owner string, epoch int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rr, err := s.row(tenantID, runID)
	if err != nil {
		return err
	}
	r := &rr.run
	if r.LeaseOwner == "" || r.LeaseOwner != owner || r.LeaseEpoch != epoch {
		return run.ErrLeaseLost
	}
	r.LeaseOwner, r.LeaseExpiresAt = "", nil
	return nil
}

// Commit appends one event and replaces the state atomically; see run.Store.
func (s *Store) Commit(ctx context.Context, tenantID, runID string, c run.StoreCommit) (run.Run, run.Event, error) {
	if err := ctx.Err(); err != nil {
		return run.Run{}, run.Event{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rr, err := s.row(tenantID, runID)
	if err != nil {
		return run.Run{}, run.Event{}, err
	}
	r := rr.run
	// Diagnose in the order run.Store documents.
	if !slices.Contains(c.FromStatuses, r.Status) {
		if c.Status != "" {
			return run.Run{}, run.Event{}, fmt.Errorf("%w: %s -> %s", run.ErrInvalidTransition, r.Status, c.Status)
		}
		return run.Run{}, run.Event{}, fmt.Errorf("%w: run is %s", run.ErrInvalidTransition, r.Status)
	}
	now := s.nowMicros()
	if !leaseHeld(r, now) || r.LeaseOwner != c.Owner || r.LeaseEpoch != c.Epoch {
		return run.Run{}, run.Event{}, fmt.Errorf("%w: %s/%d does not hold it", run.ErrLeaseLost, c.Owner, c.Epoch)
	}
	if r.StateRevision != c.ExpectedRevision {
		return run.Run{}, run.Event{}, &run.RevisionConflictError{RunID: runID, Expected: c.ExpectedRevision, Current: r.StateRevision}
	}
	if err := s.schemaGuard(tenantID, r, c); err != nil {
		return run.Run{}, run.Event{}, err
	}
	ts := fromMicros(now)
	oldState := r.State
	r.State = cloneJSON(c.State)
	if len(r.State) == 0 {
		r.State = json.RawMessage(`{}`)
	}
	r.NextStep = c.NextStep
	if c.Status != "" {
		r.Status = c.Status
	}
	r.StatusReason = c.StatusReason
	if c.StateSchemaVersion != 0 {
		r.StateSchemaVersion = c.StateSchemaVersion
	}
	r.StateRevision++
	r.UpdatedAt = ts
	payload := cloneJSON(c.Event.Payload)
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	ev := run.Event{
		Seq: r.StateRevision, EventType: c.Event.EventType, StepID: c.Event.StepID, Attempt: c.Event.Attempt,
		Payload: payload, CreatedAt: ts,
		State: r.State, NextStep: r.NextStep, Status: r.Status, StateSchemaVersion: r.StateSchemaVersion,
		Change: cloneJSON(r.State), Snapshot: run.IsSnapshotSeq(r.StateRevision),
	}
	if !ev.Snapshot {
		var err error
		if ev.Change, err = run.MakeDelta(oldState, r.State); err != nil {
			return run.Run{}, run.Event{}, err
		}
	}
	ev.Chain = run.ChainNext(r.Chain, ev)
	r.Chain = ev.Chain
	if c.Spend != nil {
		var err error
		if r.Spent, err = run.AddSpendChecked(r.Spent, c.Spend); err != nil {
			return run.Run{}, run.Event{}, err
		}
	}
	if c.VerifiedSeq > 0 {
		r.VerifiedSeq = c.VerifiedSeq
	}
	if r.Status.Terminal() {
		rr.finished = now
	}
	rr.events = append(rr.events, ev)
	rr.run = r
	return cloneRun(r), cloneEvent(ev), nil
}

// CreateCheckpoint labels an existing revision; see run.Store.
func (s *Store) CreateCheckpoint(ctx context.Context, tenantID, runID, label string, revision int64) (run.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return run.Checkpoint{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rr, err := s.row(tenantID, runID)
	if err != nil {
		return run.Checkpoint{}, err
	}
	if revision < 1 || revision > rr.run.StateRevision {
		return run.Checkpoint{}, fmt.Errorf("%w: %d, run is at %d", run.ErrRevisionNotFound, revision, rr.run.StateRevision)
	}
	if _, ok := rr.checkpoints[label]; ok {
		return run.Checkpoint{}, run.ErrCheckpointExists
	}
	cp := run.Checkpoint{Label: label, Revision: revision, CreatedAt: fromMicros(s.nowMicros())}
	rr.checkpoints[label] = cp
	return cp, nil
}

// ListCheckpoints lists a page of a run's checkpoints by (revision, label); see run.Store.
func (s *Store) ListCheckpoints(ctx context.Context, tenantID, runID string, afterRevision int64, afterLabel string, limit int) ([]run.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rr, err := s.row(tenantID, runID)
	if err != nil {
		return nil, err
	}
	out := []run.Checkpoint{}
	for _, cp := range rr.checkpoints {
		if cmp.Or(cmp.Compare(cp.Revision, afterRevision), cmp.Compare(cp.Label, afterLabel)) > 0 {
			out = append(out, cp)
		}
	}
	slices.SortFunc(out, func(a, b run.Checkpoint) int {
		return cmp.Or(cmp.Compare(a.Revision, b.Revision), cmp.Compare(a.Label, b.Label))
	})
	return out[:min(limit, len(out))], nil
}

// GetCheckpoint returns one checkpoint by label; see run.Store.
func (s *Store) GetCheckpoint(ctx context.Context, tenantID, runID, label string) (run.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return run.Checkpoint{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rr, err := s.row(tenantID, runID)
	if err != nil {
		return run.Checkpoint{}, err
	}
	cp, ok := rr.checkpoints[label]
	if !ok {
		return run.Checkpoint{}, run.ErrCheckpointNotFound
	}
	return cp, nil
}

// Fork copies a run as it was at revision into a new run; see run.Store.
func (s *Store) Fork(ctx context.Context, tenantID, sourceRunID string, revision int64, nr run.NewRun) (run.Run, error) {
	if err := ctx.Err(); err != nil {
		return run.Run{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src, err := s.row(tenantID, sourceRunID)
	if err != nil {
		return run.Run{}, err
	}
	if revision < 1 || revision > src.run.StateRevision {
		return run.Run{}, fmt.Errorf("%w: %d, run is at %d", run.ErrRevisionNotFound, revision, src.run.StateRevision)
	}
	snap := src.events[revision-1]
	if nr.IdempotencyKey != "" {
		if id, ok := s.idem[key{tenantID, nr.IdempotencyKey}]; ok {
			rr := s.runs[key{tenantID, id}]
			if rr.digest != nr.RequestDigest {
				return run.Run{}, run.ErrIdempotencyMismatch
			}
			return cloneRun(rr.run), fmt.Errorf("%w: %s (idempotency key replayed)", run.ErrAlreadyExists, id)
		}
	}
	k := key{tenantID, nr.Run.RunID}
	if _, ok := s.runs[k]; ok {
		return run.Run{}, fmt.Errorf("%w: %s", run.ErrAlreadyExists, nr.Run.RunID)
	}
	now := fromMicros(s.nowMicros())
	status := snap.Status
	if status.Terminal() {
		// A fork exists to go on from a past point; a terminal one could not.
		status = run.StatusSuspended
	}
	r := run.Run{
		TenantID: tenantID, RunID: nr.Run.RunID,
		WorkflowName: src.run.WorkflowName, WorkflowVersion: src.run.WorkflowVersion,
		StateSchemaVersion: snap.StateSchemaVersion, Status: status,
		NextStep: snap.NextStep, State: cloneJSON(snap.State), StateRevision: revision,
		ParentRunID: sourceRunID, ParentRevision: revision,
		CreatedAt: now, UpdatedAt: now, Chain: snap.Chain,
	}
	rr := newRow(r)
	rr.events = make([]run.Event, revision)
	if src.run.Spent != nil {
		rr.run.Spent = map[string]int64{}
	}
	for i := range rr.events {
		// Copied as stored: deltas stay deltas, chains stay valid.
		rr.events[i] = cloneEvent(src.events[i])
		if rr.run.Spent != nil {
			rr.run.Spent = run.AddSpend(rr.run.Spent, run.SpendOf(rr.events[i].Payload))
		}
	}
	rr.idemKey, rr.digest = nr.IdempotencyKey, nr.RequestDigest
	s.runs[k] = rr
	if nr.IdempotencyKey != "" {
		s.idem[key{tenantID, nr.IdempotencyKey}] = r.RunID
	}
	if status == run.StatusSuspended {
		s.wake(tenantID, r.RunID, 0, true)
	}
	return cloneRun(rr.run), nil
}

// DeleteTerminalBefore deletes runs finished before cutoff with their
// events, checkpoints, wake-ups, operations and approvals, across tenants,
// oldest first, at most limit per call; see run.Store. The store's one
// mutex makes it the only sweep at a time.
func (s *Store) DeleteTerminalBefore(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	cut := cutoff.UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []*runRow
	for _, rr := range s.runs {
		if rr.finished != 0 && rr.finished < cut {
			old = append(old, rr)
		}
	}
	slices.SortFunc(old, func(a, b *runRow) int {
		return cmp.Or(cmp.Compare(a.finished, b.finished), cmp.Compare(a.run.TenantID, b.run.TenantID), cmp.Compare(a.run.RunID, b.run.RunID))
	})
	old = old[:min(limit, len(old))]
	for _, rr := range old {
		tn, id := rr.run.TenantID, rr.run.RunID
		delete(s.runs, key{tn, id})
		if rr.idemKey != "" {
			delete(s.idem, key{tn, rr.idemKey})
		}
		for k, op := range s.ops {
			if k.tenant == tn && op.RunID == id {
				delete(s.ops, k)
			}
		}
		for k, a := range s.approvals {
			if k.tenant == tn && a.RunID == id {
				delete(s.approvals, k)
			}
		}
		s.deleteSummariesLocked(tn, compact.RunOwner(id))
	}
	return len(old), nil
}
