package faultstore

import (
	"context"
	"time"

	"github.com/mementohq/memento/run"
)

// Runs is a run.Store with faults injected; each method is the inner one behind inject.
type Runs struct {
	inner run.Store
	in    *Injector
}

var _ run.Store = (*Runs)(nil)

// Runs wraps s.
func (in *Injector) Runs(s run.Store) *Runs { return &Runs{inner: s, in: in} }

func (s *Runs) CreateRun(ctx context.Context, nr run.NewRun) (run.Run, bool, error) {
	return call3(s.in.inject(ctx, "CreateRun", nr), func() (run.Run, bool, error) { return s.inner.CreateRun(ctx, nr) })
}

func (s *Runs) GetRun(ctx context.Context, tenantID, runID string) (run.Run, error) {
	return call2(s.in.inject(ctx, "GetRun", tenantID, runID), func() (run.Run, error) { return s.inner.GetRun(ctx, tenantID, runID) })
}

func (s *Runs) ListRuns(ctx context.Context, tenantID string, f run.ListFilter) ([]run.Run, error) {
	return call2(s.in.inject(ctx, "ListRuns", tenantID, f), func() ([]run.Run, error) { return s.inner.ListRuns(ctx, tenantID, f) })
}

func (s *Runs) ListEvents(ctx context.Context, tenantID, runID string, afterSeq int64, limit int) ([]run.Event, error) {
	return call2(s.in.inject(ctx, "ListEvents", tenantID, runID, afterSeq, limit), func() ([]run.Event, error) {
		return s.inner.ListEvents(ctx, tenantID, runID, afterSeq, limit)
	})
}

func (s *Runs) GetEvent(ctx context.Context, tenantID, runID string, seq int64) (run.Event, error) {
	return call2(s.in.inject(ctx, "GetEvent", tenantID, runID, seq), func() (run.Event, error) { return s.inner.GetEvent(ctx, tenantID, runID, seq) })
}

func (s *Runs) AcquireLease(ctx context.Context, tenantID, runID, owner string, epoch int64, ttl time.Duration) (run.Lease, error) {
	return call2(s.in.inject(ctx, "AcquireLease", tenantID, runID, owner, epoch, ttl), func() (run.Lease, error) {
		return s.inner.AcquireLease(ctx, tenantID, runID, owner, epoch, ttl)
	})
}

func (s *Runs) ReleaseLease(ctx context.Context, tenantID, runID, owner string, epoch int64) error {
	return call1(s.in.inject(ctx, "ReleaseLease", tenantID, runID, owner, epoch), func() error {
		return s.inner.ReleaseLease(ctx, tenantID, runID, owner, epoch)
	})
}

func (s *Runs) Commit(ctx context.Context, tenantID, runID string, c run.StoreCommit) (run.Run, run.Event, error) {
	return call3(s.in.inject(ctx, "Commit", tenantID, runID, c), func() (run.Run, run.Event, error) { return s.inner.Commit(ctx, tenantID, runID, c) })
}

func (s *Runs) CreateCheckpoint(ctx context.Context, tenantID, runID, label string, revision int64) (run.Checkpoint, error) {
	return call2(s.in.inject(ctx, "CreateCheckpoint", tenantID, runID, label, revision), func() (run.Checkpoint, error) {
		return s.inner.CreateCheckpoint(ctx, tenantID, runID, label, revision)
	})
}

func (s *Runs) ListCheckpoints(ctx context.Context, tenantID, runID string, afterRevision int64, afterLabel string, limit int) ([]run.Checkpoint, error) {
	return call2(s.in.inject(ctx, "ListCheckpoints", tenantID, runID, afterRevision, afterLabel, limit), func() ([]run.Checkpoint, error) {
		return s.inner.ListCheckpoints(ctx, tenantID, runID, afterRevision, afterLabel, limit)
	})
}

func (s *Runs) GetCheckpoint(ctx context.Context, tenantID, runID, label string) (run.Checkpoint, error) {
	return call2(s.in.inject(ctx, "GetCheckpoint", tenantID, runID, label), func() (run.Checkpoint, error) {
		return s.inner.GetCheckpoint(ctx, tenantID, runID, label)
	})
}

func (s *Runs) Fork(ctx context.Context, tenantID, sourceRunID string, revision int64, nr run.NewRun) (run.Run, error) {
	return call2(s.in.inject(ctx, "Fork", tenantID, sourceRunID, revision, nr), func() (run.Run, error) {
		return s.inner.Fork(ctx, tenantID, sourceRunID, revision, nr)
	})
}

func (s *Runs) DeleteTerminalBefore(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	return call2(s.in.inject(ctx, "DeleteTerminalBefore", cutoff, limit), func() (int, error) { return s.inner.DeleteTerminalBefore(ctx, cutoff, limit) })
}

func (s *Runs) ListRecoverable(ctx context.Context, tenantID string, q run.RecoveryQuery) ([]run.Recoverable, error) {
	return call2(s.in.inject(ctx, "ListRecoverable", tenantID, q), func() ([]run.Recoverable, error) { return s.inner.ListRecoverable(ctx, tenantID, q) })
}

func (s *Runs) AckWakeups(ctx context.Context, tenantID, runID string, wakeups []run.Wakeup) error {
	return call1(s.in.inject(ctx, "AckWakeups", tenantID, runID, wakeups), func() error { return s.inner.AckWakeups(ctx, tenantID, runID, wakeups) })
}

func (s *Runs) PutSchema(ctx context.Context, tenantID string, sc run.Schema) (run.Schema, bool, error) {
	return call3(s.in.inject(ctx, "PutSchema", tenantID, sc), func() (run.Schema, bool, error) { return s.inner.PutSchema(ctx, tenantID, sc) })
}

func (s *Runs) GetSchema(ctx context.Context, tenantID, workflow string, version int) (run.Schema, error) {
	return call2(s.in.inject(ctx, "GetSchema", tenantID, workflow, version), func() (run.Schema, error) {
		return s.inner.GetSchema(ctx, tenantID, workflow, version)
	})
}

func (s *Runs) ListSchemas(ctx context.Context, tenantID, workflow string, afterVersion, limit int) ([]run.Schema, error) {
	return call2(s.in.inject(ctx, "ListSchemas", tenantID, workflow, afterVersion, limit), func() ([]run.Schema, error) {
		return s.inner.ListSchemas(ctx, tenantID, workflow, afterVersion, limit)
	})
}
