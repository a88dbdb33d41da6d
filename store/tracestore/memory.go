package tracestore

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mementohq/memento/memory"
)

// Memory traces a memory.Store; spans are named "store.Memory<method>".
type Memory struct {
	memory.Store
	T trace.Tracer
}

var _ memory.Store = Memory{}

func (s Memory) Insert(ctx context.Context, p memory.InsertParams) (memory.Claim, error) {
	return call(ctx, s.T, "MemoryInsert", p.Claim.TenantID, func(ctx context.Context) (memory.Claim, error) { return s.Store.Insert(ctx, p) })
}

func (s Memory) Get(ctx context.Context, tenantID, memoryID string) (memory.Claim, error) {
	return call(ctx, s.T, "MemoryGet", tenantID, func(ctx context.Context) (memory.Claim, error) { return s.Store.Get(ctx, tenantID, memoryID) })
}

func (s Memory) GetMany(ctx context.Context, tenantID string, memoryIDs []string) ([]memory.Claim, error) {
	return call(ctx, s.T, "MemoryGetMany", tenantID, func(ctx context.Context) ([]memory.Claim, error) { return s.Store.GetMany(ctx, tenantID, memoryIDs) })
}

func (s Memory) List(ctx context.Context, q memory.ListQuery) ([]memory.Claim, error) {
	return call(ctx, s.T, "MemoryList", q.TenantID, func(ctx context.Context) ([]memory.Claim, error) { return s.Store.List(ctx, q) })
}

func (s Memory) Transition(ctx context.Context, p memory.TransitionParams) (memory.Claim, error) {
	return call(ctx, s.T, "MemoryTransition", p.TenantID, func(ctx context.Context) (memory.Claim, error) { return s.Store.Transition(ctx, p) })
}

func (s Memory) Refresh(ctx context.Context, tenantID, memoryID string, at time.Time) (memory.Claim, error) {
	return call(ctx, s.T, "MemoryRefresh", tenantID, func(ctx context.Context) (memory.Claim, error) { return s.Store.Refresh(ctx, tenantID, memoryID, at) })
}

func (s Memory) Forget(ctx context.Context, p memory.ForgetParams) (memory.ForgetRecord, error) {
	return call(ctx, s.T, "MemoryForget", p.TenantID, func(ctx context.Context) (memory.ForgetRecord, error) { return s.Store.Forget(ctx, p) })
}

func (s Memory) Tombstones(ctx context.Context, tenantID, subjectID string) ([]memory.Tombstone, error) {
	return call(ctx, s.T, "MemoryTombstones", tenantID, func(ctx context.Context) ([]memory.Tombstone, error) {
		return s.Store.Tombstones(ctx, tenantID, subjectID)
	})
}

func (s Memory) SearchText(ctx context.Context, q memory.TextQuery) ([]memory.Scored, error) {
	return call(ctx, s.T, "MemorySearchText", q.TenantID, func(ctx context.Context) ([]memory.Scored, error) { return s.Store.SearchText(ctx, q) })
}

func (s Memory) Vectors(ctx context.Context, tenantID, subjectID, model string, afterVersion int64) ([]memory.Vector, int64, error) {
	type res struct {
		vs []memory.Vector
		v  int64
	}
	r, err := call(ctx, s.T, "MemoryVectors", tenantID, func(ctx context.Context) (res, error) {
		vs, v, err := s.Store.Vectors(ctx, tenantID, subjectID, model, afterVersion)
		return res{vs, v}, err
	})
	return r.vs, r.v, err
}

func (s Memory) MissingVectors(ctx context.Context, tenantID, subjectID, model string, limit int) ([]memory.Claim, error) {
	return call(ctx, s.T, "MemoryMissingVectors", tenantID, func(ctx context.Context) ([]memory.Claim, error) {
		return s.Store.MissingVectors(ctx, tenantID, subjectID, model, limit)
	})
}

func (s Memory) PutVectors(ctx context.Context, tenantID, subjectID string, vs []memory.Vector) error {
	return call0(ctx, s.T, "MemoryPutVectors", tenantID, func(ctx context.Context) error { return s.Store.PutVectors(ctx, tenantID, subjectID, vs) })
}

func (s Memory) Changes(ctx context.Context, tenantID, subjectID, model string, afterVersion int64) (memory.Changes, error) {
	return call(ctx, s.T, "MemoryChanges", tenantID, func(ctx context.Context) (memory.Changes, error) {
		return s.Store.Changes(ctx, tenantID, subjectID, model, afterVersion)
	})
}

func (s Memory) SubjectVersion(ctx context.Context, tenantID, subjectID string) (int64, error) {
	return call(ctx, s.T, "MemorySubjectVersion", tenantID, func(ctx context.Context) (int64, error) { return s.Store.SubjectVersion(ctx, tenantID, subjectID) })
}

func (s Memory) PutNamespace(ctx context.Context, ns memory.Namespace) error {
	return call0(ctx, s.T, "MemoryPutNamespace", ns.TenantID, func(ctx context.Context) error { return s.Store.PutNamespace(ctx, ns) })
}

func (s Memory) GetNamespace(ctx context.Context, tenantID, name string) (memory.Namespace, error) {
	return call(ctx, s.T, "MemoryGetNamespace", tenantID, func(ctx context.Context) (memory.Namespace, error) { return s.Store.GetNamespace(ctx, tenantID, name) })
}

func (s Memory) Unconsented(ctx context.Context, tenantID, namespace string) (int, error) {
	return call(ctx, s.T, "MemoryUnconsented", tenantID, func(ctx context.Context) (int, error) { return s.Store.Unconsented(ctx, tenantID, namespace) })
}

func (s Memory) ProjectionRows(ctx context.Context, tenantID, subjectID string) (int, error) {
	return call(ctx, s.T, "MemoryProjectionRows", tenantID, func(ctx context.Context) (int, error) { return s.Store.ProjectionRows(ctx, tenantID, subjectID) })
}
