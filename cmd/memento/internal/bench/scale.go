package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/store/sqlite"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow/control"
)

// DefaultScaleSizes are the run counts `bench scale` loads by default.
var DefaultScaleSizes = []int{10_000, 100_000, 1_000_000}

// ScaleConfig configures RunScale. At least one of PostgresURL and DataDir.
type ScaleConfig struct {
	PostgresURL string
	// DataDir holds the SQLite files, one per size, removed after.
	DataDir string
	Sizes   []int
	// ActiveEvery: one run in ActiveEvery is active (half running with a
	// live lease, half suspended waiting for a timed wake-up); 1000 is 0.1%.
	ActiveEvery int
	// Rounds of interleaved measurement; each figure is their median.
	Rounds int
	// Polls per round (their median is the round's sample).
	Polls int
	// RetainBatches per round.
	RetainBatches  int
	CommitDuration time.Duration
	ResumeEvents   int
	StorageSteps   int
	StateBytes     int
	Progress       io.Writer
}

func (c *ScaleConfig) fill() error {
	if c.PostgresURL == "" && c.DataDir == "" {
		return errors.New("a PostgreSQL URL or a data directory is required")
	}
	if len(c.Sizes) == 0 {
		c.Sizes = DefaultScaleSizes
	}
	for _, n := range c.Sizes {
		if n < 1000 {
			return fmt.Errorf("size %d: at least 1000 runs", n)
		}
	}
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&c.ActiveEvery, 1000)
	def(&c.Rounds, 5)
	def(&c.Polls, 5)
	def(&c.RetainBatches, 2)
	def(&c.ResumeEvents, 10_000)
	def(&c.StorageSteps, 1000)
	def(&c.StateBytes, 100<<10)
	if c.CommitDuration <= 0 {
		c.CommitDuration = 5 * time.Second
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return nil
}

// ScaleRow is what one backend measured at one size.
type ScaleRow struct {
	Backend string `json:"backend"`
	Runs    int    `json:"runs"`
	Active  int    `json:"active"`
	// PollMS is one whole recovery poll (every page) as the workflow engine
	// makes it, of the healthy tenant: every running run holds a live lease
	// and every suspended run waits for a wake-up that is not due, so a poll
	// that reads only what it returns returns nothing (PollReturned).
	PollMS       float64 `json:"poll_ms"`
	PollReturned int     `json:"poll_returned"`
	// DuePollMS is one whole poll of the recovering tenant, which holds as
	// many running runs with a free lease (their worker died) as the healthy
	// one holds active runs; DuePollReturned of them come back, and
	// DuePollPerRunUS is the cost per returned run.
	DuePollMS       float64 `json:"due_poll_ms"`
	DuePollReturned int     `json:"due_poll_returned"`
	DuePollPerRunUS float64 `json:"due_poll_per_run_us"`
	// RetainBatchMS is one retention batch of RetainLimit finished runs.
	RetainBatchMS float64 `json:"retain_batch_ms"`
	CommitsPerSec float64 `json:"commits_per_s"`
	// ResumeMS is resume verification of a suspended run with ResumeEvents events.
	ResumeMS float64 `json:"resume_ms"`
	// BytesPerEvent is the storage a step of a 100 KB state costs when the
	// step changes one of its 100 top-level members; BytesPerEventNested
	// when it changes one element of a 100-element top-level array.
	// Measured at the first size only.
	BytesPerEvent       float64 `json:"bytes_per_event,omitempty"`
	BytesPerEventNested float64 `json:"bytes_per_event_nested,omitempty"`
	LoadSeconds         float64 `json:"load_s"`
	// PollPaired and CommitsPaired are the median over rounds of the round's
	// figure divided by the first size's in the same round: the rounds are
	// measured side by side, so this ratio is not moved by load that came
	// and went between rounds, as the ratio of the medians is.
	PollPaired    float64 `json:"poll_paired_ratio"`
	CommitsPaired float64 `json:"commits_per_s_paired_ratio"`
	// Rounds holds every round's sample of each figure, in round order, so
	// that the spread behind a median (and so the noise in a ratio) shows.
	Rounds ScaleSamples `json:"rounds"`
}

