package faultstore

import (
	"context"
	"time"

	"github.com/mementohq/memento/memory"
)

// Memory is a memory.Store with faults injected. Its calls are named
// "Memory" + the method ("MemoryInsert", "MemoryGet", ...) in rules and
// counts, so they never match a session rule for "Get" on a shared injector.
type Memory struct {
	inner memory.Store
	in    *Injector
}

var _ memory.Store = (*Memory)(nil)

// Memory wraps s. It is not part of All: memory.Store and session.Store both
// name a Get, so no one value can be both.
func (in *Injector) Memory(s memory.Store) *Memory { return &Memory{inner: s, in: in} }

func (s *Memory) Insert(ctx context.Context, p memory.InsertParams) (memory.Claim, error) {
	return call2(s.in.inject(ctx, "MemoryInsert", p), func() (memory.Claim, error) { return s.inner.Insert(ctx, p) })
}

func (s *Memory) Get(ctx context.Context, tenantID, memoryID string) (memory.Claim, error) {
	return call2(s.in.inject(ctx, "MemoryGet", tenantID, memoryID), func() (memory.Claim, error) { return s.inner.Get(ctx, tenantID, memoryID) })
}

func (s *Memory) GetMany(ctx context.Context, tenantID string, memoryIDs []string) ([]memory.Claim, error) {
	return call2(s.in.inject(ctx, "MemoryGetMany", tenantID, memoryIDs), func() ([]memory.Claim, error) { return s.inner.GetMany(ctx, tenantID, memoryIDs) })
}

func (s *Memory) List(ctx context.Context, q memory.ListQuery) ([]memory.Claim, error) {
	return call2(s.in.inject(ctx, "MemoryList", q), func() ([]memory.Claim, error) { return s.inner.List(ctx, q) })
}

func (s *Memory) Transition(ctx context.Context, p memory.TransitionParams) (memory.Claim, error) {
	return call2(s.in.inject(ctx, "MemoryTransition", p), func() (memory.Claim, error) { return s.inner.Transition(ctx, p) })
}

func (s *Memory) Refresh(ctx context.Context, tenantID, memoryID string, at time.Time) (memory.Claim, error) {
	return call2(s.in.inject(ctx, "MemoryRefresh", tenantID, memoryID, at), func() (memory.Claim, error) { return s.inner.Refresh(ctx, tenantID, memoryID, at) })
}

func (s *Memory) Forget(ctx context.Context, p memory.ForgetParams) (memory.ForgetRecord, error) {
	return call2(s.in.inject(ctx, "MemoryForget", p), func() (memory.ForgetRecord, error) { return s.inner.Forget(ctx, p) })
}

func (s *Memory) Tombstones(ctx context.Context, tenantID, subjectID string) ([]memory.Tombstone, error) {
	return call2(s.in.inject(ctx, "MemoryTombstones", tenantID, subjectID), func() ([]memory.Tombstone, error) { return s.inner.Tombstones(ctx, tenantID, subjectID) })
}

func (s *Memory) SearchText(ctx context.Context, q memory.TextQuery) ([]memory.Scored, error) {
	return call2(s.in.inject(ctx, "MemorySearchText", q), func() ([]memory.Scored, error) { return s.inner.SearchText(ctx, q) })
}

func (s *Memory) Vectors(ctx context.Context, tenantID, subjectID, model string, afterVersion int64) ([]memory.Vector, int64, error) {
	return call3(s.in.inject(ctx, "MemoryVectors", tenantID, subjectID, model, afterVersion), func() ([]memory.Vector, int64, error) {
		return s.inner.Vectors(ctx, tenantID, subjectID, model, afterVersion)
	})
}

func (s *Memory) MissingVectors(ctx context.Context, tenantID, subjectID, model string, limit int) ([]memory.Claim, error) {
	return call2(s.in.inject(ctx, "MemoryMissingVectors", tenantID, subjectID, model, limit), func() ([]memory.Claim, error) { return s.inner.MissingVectors(ctx, tenantID, subjectID, model, limit) })
}

func (s *Memory) PutVectors(ctx context.Context, tenantID, subjectID string, vs []memory.Vector) error {
	return call1(s.in.inject(ctx, "MemoryPutVectors", tenantID, subjectID, vs), func() error { return s.inner.PutVectors(ctx, tenantID, subjectID, vs) })
}

func (s *Memory) Changes(ctx context.Context, tenantID, subjectID, model string, afterVersion int64) (memory.Changes, error) {
	return call2(s.in.inject(ctx, "MemoryChanges", tenantID, subjectID, model, afterVersion), func() (memory.Changes, error) {
		return s.inner.Changes(ctx, tenantID, subjectID, model, afterVersion)
	})
}

func (s *Memory) SubjectVersion(ctx context.Context, tenantID, subjectID string) (int64, error) {
	return call2(s.in.inject(ctx, "MemorySubjectVersion", tenantID, subjectID), func() (int64, error) { return s.inner.SubjectVersion(ctx, tenantID, subjectID) })
}

func (s *Memory) PutNamespace(ctx context.Context, ns memory.Namespace) error {
	return call1(s.in.inject(ctx, "MemoryPutNamespace", ns), func() error { return s.inner.PutNamespace(ctx, ns) })
}

func (s *Memory) GetNamespace(ctx context.Context, tenantID, name string) (memory.Namespace, error) {
	return call2(s.in.inject(ctx, "MemoryGetNamespace", tenantID, name), func() (memory.Namespace, error) { return s.inner.GetNamespace(ctx, tenantID, name) })
}

func (s *Memory) Unconsented(ctx context.Context, tenantID, namespace string) (int, error) {
	return call2(s.in.inject(ctx, "MemoryUnconsented", tenantID, namespace), func() (int, error) { return s.inner.Unconsented(ctx, tenantID, namespace) })
}

func (s *Memory) ProjectionRows(ctx context.Context, tenantID, subjectID string) (int, error) {
	return call2(s.in.inject(ctx, "MemoryProjectionRows", tenantID, subjectID), func() (int, error) { return s.inner.ProjectionRows(ctx, tenantID, subjectID) })
}
