package memstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/mementohq/memento/run"
)

// ListRecoverable returns the runs a recovery loop must look at; see
// run.Store. It walks the tenant's runs: the twin has no index to keep.
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
	due := q.Now.UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowMicros()
	type hit struct {
		rc  run.Recoverable
		row *runRow
	}
	var hits []hit
	for k, rr := range s.runs {
		r := rr.run
		if k.tenant != tenantID || r.RunID <= q.AfterRunID {
			continue
		}
		if r.Status == run.StatusRunning {
			if !leaseHeld(r, now) {
				hits = append(hits, hit{rc: run.Recoverable{TenantID: tenantID, RunID: r.RunID, WorkflowName: r.WorkflowName,
					Status: r.Status, LeaseExpiresAt: cloneTime(r.LeaseExpiresAt)}, row: rr})
			}
			continue // a running run's wake-ups wait until it suspends or finishes
		}
		var ws []run.Wakeup
		for at, n := range rr.wakeups {
			if at <= due {
				ws = append(ws, run.Wakeup{At: fromMicros(at), N: n})
			}
		}
		if len(ws) == 0 {
			continue
		}
		slices.SortFunc(ws, func(a, b run.Wakeup) int { return a.At.Compare(b.At) })
		rc := run.Recoverable{TenantID: tenantID, RunID: r.RunID, WorkflowName: r.WorkflowName, Status: r.Status,
			LeaseExpiresAt: cloneTime(r.LeaseExpiresAt), StatusReason: r.StatusReason, Wakeups: ws}
		if q.ControlKey != "" {
			rc.Control = member(r.State, q.ControlKey)
		}
		hits = append(hits, hit{rc: rc, row: rr})
	}
	slices.SortFunc(hits, func(a, b hit) int { return cmp.Compare(a.rc.RunID, b.rc.RunID) })
	hits = hits[:min(limit, len(hits))]
	var out []run.Recoverable
	for _, h := range hits {
		if active(h.rc.Status) {
			out = append(out, h.rc)
			continue
		}
		// Finished: what woke it can wake it no more.
		for _, w := range h.rc.Wakeups {
			delete(h.row.wakeups, w.At.UnixMicro())
		}
	}
	return out, nil
}

// member returns the top-level member name of the JSON object state,
// compact, or nil if it has none.
func member(state json.RawMessage, name string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(state, &m) != nil {
		return nil
	}
	v, ok := m[name]
	if !ok {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return cloneJSON(v)
	}
	return json.RawMessage(b.Bytes())
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
		at := w.At.UnixMicro()
		if n, ok := rr.wakeups[at]; ok && n == w.N {
			delete(rr.wakeups, at)
		}
	}
	return nil
}
