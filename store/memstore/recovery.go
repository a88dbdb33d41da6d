package memstore

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/mementohq/memento/run"
)

// wake records a wake-up of the run at at, if the run is active, as the SQL
// backends' triggers do; the caller holds s.mu.
func (s *Store) wake(tenantID, runID string, at time.Time) {
	rr, ok := s.runs[key{tenantID, runID}]
	if !ok || rr.run.Status.Terminal() {
		return
	}
	if rr.wakeups == nil {
		rr.wakeups = map[int64]int64{}
	}
	rr.wakeups[at.UnixMicro()]++
}

// ListRecoverable returns the runs a recovery loop must look at; see run.Store.
// A twin for tests: it looks at every run of the tenant.
func (s *Store) ListRecoverable(ctx context.Context, tenantID string, q run.RecoveryQuery) ([]run.Recoverable, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	if q.Now.IsZero() {
		q.Now = time.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, due := s.nowMicros(), q.Now.UnixMicro()
	var out []run.Recoverable
	for k, rr := range s.runs {
		r := rr.run
		if k.tenant != tenantID || r.RunID <= q.AfterRunID {
			continue
		}
		if r.Status.Terminal() {
			rr.wakeups = nil
			continue
		}
		rc := run.Recoverable{TenantID: tenantID, RunID: r.RunID, WorkflowName: r.WorkflowName, Status: r.Status,
			LeaseExpiresAt: cloneTime(r.LeaseExpiresAt)}
		switch r.Status {
		case run.StatusRunning:
			if leaseHeld(r, now) {
				continue
			}
		case run.StatusSuspended:
			for at, n := range rr.wakeups {
				if at <= due {
					w := run.Wakeup{At: fromMicros(at), N: n}
					if at == 0 {
						w.At = run.WakeNow
					}
					rc.Wakeups = append(rc.Wakeups, w)
				}
			}
			if len(rc.Wakeups) == 0 {
				continue
			}
			slices.SortFunc(rc.Wakeups, func(a, b run.Wakeup) int { return a.At.Compare(b.At) })
			rc.StatusReason = r.StatusReason
			if q.ControlKey != "" {
				var top map[string]json.RawMessage
				if json.Unmarshal(r.State, &top) == nil {
					rc.Control = cloneJSON(top[q.ControlKey])
				}
			}
		}
		out = append(out, rc)
	}
	slices.SortFunc(out, func(a, b run.Recoverable) int { return strings.Compare(a.RunID, b.RunID) })
	return out[:min(limit, len(out))], nil
}

// AckWakeups deletes the run's wake-ups that are still as given; see run.Store.
func (s *Store) AckWakeups(ctx context.Context, tenantID, runID string, wakeups []run.Wakeup) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rr, ok := s.runs[key{tenantID, runID}]
	if !ok {
		return nil
	}
	for _, w := range wakeups {
		if at := w.At.UnixMicro(); rr.wakeups[at] == w.N {
			delete(rr.wakeups, at)
		}
	}
	return nil
}
