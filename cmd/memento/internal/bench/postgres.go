package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/postgres"
)

// floorCommitSQL is the floor: the same guarded UPDATE of runs and INSERT
// of run_events as store/postgres's commit, in one statement and so one
// round trip, sent by a bare pgx pool with nothing around it. It returns
// the new seq so that a commit the guard refused is noticed, not counted.
const floorCommitSQL = `
WITH u AS (
	UPDATE runs SET
		state = $6::jsonb,
		next_step = $7::text,
		status = CASE WHEN $8::text = '' THEN status ELSE $8::text END,
		status_reason = $9,
		state_schema_version = CASE WHEN $10::int > 0 THEN $10::int ELSE state_schema_version END,
		state_revision = state_revision + 1,
		updated_at = now()
	WHERE tenant_id = $1 AND run_id = $2 AND state_revision = $3
	  AND lease_owner = $4 AND lease_epoch = $5 AND lease_expires_at > now()
	  AND status = ANY($11::text[])
	RETURNING state_schema_version, status, state_revision, updated_at
)
INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt, payload,
	state, next_step, status, state_schema_version, created_at)
SELECT $1::text, $2::text, u.state_revision, $12::text, $13::text, $14::int, $15::jsonb,
	$6::jsonb, $7::text, u.status, u.state_schema_version, u.updated_at
FROM u
RETURNING seq`

// leaseTTL outlives any measurement: leases must not expire mid-run.
const leaseTTL = time.Hour

type pgBench struct {
	schema string
	admin  *pgx.Conn // creates and drops the schema
	url    string    // with the schema as search_path and the pool size
	db     *postgres.DB
	svc    *run.Service
	pool   *pgxpool.Pool // the floor's own pool, configured like the engine's
	seq    int
}

// openPostgres makes a schema of its own and opens the engine and the
// floor's pool on it, both from the same URL (same pool size).
func openPostgres(ctx context.Context, rawURL string, poolSize int) (*pgBench, error) {
	admin, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL %s: %w", redactURL(rawURL), err)
	}
	b := &pgBench{admin: admin, schema: "memento_bench_" + randHex(6)}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{b.schema}.Sanitize()); err != nil {
		_ = admin.Close(ctx)
		return nil, fmt.Errorf("create schema %s: %w", b.schema, err)
	}
	u, err := withParam(rawURL, "search_path", b.schema)
	if err == nil {
		u, err = withPoolSize(u, poolSize)
	}
	if err != nil {
		b.close()
		return nil, err
	}
	b.url = u
	b.db, err = postgres.Open(ctx, u)
	if err != nil {
		b.close()
		return nil, fmt.Errorf("open engine on PostgreSQL: %w", err)
	}
	b.svc = run.NewService(b.db, run.Options{})
	b.pool, err = pgxpool.New(ctx, u)
	if err != nil {
		b.close()
		return nil, fmt.Errorf("open floor pool: %w", err)
	}
	return b, nil
}

func (b *pgBench) close() {
	if b.pool != nil {
		b.pool.Close()
	}
	if b.db != nil {
		b.db.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = b.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{b.schema}.Sanitize()+" CASCADE")
	_ = b.admin.Close(ctx)
}

// leasedRun is a run created for a measurement, with its lease held.
type leasedRun struct {
	id    string
	rev   int64
	lease run.Lease
}

// newRuns creates n runs through the engine and takes their leases, so
// that the floor and the engine commit to identical rows.
func newRuns(ctx context.Context, svc *run.Service, prefix string, n int) ([]leasedRun, error) {
	out := make([]leasedRun, n)
	state, _, _, _ := stepInput(0)
	for i := range out {
		id := prefix + "-" + strconv.Itoa(i) + "-" + randHex(4)
		r, _, err := svc.Create(ctx, Tenant, run.CreateRequest{
			RunID: id, WorkflowName: "bench", WorkflowVersion: "1", State: state, NextStep: "step-1",
		}, "")
		if err != nil {
			return nil, err
		}
		l, err := svc.AcquireLease(ctx, Tenant, id, "bench-worker-"+strconv.Itoa(i), 0, leaseTTL)
		if err != nil {
			return nil, err
		}
		out[i] = leasedRun{id: id, rev: r.StateRevision, lease: l}
	}
	return out, nil
}

// engineTarget commits through run.Service, as a Go program embedding
// Memento would.
func engineTarget(name string, svc *run.Service) target {
	var m int
	return target{name: name, prepare: func(ctx context.Context, n int) ([]stepper, error) {
		m++
		runs, err := newRuns(ctx, svc, name+"-"+strconv.Itoa(m), n)
		if err != nil {
			return nil, err
		}
		out := make([]stepper, n)
		for i, lr := range runs {
			out[i] = func(ctx context.Context) error {
				state, payload, stepID, next := stepInput(lr.rev)
				r, _, err := svc.Commit(ctx, Tenant, lr.id, run.CommitRequest{
					ExpectedRevision: lr.rev, Lease: lr.lease,
					Event: run.EventInput{EventType: EventType, StepID: stepID, Attempt: 1, Payload: payload},
					State: state, NextStep: next,
				})
				if err != nil {
					return err
				}
				lr.rev = r.StateRevision
				return nil
			}
		}
		return out, nil
	}}
}

func (b *pgBench) engine() target { return engineTarget(TargetPostgresEngine, b.svc) }

// floor commits with floorCommitSQL on a bare pgx pool.
func (b *pgBench) floor() target {
	fromStatuses := []string{string(run.StatusRunning), string(run.StatusSuspended)}
	return target{name: TargetPostgresFloor, prepare: func(ctx context.Context, n int) ([]stepper, error) {
		b.seq++
		runs, err := newRuns(ctx, b.svc, "floor-"+strconv.Itoa(b.seq), n)
		if err != nil {
			return nil, err
		}
		out := make([]stepper, n)
		for i, lr := range runs {
			out[i] = func(ctx context.Context) error {
				state, payload, stepID, next := stepInput(lr.rev)
				var seq int64
				err := b.pool.QueryRow(ctx, floorCommitSQL,
					Tenant, lr.id, lr.rev, lr.lease.Owner, lr.lease.Epoch,
					state, next, "", "", 0, fromStatuses,
					EventType, stepID, 1, payload,
				).Scan(&seq)
				if errors.Is(err, pgx.ErrNoRows) {
					return fmt.Errorf("floor commit of run %s at revision %d was refused by its guard", lr.id, lr.rev)
				}
				if err != nil {
					return fmt.Errorf("floor commit of run %s: %w", lr.id, err)
				}
				lr.rev = seq
				return nil
			}
		}
		return out, nil
	}}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// withParam sets one connection parameter on a URL or key=value DSN.
func withParam(raw, k, v string) (string, error) {
	if !strings.Contains(raw, "://") {
		return raw + " " + k + "=" + v, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse PostgreSQL URL: %w", err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
