package tracestore

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/toolop"
)

// call runs fn inside a span named "store.<method>". Methods that a store
// interface gains later still work through the embedded inner store; they are
// simply not traced until a wrapper method is added here.
func call[T any](ctx context.Context, tr trace.Tracer, method, tenant string, fn func(context.Context) (T, error)) (T, error) {
	ctx, span := tr.Start(ctx, "store."+method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("memento.store.method", method), attribute.String("memento.tenant_id", tenant)))
	v, err := fn(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return v, err
}

// call0 is call for methods that return only an error.
func call0(ctx context.Context, tr trace.Tracer, method, tenant string, fn func(context.Context) error) error {
	_, err := call(ctx, tr, method, tenant, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}

// Runs traces a run.Store.
type Runs struct {
	run.Store
	T trace.Tracer
}

func (s Runs) CreateRun(ctx context.Context, nr run.NewRun) (run.Run, bool, error) {
	type res struct {
		r       run.Run
		created bool
	}
	v, err := call(ctx, s.T, "CreateRun", nr.Run.TenantID, func(ctx context.Context) (res, error) {
		r, c, err := s.Store.CreateRun(ctx, nr)
		return res{r, c}, err
	})
	return v.r, v.created, err
}

func (s Runs) GetRun(ctx context.Context, tenantID, runID string) (run.Run, error) {
	return call(ctx, s.T, "GetRun", tenantID, func(ctx context.Context) (run.Run, error) { return s.Store.GetRun(ctx, tenantID, runID) })
}

func (s Runs) ListRuns(ctx context.Context, tenantID string, f run.ListFilter) ([]run.Run, error) {
	return call(ctx, s.T, "ListRuns", tenantID, func(ctx context.Context) ([]run.Run, error) { return s.Store.ListRuns(ctx, tenantID, f) })
}

func (s Runs) ListEvents(ctx context.Context, tenantID, runID string, afterSeq int64, limit int) ([]run.Event, error) {
	return call(ctx, s.T, "ListEvents", tenantID, func(ctx context.Context) ([]run.Event, error) {
		return s.Store.ListEvents(ctx, tenantID, runID, afterSeq, limit)
	})
}

func (s Runs) GetEvent(ctx context.Context, tenantID, runID string, seq int64) (run.Event, error) {
	return call(ctx, s.T, "GetEvent", tenantID, func(ctx context.Context) (run.Event, error) { return s.Store.GetEvent(ctx, tenantID, runID, seq) })
}

func (s Runs) AcquireLease(ctx context.Context, tenantID, runID, owner string, epoch int64, ttl time.Duration) (run.Lease, error) {
	return call(ctx, s.T, "AcquireLease", tenantID, func(ctx context.Context) (run.Lease, error) {
		return s.Store.AcquireLease(ctx, tenantID, runID, owner, epoch, ttl)
	})
}

func (s Runs) ReleaseLease(ctx context.Context, tenantID, runID, owner string, epoch int64) error {
	return call0(ctx, s.T, "ReleaseLease", tenantID, func(ctx context.Context) error { return s.Store.ReleaseLease(ctx, tenantID, runID, owner, epoch) })
}

func (s Runs) Commit(ctx context.Context, tenantID, runID string, c run.StoreCommit) (run.Run, run.Event, error) {
	type res struct {
		r  run.Run
		ev run.Event
	}
	v, err := call(ctx, s.T, "Commit", tenantID, func(ctx context.Context) (res, error) {
		r, ev, err := s.Store.Commit(ctx, tenantID, runID, c)
		return res{r, ev}, err
	})
	return v.r, v.ev, err
}

func (s Runs) CreateCheckpoint(ctx context.Context, tenantID, runID, label string, revision int64) (run.Checkpoint, error) {
	return call(ctx, s.T, "CreateCheckpoint", tenantID, func(ctx context.Context) (run.Checkpoint, error) {
		return s.Store.CreateCheckpoint(ctx, tenantID, runID, label, revision)
	})
}

func (s Runs) GetCheckpoint(ctx context.Context, tenantID, runID, label string) (run.Checkpoint, error) {
	return call(ctx, s.T, "GetCheckpoint", tenantID, func(ctx context.Context) (run.Checkpoint, error) {
		return s.Store.GetCheckpoint(ctx, tenantID, runID, label)
	})
}

func (s Runs) Fork(ctx context.Context, tenantID, sourceRunID string, revision int64, nr run.NewRun) (run.Run, error) {
	return call(ctx, s.T, "Fork", tenantID, func(ctx context.Context) (run.Run, error) {
		return s.Store.Fork(ctx, tenantID, sourceRunID, revision, nr)
	})
}

func (s Runs) DeleteTerminalBefore(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	return call(ctx, s.T, "DeleteTerminalBefore", "", func(ctx context.Context) (int, error) { return s.Store.DeleteTerminalBefore(ctx, cutoff, limit) })
}

func (s Runs) ListRecoverable(ctx context.Context, tenantID string, q run.RecoveryQuery) ([]run.Recoverable, error) {
	return call(ctx, s.T, "ListRecoverable", tenantID, func(ctx context.Context) ([]run.Recoverable, error) {
		return s.Store.ListRecoverable(ctx, tenantID, q)
	})
}

func (s Runs) AckWakeups(ctx context.Context, tenantID, runID string, wakeups []run.Wakeup) error {
	return call0(ctx, s.T, "AckWakeups", tenantID, func(ctx context.Context) error { return s.Store.AckWakeups(ctx, tenantID, runID, wakeups) })
}

// Ops traces a toolop.Store.
type Ops struct {
	toolop.Store
	T trace.Tracer
}

func (s Ops) PrepareOperation(ctx context.Context, op toolop.Operation) (toolop.Operation, bool, error) {
	type res struct {
		op      toolop.Operation
		created bool
	}
	v, err := call(ctx, s.T, "PrepareOperation", op.TenantID, func(ctx context.Context) (res, error) {
		o, c, err := s.Store.PrepareOperation(ctx, op)
		return res{o, c}, err
	})
	return v.op, v.created, err
}

func (s Ops) GetOperation(ctx context.Context, tenantID, operationID string) (toolop.Operation, error) {
	return call(ctx, s.T, "GetOperation", tenantID, func(ctx context.Context) (toolop.Operation, error) {
		return s.Store.GetOperation(ctx, tenantID, operationID)
	})
}

func (s Ops) TransitionOperation(ctx context.Context, tenantID, operationID string, t toolop.Transition) (toolop.Operation, error) {
	return call(ctx, s.T, "TransitionOperation", tenantID, func(ctx context.Context) (toolop.Operation, error) {
		return s.Store.TransitionOperation(ctx, tenantID, operationID, t)
	})
}

func (s Ops) CreateApproval(ctx context.Context, a toolop.Approval) (toolop.Approval, bool, error) {
	type res struct {
		a       toolop.Approval
		created bool
	}
	v, err := call(ctx, s.T, "CreateApproval", a.TenantID, func(ctx context.Context) (res, error) {
		st, c, err := s.Store.CreateApproval(ctx, a)
		return res{st, c}, err
	})
	return v.a, v.created, err
}

func (s Ops) GetApproval(ctx context.Context, tenantID, approvalID string) (toolop.Approval, error) {
	return call(ctx, s.T, "GetApproval", tenantID, func(ctx context.Context) (toolop.Approval, error) {
		return s.Store.GetApproval(ctx, tenantID, approvalID)
	})
}

func (s Ops) DecideApproval(ctx context.Context, tenantID, approvalID string, d toolop.Decision) (toolop.Approval, error) {
	return call(ctx, s.T, "DecideApproval", tenantID, func(ctx context.Context) (toolop.Approval, error) {
		return s.Store.DecideApproval(ctx, tenantID, approvalID, d)
	})
}

// Sessions traces a session.Store. It hides the optional StatePatcher
// capability unless the inner store has it (see WrapSessions).
type Sessions struct {
	session.Store
	T trace.Tracer
}

func (s Sessions) Put(ctx context.Context, p session.PutParams) (session.Session, bool, error) {
	type res struct {
		s       session.Session
		created bool
	}
	v, err := call(ctx, s.T, "SessionPut", p.TenantID, func(ctx context.Context) (res, error) {
		ss, c, err := s.Store.Put(ctx, p)
		return res{ss, c}, err
	})
	return v.s, v.created, err
}

func (s Sessions) Get(ctx context.Context, tenantID, sessionID, userID string) (session.Session, error) {
	return call(ctx, s.T, "SessionGet", tenantID, func(ctx context.Context) (session.Session, error) {
		return s.Store.Get(ctx, tenantID, sessionID, userID)
	})
}

func (s Sessions) SetState(ctx context.Context, tenantID, sessionID, userID string, expectedRevision int64, state json.RawMessage) (session.Session, error) {
	return call(ctx, s.T, "SessionSetState", tenantID, func(ctx context.Context) (session.Session, error) {
		return s.Store.SetState(ctx, tenantID, sessionID, userID, expectedRevision, state)
	})
}

func (s Sessions) Append(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int) (session.AppendResult, error) {
	return call(ctx, s.T, "SessionAppend", tenantID, func(ctx context.Context) (session.AppendResult, error) {
		return s.Store.Append(ctx, tenantID, sessionID, userID, msgs, maxMessages)
	})
}

func (s Sessions) AppendKeyed(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int, k session.AppendKey) (session.AppendResult, *session.AppendReplay, error) {
	type out struct {
		res    session.AppendResult
		replay *session.AppendReplay
	}
	o, err := call(ctx, s.T, "SessionAppendKeyed", tenantID, func(ctx context.Context) (out, error) {
		res, replay, err := s.Store.AppendKeyed(ctx, tenantID, sessionID, userID, msgs, maxMessages, k)
		return out{res, replay}, err
	})
	return o.res, o.replay, err
}

func (s Sessions) SetSummary(ctx context.Context, tenantID, sessionID, userID string, sum session.Summary) (session.Session, error) {
	return call(ctx, s.T, "SessionSetSummary", tenantID, func(ctx context.Context) (session.Session, error) {
		return s.Store.SetSummary(ctx, tenantID, sessionID, userID, sum)
	})
}

func (s Sessions) Delete(ctx context.Context, tenantID, sessionID, userID string) (session.Session, error) {
	return call(ctx, s.T, "SessionDelete", tenantID, func(ctx context.Context) (session.Session, error) {
		return s.Store.Delete(ctx, tenantID, sessionID, userID)
	})
}

// patchingSessions adds the StatePatcher capability of the inner store.
type patchingSessions struct {
	Sessions
	p session.StatePatcher
}

func (s patchingSessions) PatchState(ctx context.Context, tenantID, sessionID, userID string, expectedRevision int64, merge func(cur session.Session) (json.RawMessage, error)) (session.Session, error) {
	return call(ctx, s.T, "SessionPatchState", tenantID, func(ctx context.Context) (session.Session, error) {
		return s.p.PatchState(ctx, tenantID, sessionID, userID, expectedRevision, merge)
	})
}

// WrapSessions traces st, keeping its StatePatcher capability if it has one.
func WrapSessions(st session.Store, tr trace.Tracer) session.Store {
	w := Sessions{Store: st, T: tr}
	if p, ok := st.(session.StatePatcher); ok {
		return patchingSessions{Sessions: w, p: p}
	}
	return w
}

// Vault traces a pii.Store.
type Vault struct {
	pii.Store
	T trace.Tracer
}

func (s Vault) PutRecords(ctx context.Context, recs []pii.Record) error {
	tenant := ""
	if len(recs) > 0 {
		tenant = recs[0].TenantID
	}
	return call0(ctx, s.T, "VaultPut", tenant, func(ctx context.Context) error { return s.Store.PutRecords(ctx, recs) })
}

func (s Vault) GetRecord(ctx context.Context, tenantID, id string) (pii.Record, error) {
	return call(ctx, s.T, "VaultGet", tenantID, func(ctx context.Context) (pii.Record, error) { return s.Store.GetRecord(ctx, tenantID, id) })
}

func (s Vault) DeleteRecord(ctx context.Context, tenantID, id string) error {
	return call0(ctx, s.T, "VaultDelete", tenantID, func(ctx context.Context) error { return s.Store.DeleteRecord(ctx, tenantID, id) })
}
