package faultstore

import (
	"context"

	"github.com/mementohq/memento/pii"
)

// Vault is a pii.Store with faults injected; each method is the inner one behind inject.
type Vault struct {
	inner pii.Store
	in    *Injector
}

var _ pii.Store = (*Vault)(nil)

// Vault wraps s.
func (in *Injector) Vault(s pii.Store) *Vault { return &Vault{inner: s, in: in} }

func (s *Vault) PutRecords(ctx context.Context, recs []pii.Record) error {
	return call1(s.in.inject(ctx, "PutRecords", recs), func() error { return s.inner.PutRecords(ctx, recs) })
}

func (s *Vault) GetRecord(ctx context.Context, tenantID, id string) (pii.Record, error) {
	return call2(s.in.inject(ctx, "GetRecord", tenantID, id), func() (pii.Record, error) { return s.inner.GetRecord(ctx, tenantID, id) })
}

func (s *Vault) DeleteRecord(ctx context.Context, tenantID, id string) error {
	return call1(s.in.inject(ctx, "DeleteRecord", tenantID, id), func() error { return s.inner.DeleteRecord(ctx, tenantID, id) })
}