// ScaleSamples are the per-round samples of one size.
type ScaleSamples struct {
	PollMS        []float64 `json:"poll_ms"`
	DuePollMS     []float64 `json:"due_poll_ms"`
	RetainBatchMS []float64 `json:"retain_batch_ms"`
	CommitsPerSec []float64 `json:"commits_per_s"`
	ResumeMS      []float64 `json:"resume_ms"`
}

// ScaleReport is the result of RunScale.
type ScaleReport struct {
	Sizes        []int      `json:"sizes"`
	ActiveEvery  int        `json:"active_every"`
	RetainLimit  int        `json:"retain_limit"`
	ResumeEvents int        `json:"resume_events"`
	StateBytes   int        `json:"state_bytes"`
	StorageSteps int        `json:"storage_steps"`
	Rounds       int        `json:"rounds"`
	Rows         []ScaleRow `json:"rows"`
}

// RetainLimit is the batch size run.Service's retention uses.
const RetainLimit = 500

const (
	scaleTenant = "scale"
	// scaleDueTenant holds the runs a recovery poll must return.
	scaleDueTenant = "scale-due"
)

// scaleDB is one size's scratch database of one backend.
type scaleDB struct {
	backend string
	store   run.Store
	ops     toolop.Store
	load    func(ctx context.Context, n, activeEvery int) error
	size    func(ctx context.Context) (int64, error)
	close   func()
}

