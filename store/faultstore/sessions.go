package faultstore

import (
	"context"
	"encoding/json"

	"github.com/mementohq/memento/session"
)

// Sessions is a session.Store with faults injected. It does not offer the
// optional session.StatePatcher, so patches go through Get and SetState,
// where rules can reach them.
type Sessions struct {
	inner session.Store
	in    *Injector
}

var _ session.Store = (*Sessions)(nil)

// Sessions wraps s.
func (in *Injector) Sessions(s session.Store) *Sessions { return &Sessions{inner: s, in: in} }

func (s *Sessions) Put(ctx context.Context, p session.PutParams) (session.Session, bool, error) {
	return call3(s.in.inject(ctx, "Put", p), func() (session.Session, bool, error) { return s.inner.Put(ctx, p) })
}

func (s *Sessions) Get(ctx context.Context, tenantID, sessionID, userID string) (session.Session, error) {
	return call2(s.in.inject(ctx, "Get", tenantID, sessionID, userID), func() (session.Session, error) {
		return s.inner.Get(ctx, tenantID, sessionID, userID)
	})
}

func (s *Sessions) SetState(ctx context.Context, tenantID, sessionID, userID string, expectedRevision int64, state json.RawMessage) (session.Session, error) {
	return call2(s.in.inject(ctx, "SetState", tenantID, sessionID, userID, expectedRevision, state), func() (session.Session, error) {
		return s.inner.SetState(ctx, tenantID, sessionID, userID, expectedRevision, state)
	})
}

func (s *Sessions) Append(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int) (session.AppendResult, error) {
	return call2(s.in.inject(ctx, "Append", tenantID, sessionID, userID, msgs, maxMessages), func() (session.AppendResult, error) {
		return s.inner.Append(ctx, tenantID, sessionID, userID, msgs, maxMessages)
	})
}

func (s *Sessions) AppendKeyed(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int, k session.AppendKey) (session.AppendResult, *session.AppendReplay, error) {
	return call3(s.in.inject(ctx, "AppendKeyed", tenantID, sessionID, userID, msgs, maxMessages, k), func() (session.AppendResult, *session.AppendReplay, error) {
		return s.inner.AppendKeyed(ctx, tenantID, sessionID, userID, msgs, maxMessages, k)
	})
}

func (s *Sessions) Messages(ctx context.Context, tenantID, sessionID, userID string, q session.MessageQuery) ([]session.Message, error) {
	return call2(s.in.inject(ctx, "Messages", tenantID, sessionID, userID, q), func() ([]session.Message, error) {
		return s.inner.Messages(ctx, tenantID, sessionID, userID, q)
	})
}

func (s *Sessions) SetSummary(ctx context.Context, tenantID, sessionID, userID string, sum session.Summary) (session.Session, error) {
	return call2(s.in.inject(ctx, "SetSummary", tenantID, sessionID, userID, sum), func() (session.Session, error) {
		return s.inner.SetSummary(ctx, tenantID, sessionID, userID, sum)
	})
}

func (s *Sessions) Delete(ctx context.Context, tenantID, sessionID, userID string) (session.Session, error) {
	return call2(s.in.inject(ctx, "Delete", tenantID, sessionID, userID), func() (session.Session, error) {
		return s.inner.Delete(ctx, tenantID, sessionID, userID)
	})
}

func (s *Sessions) ListByUser(ctx context.Context, tenantID, userID string, q session.ListQuery) ([]session.Session, error) {
	return call2(s.in.inject(ctx, "ListByUser", tenantID, userID, q), func() ([]session.Session, error) {
		return s.inner.ListByUser(ctx, tenantID, userID, q)
	})
}
