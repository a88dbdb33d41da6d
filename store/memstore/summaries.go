package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/mementohq/memento/compact"
)

var _ compact.Store = (*Summaries)(nil)

// Summaries is the compact.Store of a Store: a view sharing its mutex.
// It is a type of its own because compact.Store and session.Store both
// name a Get.
type Summaries struct{ s *Store }

// Summaries returns the summary store kept in s.
func (s *Store) Summaries() *Summaries { return &Summaries{s: s} }

// cloneSummary deep-copies a summary through JSON, its stored form in the
// SQL backends too, with times at stored precision.
func cloneSummary(x compact.Summary) compact.Summary {
	b, err := json.Marshal(x)
	if err != nil {
		panic(fmt.Sprintf("memstore: encode summary: %v", err)) // plain data: cannot fail
	}
	var out compact.Summary
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("memstore: decode summary: %v", err))
	}
	out.CreatedAt = micro(out.CreatedAt)
	if out.StaleAt != nil {
		t := micro(*out.StaleAt)
		out.StaleAt = &t
	}
	return compact.Normalize(out)
}

func sameOwner(a, b compact.Owner) bool { return a.Kind == b.Kind && a.ID == b.ID }

// Put inserts x, superseding x.Supersedes in the same step.
func (v *Summaries) Put(ctx context.Context, x compact.Summary) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{x.TenantID, x.SummaryID}
	if _, ok := s.summaries[k]; ok {
		return fmt.Errorf("put summary %s: %w", x.SummaryID, compact.ErrAlreadyExists)
	}
	old, supersede := s.summaries[key{x.TenantID, x.Supersedes}]
	supersede = supersede && x.Supersedes != ""
	if x.Status == compact.StatusCurrent {
		for ok, o := range s.summaries {
			if ok.tenant == x.TenantID && sameOwner(o.Owner, x.Owner) && o.Status == compact.StatusCurrent &&
				o.Covers.FromSeq == x.Covers.FromSeq && !(supersede && o.SummaryID == x.Supersedes) {
				return fmt.Errorf("put summary %s: a current summary %s starts at seq %d: %w", x.SummaryID, o.SummaryID, o.Covers.FromSeq, compact.ErrAlreadyExists)
			}
		}
	}
	if supersede {
		old.Status = compact.StatusSuperseded
		s.summaries[key{x.TenantID, x.Supersedes}] = old
	}
	s.summaries[k] = cloneSummary(x)
	return nil
}

// Get returns one summary.
func (v *Summaries) Get(ctx context.Context, tenantID, summaryID string) (compact.Summary, error) {
	if err := ctx.Err(); err != nil {
		return compact.Summary{}, err
	}
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.summaries[key{tenantID, summaryID}]
	if !ok {
		return compact.Summary{}, fmt.Errorf("get summary %s: %w", summaryID, compact.ErrNotFound)
	}
	return cloneSummary(x), nil
}

// List returns a page of the owner's summaries in range order.
func (v *Summaries) List(ctx context.Context, tenantID string, owner compact.Owner, q compact.ListQuery) ([]compact.Summary, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if q.Limit <= 0 {
		q.Limit = compact.DefaultListLimit
	}
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []compact.Summary
	for k, x := range s.summaries {
		if k.tenant != tenantID || !sameOwner(x.Owner, owner) || (q.Status != "" && x.Status != q.Status) {
			continue
		}
		if c := cmp.Or(cmp.Compare(x.Covers.FromSeq, q.AfterFromSeq), cmp.Compare(x.SummaryID, q.AfterID)); c <= 0 {
			continue
		}
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b compact.Summary) int {
		return cmp.Or(cmp.Compare(a.Covers.FromSeq, b.Covers.FromSeq), cmp.Compare(a.SummaryID, b.SummaryID))
	})
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	for i := range out {
		out[i] = cloneSummary(out[i])
	}
	return out, nil
}

// MarkStale marks a summary stale unless it is superseded.
func (v *Summaries) MarkStale(ctx context.Context, tenantID, summaryID, reason string, at time.Time) (compact.Summary, error) {
	if err := ctx.Err(); err != nil {
		return compact.Summary{}, err
	}
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{tenantID, summaryID}
	x, ok := s.summaries[k]
	if !ok {
		return compact.Summary{}, fmt.Errorf("mark summary %s stale: %w", summaryID, compact.ErrNotFound)
	}
	if x.Status != compact.StatusSuperseded {
		t := micro(at)
		x.Status, x.StaleReason, x.StaleAt = compact.StatusStale, reason, &t
		s.summaries[k] = x
	}
	return cloneSummary(x), nil
}

// DeleteOwner deletes every summary of the owner.
func (v *Summaries) DeleteOwner(ctx context.Context, tenantID string, owner compact.Owner) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteSummariesLocked(tenantID, owner), nil
}

func (s *Store) deleteSummariesLocked(tenantID string, owner compact.Owner) int {
	n := 0
	for k, x := range s.summaries {
		if k.tenant == tenantID && sameOwner(x.Owner, owner) {
			delete(s.summaries, k)
			n++
		}
	}
	return n
}
