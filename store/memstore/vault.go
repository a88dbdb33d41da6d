package memstore

import (
	"context"
	"fmt"

	"github.com/mementohq/memento/pii"
)

func cloneRecord(r pii.Record) pii.Record {
	r.Sealed = cloneBytes(r.Sealed)
	r.CreatedAt, r.ExpiresAt = micro(r.CreatedAt), micro(r.ExpiresAt)
	return r
}

// PutRecords implements pii.Store: all records or none.
func (s *Store) PutRecords(ctx context.Context, recs []pii.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[key]bool{}
	for _, r := range recs {
		k := key{r.TenantID, r.ID}
		if _, ok := s.vault[k]; ok || seen[k] {
			return fmt.Errorf("put vault record %s: id taken", r.ID)
		}
		seen[k] = true
	}
	for _, r := range recs {
		s.vault[key{r.TenantID, r.ID}] = cloneRecord(r)
	}
	return nil
}

// GetRecord implements pii.Store.
func (s *Store) GetRecord(ctx context.Context, tenantID, id string) (pii.Record, error) {
	if err := ctx.Err(); err != nil {
		return pii.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.vault[key{tenantID, id}]
	if !ok || r.ExpiresAt.UnixMicro() <= s.nowMicros() {
		return pii.Record{}, pii.ErrNotFound
	}
	return cloneRecord(r), nil
}

// DeleteRecord implements pii.Store.
func (s *Store) DeleteRecord(ctx context.Context, tenantID, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.vault, key{tenantID, id})
	return nil
}