// RunScale loads every size of a backend into a scratch schema or file of
// its own, then measures them in interleaved rounds (each round takes every
// size in turn, in a rotating order), so that load from elsewhere on the
// machine weighs on every size alike and the ratios stay meaningful; each
// figure is the median over rounds. The scratch databases are dropped after.
func RunScale(ctx context.Context, cfg ScaleConfig) (ScaleReport, error) {
	if err := cfg.fill(); err != nil {
		return ScaleReport{}, fmt.Errorf("bench scale: %w", err)
	}
	rep := ScaleReport{Sizes: cfg.Sizes, ActiveEvery: cfg.ActiveEvery, RetainLimit: RetainLimit,
		ResumeEvents: cfg.ResumeEvents, StateBytes: cfg.StateBytes, StorageSteps: cfg.StorageSteps, Rounds: cfg.Rounds}
	var backends []func(context.Context) (*scaleDB, error)
	if cfg.PostgresURL != "" {
		backends = append(backends, func(ctx context.Context) (*scaleDB, error) { return openScalePostgres(ctx, cfg.PostgresURL) })
	}
	if cfg.DataDir != "" {
		backends = append(backends, func(ctx context.Context) (*scaleDB, error) { return openScaleSQLite(ctx, cfg.DataDir) })
	}
	for _, open := range backends {
		rows, err := scaleBackend(ctx, cfg, open)
		if err != nil {
			return rep, fmt.Errorf("bench scale: %w", err)
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	return rep, nil
}

// scaleSize is one loaded size and what is measured on it.
type scaleSize struct {
	db                                       *scaleDB
	n                                        int
	runs                                     *run.Service
	ops                                      *toolop.Service
	commit                                   stepper
	resumer                                  *resumeRun
	row                                      ScaleRow
	polls, duePolls, rates, resumes, batches []float64
}

func scaleBackend(ctx context.Context, cfg ScaleConfig, open func(context.Context) (*scaleDB, error)) ([]ScaleRow, error) {
	var sizes []*scaleSize
	defer func() {
		for _, sz := range sizes {
			sz.db.close()
		}
	}()
	for _, n := range cfg.Sizes {
		db, err := open(ctx)
		if err != nil {
			return nil, err
		}
		sz := &scaleSize{db: db, n: n, row: ScaleRow{Backend: db.backend, Runs: n, Active: n / cfg.ActiveEvery}}
		sizes = append(sizes, sz)
		t0 := time.Now()
		if err := db.load(ctx, n, cfg.ActiveEvery); err != nil {
			return nil, fmt.Errorf("load %d runs: %w", n, err)
		}
		sz.row.LoadSeconds = time.Since(t0).Seconds()
		sz.runs = run.NewService(db.store, run.Options{})
		sz.ops = toolop.NewService(db.ops, nil)
		lrs, err := newRuns(ctx, sz.runs, "commit", 1)
		if err != nil {
			return nil, fmt.Errorf("commit run: %w", err)
		}
		sz.commit = engineStepper(sz.runs, &lrs[0])
		if sz.resumer, err = newResumeRun(ctx, sz.runs, sz.ops, cfg.ResumeEvents); err != nil {
			return nil, fmt.Errorf("resume run of %d events: %w", cfg.ResumeEvents, err)
		}
		fmt.Fprintf(cfg.Progress, "scale %s %d: loaded in %.1fs, resume run built in %.1fs\n",
			db.backend, n, sz.row.LoadSeconds, time.Since(t0).Seconds()-sz.row.LoadSeconds)
	}
	// One untimed poll of each tenant per size first: the first statements
	// on a new pool fill the server's caches of the schema.
	for _, sz := range sizes {
		for _, tn := range []string{scaleTenant, scaleDueTenant} {
			if _, err := pollAll(ctx, sz.db.store, tn, sz.ops.Now()); err != nil {
				return nil, fmt.Errorf("%s at %d runs: poll: %w", sz.db.backend, sz.n, err)
			}
		}
	}
	cutoff := time.Now().Add(-time.Hour)
	for round := 0; round < cfg.Rounds; round++ {
		if err := measureCommits(ctx, sizes, cfg.CommitDuration/time.Duration(cfg.Rounds), round); err != nil {
			return nil, err
		}
		for i := range sizes {
			sz := sizes[(i+round)%len(sizes)]
			if err := sz.measureRound(ctx, cfg, cutoff); err != nil {
				return nil, fmt.Errorf("%s at %d runs: %w", sz.db.backend, sz.n, err)
			}
		}
		fmt.Fprintf(cfg.Progress, "scale %s: round %d of %d done\n", sizes[0].db.backend, round+1, cfg.Rounds)
	}
	var rows []ScaleRow
	for i, sz := range sizes {
		row := sz.row
		row.PollMS, row.DuePollMS, row.CommitsPerSec = Median(sz.polls), Median(sz.duePolls), Median(sz.rates)
		row.ResumeMS, row.RetainBatchMS = Median(sz.resumes), Median(sz.batches)
		row.Rounds = ScaleSamples{PollMS: sz.polls, DuePollMS: sz.duePolls, RetainBatchMS: sz.batches,
			CommitsPerSec: sz.rates, ResumeMS: sz.resumes}
		row.PollPaired, row.CommitsPaired = pairedRatio(sz.polls, sizes[0].polls), pairedRatio(sz.rates, sizes[0].rates)
		if row.DuePollReturned > 0 {
			row.DuePollPerRunUS = row.DuePollMS * 1000 / float64(row.DuePollReturned)
		}
		if i == 0 {
			// Last, as its 100 MB of writes would weigh on whatever came after.
			var err error
			if row.BytesPerEvent, err = measureStorage(ctx, sz.db, sz.runs, cfg.StorageSteps, cfg.StateBytes, false); err != nil {
				return nil, fmt.Errorf("storage: %w", err)
			}
			if row.BytesPerEventNested, err = measureStorage(ctx, sz.db, sz.runs, cfg.StorageSteps, cfg.StateBytes, true); err != nil {
				return nil, fmt.Errorf("storage: %w", err)
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// commitSlice is how long one size commits before the next takes its
// turn. Commits at c=1 wait on the disk flush and the scheduler, which on
// a shared machine change from one second to the next: a size given its
// whole share of a round at once would measure that second, not the size.
const commitSlice = 100 * time.Millisecond

// measureCommits takes one round's sample of commit/s of every size: each
// size commits for d in all, in slices taken in turn (who goes first
// rotates), so that load from elsewhere weighs on every size alike.
func measureCommits(ctx context.Context, sizes []*scaleSize, d time.Duration, round int) error {
	ops := make([]int64, len(sizes))
	took := make([]time.Duration, len(sizes))
	for turn := 0; slices.ContainsFunc(took, func(t time.Duration) bool { return t < d }); turn++ {
		for k := range sizes {
			i := (k + turn + round) % len(sizes)
			sl := min(commitSlice, d-took[i])
			if sl <= 0 {
				continue
			}
			n, el, err := measure(ctx, []stepper{sizes[i].commit}, sl)
			if err != nil {
				return fmt.Errorf("%s at %d runs: commits: %w", sizes[i].db.backend, sizes[i].n, err)
			}
			ops[i] += n
			took[i] += el
		}
	}
	for i, sz := range sizes {
		sz.rates = append(sz.rates, float64(ops[i])/took[i].Seconds())
	}
	return nil
}

// measureRound takes one sample of the rest on one size: the median of a
// few recovery polls of each tenant, one resume and retention batches. The
// healthy tenant's polls come first and one after another, as a healthy
// system makes them: a due poll in between (a thousand runs returned at
// 1M) would leave its garbage and its pages to the next.
func (sz *scaleSize) measureRound(ctx context.Context, cfg ScaleConfig, cutoff time.Time) error {
	// polls returns the median of cfg.Polls polls of tenant (ms) and the
	// runs the last one returned.
	polls := func(tenant string) (float64, int, error) {
		var ms []float64
		got := 0
		for i := 0; i < cfg.Polls; i++ {
			t := time.Now()
			var err error
			if got, err = pollAll(ctx, sz.db.store, tenant, sz.ops.Now()); err != nil {
				return 0, 0, fmt.Errorf("poll: %w", err)
			}
			ms = append(ms, float64(time.Since(t).Microseconds())/1000)
		}
		return Median(ms), got, nil
	}
	healthy, got, err := polls(scaleTenant)
	if err != nil {
		return err
	}
	sz.polls, sz.row.PollReturned = append(sz.polls, healthy), got
	due, got, err := polls(scaleDueTenant)
	if err != nil {
		return err
	}
	sz.duePolls, sz.row.DuePollReturned = append(sz.duePolls, due), got
	ms, err := sz.resumer.resume(ctx)
	if err != nil {
		return err
	}
	sz.resumes = append(sz.resumes, ms)
	for i := 0; i < cfg.RetainBatches; i++ {
		t := time.Now()
		k, err := sz.db.store.DeleteTerminalBefore(ctx, cutoff, RetainLimit)
		if err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		if k < RetainLimit {
			break // too few finished runs left for a full batch: not comparable
		}
		sz.batches = append(sz.batches, float64(time.Since(t).Microseconds())/1000)
	}
	return nil
}

// pairedRatio is the median over rounds of v[r] / base[r].
func pairedRatio(v, base []float64) float64 {
	var r []float64
	for i := range min(len(v), len(base)) {
		if base[i] > 0 {
			r = append(r, v[i]/base[i])
		}
	}
	return Median(r)
}

func pollAll(ctx context.Context, st run.Store, tenant string, now time.Time) (int, error) {
	q := run.RecoveryQuery{Now: now, ControlKey: control.Key, Limit: run.MaxListLimit}
	total := 0
	for {
		page, err := st.ListRecoverable(ctx, tenant, q)
		if err != nil {
			return total, err
		}
		total += len(page)
		if len(page) < q.Limit {
			return total, nil
		}
		q.AfterRunID = page[len(page)-1].RunID
	}
}

// engineStepper commits small steps to one leased run through the service.
func engineStepper(svc *run.Service, lr *leasedRun) stepper {
	var i int64
	return func(ctx context.Context) error {
		i++
		state, payload, stepID, next := stepInput(i)
		r, _, err := svc.Commit(ctx, Tenant, lr.id, run.CommitRequest{
			ExpectedRevision: lr.rev, Lease: lr.lease, State: state, NextStep: next,
			Event: run.EventInput{EventType: "step.completed", StepID: stepID, Payload: payload},
		})
		if err != nil {
			return err
		}
		lr.rev = r.StateRevision
		return nil
	}
}

// resumeRun is a run of many events, resumed once per round.
type resumeRun struct {
	runs *run.Service
	v    *resume.Verifier
	lr   *leasedRun
}

// newResumeRun builds a run of events commits through the service, so that
// its history is what the store writes.
func newResumeRun(ctx context.Context, runs *run.Service, ops *toolop.Service, events int) (*resumeRun, error) {
	lrs, err := newRuns(ctx, runs, "resume", 1)
	if err != nil {
		return nil, err
	}
	lr := &lrs[0]
	step := engineStepper(runs, lr)
	for lr.rev < int64(events)-1 {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	v := &resume.Verifier{Runs: runs, Ops: ops, Workflows: func(string, string) (bool, error) { return true, nil }}
	return &resumeRun{runs: runs, v: v, lr: lr}, nil
}

// resume suspends the run (untimed) and times its resume verification.
func (rr *resumeRun) resume(ctx context.Context) (float64, error) {
	lr := rr.lr
	r, _, err := rr.runs.Commit(ctx, Tenant, lr.id, run.CommitRequest{ExpectedRevision: lr.rev, Lease: lr.lease,
		State: json.RawMessage(`{"i":0}`), NextStep: "step-1", Status: run.StatusSuspended,
		Event: run.EventInput{EventType: "step.suspended"}})
	if err != nil {
		return 0, fmt.Errorf("suspend: %w", err)
	}
	if err := rr.runs.ReleaseLease(ctx, Tenant, lr.id, lr.lease); err != nil {
		return 0, err
	}
	t := time.Now()
	res, err := rr.v.Resume(ctx, resume.Request{TenantID: Tenant, RunID: lr.id, Owner: "resumer", LeaseTTL: leaseTTL})
	if err != nil {
		return 0, fmt.Errorf("resume at %d events: %w (%s)", r.StateRevision, err, res.Reason)
	}
	ms := float64(time.Since(t).Microseconds()) / 1000
	lr.rev, lr.lease = res.Run.StateRevision, res.Lease
	return ms, nil
}

// measureStorage commits steps steps of a state of stateBytes, each step
// changing a small part of it: a counter and one of 100 items of random
// text, the items being the state's top-level members (nested false) or
// the elements of one top-level array (nested true). It returns the
// storage growth per event. On PostgreSQL the runs table is left out: it
// holds one current state per run, and its growth here is MVCC garbage of
// the updated row that vacuum reclaims, not history.
func measureStorage(ctx context.Context, db *scaleDB, runs *run.Service, steps, stateBytes int, nested bool) (float64, error) {
	lrs, err := newRuns(ctx, runs, "storage", 1)
	if err != nil {
		return 0, err
	}
	lr := &lrs[0]
	items := make([]string, 100)
	for i := range items {
		b := make([]byte, stateBytes/100*3/4)
		_, _ = rand.Read(b)
		items[i] = base64.StdEncoding.EncodeToString(b) // random: compresses no better than real text would
	}
	before, err := db.size(ctx)
	if err != nil {
		return 0, err
	}
	for i := 0; i < steps; i++ {
		b := make([]byte, 24)
		_, _ = rand.Read(b)
		items[i%len(items)] = base64.StdEncoding.EncodeToString(b) + items[i%len(items)][32:]
		doc := map[string]any{"step": i}
		if nested {
			doc["items"] = items
		} else {
			for j, it := range items {
				doc[fmt.Sprintf("item_%02d", j)] = it
			}
		}
		state, err := json.Marshal(doc)
		if err != nil {
			return 0, err
		}
		r, _, err := runs.Commit(ctx, Tenant, lr.id, run.CommitRequest{ExpectedRevision: lr.rev, Lease: lr.lease,
			State: state, NextStep: "step", Event: run.EventInput{EventType: "step.completed", StepID: "step"}})
		if err != nil {
			return 0, err
		}
		lr.rev = r.StateRevision
	}
	after, err := db.size(ctx)
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(steps), nil
}

// scalePGLoad fills runs and run_events with generate_series. In the
// healthy tenant one run in every activeEvery is active: alternately
// running with a live lease (its worker is at it) and suspended waiting
// for an approval that expires in a day (a timed wake-up, written below);
// the rest completed, finished over the last 30 days, each with two
// events. The recovering tenant holds as many running runs with a free
// lease as the healthy one holds active runs.
const scalePGLoad = `
INSERT INTO runs (tenant_id, run_id, workflow_name, workflow_version, state_schema_version,
	status, status_reason, next_step, state, state_revision, created_at, updated_at, finished_at,
	lease_owner, lease_epoch, lease_expires_at)
SELECT 'scale', 'run-' || lpad(g::text, 8, '0'), 'scale-wf', '1', 1,
	s.status, '', 'step-2', '{"order":12345,"note":"a small state of a finished run","_memento":{"budget":{},"spent":{"steps":1,"tokens":0,"cost_micros":0,"wall_ms":3}}}'::jsonb,
	2, t.at, t.at + interval '1 minute', CASE WHEN s.status = 'completed' THEN t.at + interval '1 minute' END,
	CASE WHEN s.status = 'running' THEN 'scale-worker' ELSE '' END, CASE WHEN s.status = 'running' THEN 1 ELSE 0 END,
	CASE WHEN s.status = 'running' THEN now() + interval '1 day' END
FROM generate_series(1, $1::int) g,
	LATERAL (SELECT CASE WHEN g % $2::int = 0 THEN CASE WHEN (g / $2::int) % 2 = 0 THEN 'running' ELSE 'suspended' END
		ELSE 'completed' END AS status) s,
	LATERAL (SELECT now() - interval '31 days' + (g::float8 / $1::int) * interval '30 days' AS at) t;
`

const scalePGDueLoad = `
INSERT INTO runs (tenant_id, run_id, workflow_name, workflow_version, state_schema_version,
	status, status_reason, next_step, state, state_revision, created_at, updated_at)
SELECT 'scale-due', 'run-' || lpad(g::text, 8, '0'), 'scale-wf', '1', 1,
	'running', '', 'step-2', '{"order":12345,"note":"a small state of a running run","_memento":{"budget":{},"spent":{"steps":1,"tokens":0,"cost_micros":0,"wall_ms":3}}}'::jsonb,
	2, now() - interval '1 hour', now() - interval '1 hour'
FROM generate_series(1, $1::int) g`

// scalePGWakeups drops the wake-up each loaded suspended run's insert
// wrote (nothing happened that it waits for, as a first poll would find)
// and arms the expiry of the approval it waits for, a day from now.
const scalePGWakeups = `
WITH d AS (DELETE FROM run_wakeups)
INSERT INTO run_wakeups (tenant_id, run_id, wake_at)
SELECT tenant_id, run_id, now() + interval '1 day' FROM runs WHERE tenant_id = 'scale' AND status = 'suspended'`

const scalePGEvents = `
INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt, payload,
	state, next_step, status, state_schema_version, created_at)
SELECT r.tenant_id, r.run_id, e.seq, CASE e.seq WHEN 1 THEN 'run.created' ELSE 'step.completed' END,
	CASE e.seq WHEN 1 THEN '' ELSE 'step-1' END, 0, '{}'::jsonb, r.state, r.next_step,
	CASE e.seq WHEN 1 THEN 'running' ELSE r.status END, 1, r.created_at
FROM runs r, generate_series(1, 2) AS e(seq)
WHERE r.tenant_id IN ('scale', 'scale-due')`

func openScalePostgres(ctx context.Context, rawURL string) (*scaleDB, error) {
	admin, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL %s: %w", redactURL(rawURL), err)
	}
	schema := "memento_scale_" + randHex(6)
	drop := func() {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = admin.Exec(c, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		_ = admin.Close(c)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		drop()
		return nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	u, err := withParam(rawURL, "search_path", schema)
	if err != nil {
		drop()
		return nil, err
	}
	db, err := postgres.Open(ctx, u)
	if err != nil {
		drop()
		return nil, err
	}
	pool := db.Pool()
	return &scaleDB{
		backend: "postgres", store: db, ops: db,
		load: func(ctx context.Context, n, every int) error {
			// The load is setup, not a measured statement: at 1M runs on a
			// busy machine it outlasts the pool's statement_timeout.
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, "SET statement_timeout = 0"); err != nil {
				return err
			}
			for _, q := range []struct {
				sql  string
				args []any
			}{
				{scalePGLoad, []any{n, every}},
				{scalePGDueLoad, []any{n / every}},
				{scalePGEvents, nil},
				{scalePGWakeups, nil},
			} {
				if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
					return err
				}
			}
			for _, t := range []string{"runs", "run_events", "run_wakeups"} {
				if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+t); err != nil {
					return err
				}
			}
			// Let the load's checkpoint happen now rather than during the
			// measurements (it needs the pg_checkpoint role: best effort).
			_, _ = conn.Exec(ctx, "CHECKPOINT")
			_, err = conn.Exec(ctx, "RESET statement_timeout")
			return err
		},
		size: func(ctx context.Context) (int64, error) {
			var n int64
			err := pool.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
				FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
				WHERE ns.nspname = current_schema() AND c.relkind = 'r' AND c.relname <> 'runs'`).Scan(&n)
			return n, err
		},
		close: func() { db.Close(); drop() },
	}, nil
}

func openScaleSQLite(ctx context.Context, dir string) (*scaleDB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "memento-scale-"+randHex(6)+".db")
	remove := func() {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(path + suffix)
		}
	}
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		remove()
		return nil, err
	}
	w := db.SQL()
	return &scaleDB{
		backend: "sqlite", store: db, ops: db,
		load: func(ctx context.Context, n, every int) error {
			if err := loadSQLite(ctx, w, n, every); err != nil {
				return err
			}
			// Fold the load into the file now rather than during the measurements.
			_, err := w.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
			return err
		},
		size: func(ctx context.Context) (int64, error) {
			var pages, free, size int64
			if err := w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
				return 0, err
			}
			if err := w.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free); err != nil {
				return 0, err
			}
			if err := w.QueryRowContext(ctx, "PRAGMA page_size").Scan(&size); err != nil {
				return 0, err
			}
			return (pages - free) * size, nil
		},
		close: func() { _ = db.Close(); remove() },
	}, nil
}

// loadSQLite inserts what scalePGLoad, scalePGDueLoad and scalePGWakeups
// do, in one transaction with prepared statements.
func loadSQLite(ctx context.Context, w *sql.DB, n, every int) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	insRun, err := tx.PrepareContext(ctx, `INSERT INTO runs (tenant_id, run_id, workflow_name, workflow_version,
		state_schema_version, status, status_reason, next_step, state, state_revision, created_at, updated_at, finished_at,
		lease_owner, lease_epoch, lease_expires_at)
		VALUES (?, ?, 'scale-wf', '1', 1, ?, '', 'step-2', ?, 2, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	insEv, err := tx.PrepareContext(ctx, `INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id,
		attempt, payload, state, next_step, status, state_schema_version, created_at)
		VALUES (?, ?, ?, ?, ?, 0, '{}', ?, 'step-2', ?, 1, ?)`)
	if err != nil {
		return err
	}
	insWake, err := tx.PrepareContext(ctx, `INSERT INTO run_wakeups (tenant_id, run_id, wake_at) VALUES ('scale', ?, ?)`)
	if err != nil {
		return err
	}
	// As on PostgreSQL: the loaded suspended runs were woken by nothing.
	// The triggers write wake-ups as rows are inserted; they are dropped
	// before the timed ones are armed.
	var wakes []string
	const state = `{"order":12345,"note":"a small state of a finished run","_memento":{"budget":{},"spent":{"steps":1,"tokens":0,"cost_micros":0,"wall_ms":3}}}`
	now := time.Now()
	start := now.Add(-31 * 24 * time.Hour).UnixMicro()
	span := (30 * 24 * time.Hour).Microseconds()
	tomorrow := now.Add(24 * time.Hour).UnixMicro()
	for g := 1; g <= n; g++ {
		status := "completed"
		if g%every == 0 {
			status = "suspended"
			if (g/every)%2 == 0 {
				status = "running"
			}
		}
		at := start + int64(float64(g)/float64(n)*float64(span))
		upd := at + time.Minute.Microseconds()
		var fin, exp any
		owner, epoch := "", 0
		switch status {
		case "completed":
			fin = upd
		case "running":
			owner, epoch, exp = "scale-worker", 1, tomorrow
		}
		id := fmt.Sprintf("run-%08d", g)
		if _, err := insRun.ExecContext(ctx, scaleTenant, id, status, state, at, upd, fin, owner, epoch, exp); err != nil {
			return err
		}
		if _, err := insEv.ExecContext(ctx, scaleTenant, id, 1, "run.created", "", state, "running", at); err != nil {
			return err
		}
		if _, err := insEv.ExecContext(ctx, scaleTenant, id, 2, "step.completed", "step-1", state, status, upd); err != nil {
			return err
		}
		if status == "suspended" {
			wakes = append(wakes, id)
		}
	}
	hourAgo := now.Add(-time.Hour).UnixMicro()
	for g := 1; g <= n/every; g++ {
		id := fmt.Sprintf("run-%08d", g)
		if _, err := insRun.ExecContext(ctx, scaleDueTenant, id, "running", state, hourAgo, hourAgo, nil, "", 0, nil); err != nil {
			return err
		}
		for seq := 1; seq <= 2; seq++ {
			if _, err := insEv.ExecContext(ctx, scaleDueTenant, id, seq, "step.completed", "step-1", state, "running", hourAgo); err != nil {
				return err
			}
		}
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM run_wakeups"); err != nil {
		return err
	}
	for _, id := range wakes {
		if _, err := insWake.ExecContext(ctx, id, tomorrow); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// WriteJSON writes the report as indented JSON.
func (r ScaleReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes one line per backend and size, each figure beside its
// ratio to the backend's first size.
func (r ScaleReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "runs loaded per size, 1 in %d active (half running with a live lease, half suspended on a wake-up due in a day);\n"+
		"due poll: a tenant of as many running runs with a free lease; retention batch %d runs;\n"+
		"paired: median over rounds of the round's ratio to the first size (rounds are side by side);\n"+
		"resume of a run with %d events; storage of %d steps of a %d-byte state; medians of %d interleaved rounds\n\n",
		r.ActiveEvery, r.RetainLimit, r.ResumeEvents, r.StorageSteps, r.StateBytes, r.Rounds)
	fmt.Fprintf(w, "%-8s %9s %6s | %9s %6s %6s %4s | %9s %6s %10s %6s | %10s %6s | %9s %6s %6s | %9s %6s\n",
		"backend", "runs", "active", "poll ms", "x", "paired", "got", "due ms", "got", "us/due run", "x", "retain ms", "x",
		"commit/s", "x", "paired", "resume ms", "x")
	base := map[string]ScaleRow{}
	for _, row := range r.Rows {
		b, ok := base[row.Backend]
		if !ok {
			base[row.Backend], b = row, row
		}
		ratio := func(v, b float64) string {
			if b == 0 {
				return "-"
			}
			return strconv.FormatFloat(v/b, 'f', 2, 64)
		}
		fmt.Fprintf(w, "%-8s %9d %6d | %9.3f %6s %6.2f %4d | %9.3f %6d %10.2f %6s | %10.2f %6s | %9.0f %6s %6.2f | %9.1f %6s\n",
			row.Backend, row.Runs, row.Active, row.PollMS, ratio(row.PollMS, b.PollMS), row.PollPaired, row.PollReturned,
			row.DuePollMS, row.DuePollReturned, row.DuePollPerRunUS, ratio(row.DuePollPerRunUS, b.DuePollPerRunUS),
			row.RetainBatchMS, ratio(row.RetainBatchMS, b.RetainBatchMS),
			row.CommitsPerSec, ratio(row.CommitsPerSec, b.CommitsPerSec), row.CommitsPaired,
			row.ResumeMS, ratio(row.ResumeMS, b.ResumeMS))
	}
	fmt.Fprintln(w)
	for _, row := range r.Rows {
		if row.BytesPerEvent > 0 {
			fmt.Fprintf(w, "%s: bytes per event of a %d-byte state, against a full copy per event (%d bytes): %.0f (%.1fx below) when a step changes one of 100 top-level members; %.0f (%.1fx below) when it changes one element of a 100-element top-level array\n",
				row.Backend, r.StateBytes, r.StateBytes, row.BytesPerEvent, float64(r.StateBytes)/row.BytesPerEvent,
				row.BytesPerEventNested, float64(r.StateBytes)/row.BytesPerEventNested)
		}

	}
}
