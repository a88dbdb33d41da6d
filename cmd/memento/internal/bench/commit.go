package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a commit benchmark.
const (
	DefaultDuration = 5 * time.Second
	DefaultRounds   = 3
	DefaultSlice    = 500 * time.Millisecond
	// Tenant owns every run the benchmark creates.
	Tenant = "bench"
)

// DefaultConcurrency are the numbers of concurrent committers measured.
var DefaultConcurrency = []int{1, 16}

// Target names, as they appear in reports.
const (
	TargetPostgresFloor  = "postgres-floor"
	TargetPostgresEngine = "postgres-engine"
	TargetPostgresHTTP   = "postgres-http"
	TargetSQLiteFloor    = "sqlite-floor"
	TargetSQLiteEngine   = "sqlite-engine"
	TargetDBOS           = "dbos"
)

// CommitConfig configures RunCommit.
type CommitConfig struct {
	// PostgresURL is the database of the PostgreSQL targets and the peer.
	// The benchmark works in a schema of its own, dropped at the end.
	PostgresURL string
	// Duration is how long each target is measured at each concurrency in
	// each round, in turns of Slice (0: DefaultDuration).
	Duration time.Duration
	// Warmup runs each target, unmeasured, before its turns at each
	// concurrency in each round (0: Duration/10; negative: none).
	Warmup time.Duration
	// Slice is how long one target runs before the next takes its turn
	// within a measurement (0: DefaultSlice).
	Slice time.Duration
	// Rounds repeats every measurement and reports the median (0: DefaultRounds).
	Rounds int
	// Concurrency lists the numbers of concurrent committers (nil: 1 and 16).
	Concurrency []int
	// SkipHTTP and SkipSQLite leave those targets out.
	SkipHTTP   bool
	SkipSQLite bool
	// Peer runs DBOS Transact beside Memento; see PeerConfig.
	Peer PeerConfig
	// Progress receives a line per measurement (nil: nothing).
	Progress io.Writer
}

// Measurement is one target at one concurrency.
type Measurement struct {
	Target      string `json:"target"`
	Concurrency int    `json:"concurrency"`
	// OpsPerSec is the median over rounds of step commits per second.
	OpsPerSec float64 `json:"ops_per_sec"`
	// Rounds holds each round's ops per second, in order.
	Rounds []float64 `json:"rounds"`
}

// Ratio compares two targets at one concurrency, from the same run.
type Ratio struct {
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency"`
	// Value is the median over rounds of the ratio within each round.
	Value  float64   `json:"value"`
	Rounds []float64 `json:"rounds"`
	// Goal is the ratio the issue asks for (0: none).
	Goal float64 `json:"goal,omitempty"`
}

// CommitReport is the result of RunCommit.
type CommitReport struct {
	Postgres     string        `json:"postgres"`
	PoolMaxConns int           `json:"pool_max_conns"`
	Duration     time.Duration `json:"duration_ns"`
	Warmup       time.Duration `json:"warmup_ns"`
	Slice        time.Duration `json:"slice_ns"`
	Rounds       int           `json:"rounds"`
	Concurrency  []int         `json:"concurrency"`
	NumCPU       int           `json:"num_cpu"`
	GoVersion    string        `json:"go_version"`
	Peer         *PeerInfo     `json:"peer,omitempty"`
	Results      []Measurement `json:"results"`
	Ratios       []Ratio       `json:"ratios"`
}

// stepper commits the next step of the one run it owns. A stepper is used
// by one goroutine at a time.
type stepper func(ctx context.Context) error

// sliceFunc measures one turn of about d: the operations completed and the
// time they took.
type sliceFunc func(ctx context.Context, d time.Duration) (int64, time.Duration, error)

// target is something whose step commits are measured. It has one of:
type target struct {
	name string
	// prepare makes n runs, each with its lease held, and returns one stepper
	// per run. Nothing it does is timed.
	prepare func(ctx context.Context, n int) ([]stepper, error)
	// open readies c concurrent workers measured elsewhere (the DBOS peer).
	open func(ctx context.Context, c int) (sliceFunc, error)
}

// slicer readies the target at concurrency c.
func (t target) slicer(ctx context.Context, c int) (sliceFunc, error) {
	if t.open != nil {
		return t.open(ctx, c)
	}
	ss, err := t.prepare(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("prepare %d runs: %w", c, err)
	}
	return func(ctx context.Context, d time.Duration) (int64, time.Duration, error) {
		return measure(ctx, ss, d)
	}, nil
}

func (c *CommitConfig) fill() error {
	if c.PostgresURL == "" {
		return errors.New("a PostgreSQL URL is required")
	}
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Warmup == 0 {
		c.Warmup = c.Duration / 10
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	}
	if c.Slice <= 0 {
		c.Slice = DefaultSlice
	}
	if c.Rounds <= 0 {
		c.Rounds = DefaultRounds
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = DefaultConcurrency
	}
	for _, n := range c.Concurrency {
		if n < 1 {
			return fmt.Errorf("concurrency %d: must be at least 1", n)
		}
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return nil
}

// RunCommit measures step commits per second of every target at every
// concurrency, interleaving targets within each round, and the ratios
// between them. It leaves no schema, file or process behind.
func RunCommit(ctx context.Context, cfg CommitConfig) (rep CommitReport, err error) {
	if err := cfg.fill(); err != nil {
		return rep, fmt.Errorf("bench commit: %w", err)
	}
	pool := max(slices.Max(cfg.Concurrency), 4)
	rep = CommitReport{
		Postgres: redactURL(cfg.PostgresURL), PoolMaxConns: pool,
		Duration: cfg.Duration, Warmup: cfg.Warmup, Slice: cfg.Slice, Rounds: cfg.Rounds,
		Concurrency: cfg.Concurrency, NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(),
	}

	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()

	pg, err := openPostgres(ctx, cfg.PostgresURL, pool)
	if err != nil {
		return rep, fmt.Errorf("bench commit: %w", err)
	}
	closers = append(closers, pg.close)
	targets := []target{pg.floor(), pg.engine()}
	if !cfg.SkipHTTP {
		h, err := startHTTP(ctx, pg.url)
		if err != nil {
			return rep, fmt.Errorf("bench commit: %w", err)
		}
		closers = append(closers, h.close)
		targets = append(targets, h.target(TargetPostgresHTTP))
	}
	if !cfg.SkipSQLite {
		sq, err := openSQLite(ctx)
		if err != nil {
			return rep, fmt.Errorf("bench commit: %w", err)
		}
		closers = append(closers, sq.close)
		targets = append(targets, sq.floor(), sq.engine())
	}
	if !cfg.Peer.Skip {
		peer, err := preparePeer(ctx, cfg.Peer, cfg.Progress)
		if err != nil {
			return rep, fmt.Errorf("bench commit: %w", err)
		}
		closers = append(closers, peer.close)
		pp, err := peer.start(ctx, cfg.PostgresURL)
		if err != nil {
			return rep, fmt.Errorf("bench commit: %w", err)
		}
		closers = append(closers, pp.stop)
		rep.Peer = &pp.info
		targets = append(targets, pp.target())
	}

	rounds := map[string][]float64{} // key: target@concurrency
	key := func(name string, c int) string { return name + "@" + strconv.Itoa(c) }
	for r := 0; r < cfg.Rounds; r++ {
		for _, c := range cfg.Concurrency {
			res, err := measureInterleaved(ctx, targets, c, cfg.Warmup, cfg.Duration, cfg.Slice)
			if err != nil {
				return rep, fmt.Errorf("bench commit: %w", err)
			}
			for i, t := range targets {
				rounds[key(t.name, c)] = append(rounds[key(t.name, c)], res[i])
				unit := "commits/s"
				if t.name == TargetDBOS {
					unit = "steps/s"
				}
				fmt.Fprintf(cfg.Progress, "round %d/%d  %-16s c=%-3d %10.0f %s\n", r+1, cfg.Rounds, t.name, c, res[i], unit)
			}
		}
	}

	names := make([]string, 0, len(targets))
	for _, t := range targets {
		names = append(names, t.name)
	}
	for _, n := range names {
		for _, c := range cfg.Concurrency {
			rs := rounds[key(n, c)]
			rep.Results = append(rep.Results, Measurement{Target: n, Concurrency: c, OpsPerSec: Median(rs), Rounds: rs})
		}
	}
	// A ratio pairs the two targets round by round (measured minutes apart
	// at most, so drift of the machine cancels out) and takes the median.
	ratio := func(name, num, den string, goal func(c int) float64) {
		for _, c := range cfg.Concurrency {
			a, b := rounds[key(num, c)], rounds[key(den, c)]
			if len(a) == 0 || len(a) != len(b) {
				continue
			}
			per := make([]float64, len(a))
			for i := range a {
				if b[i] == 0 {
					return
				}
				per[i] = a[i] / b[i]
			}
			rep.Ratios = append(rep.Ratios, Ratio{Name: name, Concurrency: c, Value: Median(per), Rounds: per, Goal: goal(c)})
		}
	}
	none := func(int) float64 { return 0 }
	ratio("engine/floor", TargetPostgresEngine, TargetPostgresFloor, func(int) float64 { return 0.85 })
	ratio("http/floor", TargetPostgresHTTP, TargetPostgresFloor, func(c int) float64 {
		if c >= 16 {
			return 0.6
		}
		return 0
	})
	ratio("sqlite engine/sqlite floor", TargetSQLiteEngine, TargetSQLiteFloor, none)
	ratio("memento engine/dbos", TargetPostgresEngine, TargetDBOS, none)
	ratio("memento http/dbos", TargetPostgresHTTP, TargetDBOS, none)
	return rep, nil
}

// measureInterleaved prepares c fresh runs per target, warms each target
// up, then measures them in turns of one slice each until every target has
// had d: on a shared machine, load that comes and goes then weighs on all
// targets alike. It returns commits per second per target, in order.
func measureInterleaved(ctx context.Context, targets []target, c int, warmup, d, slice time.Duration) ([]float64, error) {
	slicers := make([]sliceFunc, len(targets))
	for i, t := range targets {
		sf, err := t.slicer(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("%s at concurrency %d: %w", t.name, c, err)
		}
		slicers[i] = sf
		if warmup > 0 {
			if _, _, err := sf(ctx, warmup); err != nil {
				return nil, fmt.Errorf("%s at concurrency %d: %w", t.name, c, err)
			}
		}
	}
	ops := make([]int64, len(targets))
	took := make([]time.Duration, len(targets))
	order := make([]int, len(targets))
	for i := range order {
		order[i] = i
	}
	// A target is done when less than a tenth of a slice is left: so short
	// a turn would measure mostly the drain of commits in flight.
	left := func(i int) time.Duration {
		if l := d - took[i]; l >= slice/10 {
			return l
		}
		return 0
	}
	for turn := 0; slices.ContainsFunc(order, func(i int) bool { return left(i) > 0 }); turn++ {
		// Rotate who goes first, so that no target always follows the same one.
		first := turn % len(order)
		for k := range order {
			i := order[(first+k)%len(order)]
			sl := min(slice, left(i))
			if sl <= 0 {
				continue
			}
			n, el, err := slicers[i](ctx, sl)
			if err != nil {
				return nil, fmt.Errorf("%s at concurrency %d: %w", targets[i].name, c, err)
			}
			ops[i] += n
			took[i] += el
		}
	}
	out := make([]float64, len(targets))
	for i := range out {
		out[i] = float64(ops[i]) / took[i].Seconds()
	}
	return out, nil
}

// measure runs every stepper in its own goroutine, back to back, for d, and
// counts the commits completed within d; commits in flight at d finish
// uncounted before it returns. It returns that count and d.
func measure(ctx context.Context, steppers []stepper, d time.Duration) (int64, time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	until := time.Now().Add(d)
	var ops atomic.Int64
	var wg sync.WaitGroup
	for _, s := range steppers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := s(ctx); err != nil {
					cancel(err)
					return
				}
				if !time.Now().Before(until) {
					return
				}
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	// Only a failed stepper or the caller cancels before the deferred cancel.
	if cause := context.Cause(ctx); cause != nil {
		return 0, 0, cause
	}
	return ops.Load(), d, nil
}

// stepInput is the work of step i of a run: the whole new state (about 130
// bytes of JSON, a typical small agent state), the event payload and the
// step ids. Every target commits exactly these bytes.
func stepInput(i int64) (state, payload []byte, stepID, next string) {
	n := strconv.FormatInt(i, 10)
	state = []byte(`{"step":` + n + `,"messages":3,"budget":{"tokens":12000,"usd":0.42},"last_tool":"search","cursor":"c-` + n + `","notes":"benchmark state"}`)
	payload = []byte(`{"tool":"search","ok":true,"n":` + n + `}`)
	return state, payload, "step-" + n, "step-" + strconv.FormatInt(i+1, 10)
}

// EventType is the type of every event the benchmark commits.
const EventType = "step.completed"

// Median returns the median of xs (0 for none).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// withPoolSize sets pgxpool's pool_max_conns to n unless the URL sets it,
// so that every PostgreSQL target (floor, engine, server) has a connection
// per committer, and none is measured waiting for a pool slot.
func withPoolSize(raw string, n int) (string, error) {
	if strings.Contains(raw, "pool_max_conns") {
		return raw, nil
	}
	if !strings.Contains(raw, "://") {
		return raw + " pool_max_conns=" + strconv.Itoa(n), nil // key=value DSN
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse PostgreSQL URL: %w", err)
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(n))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// redactURL hides a password in a URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxx")
	}
	return u.String()
}

// WriteJSON writes the report as indented JSON.
func (r CommitReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Lookup returns the median ops per second of a target at a concurrency.
func (r CommitReport) Lookup(target string, c int) (float64, bool) {
	for _, m := range r.Results {
		if m.Target == target && m.Concurrency == c {
			return m.OpsPerSec, true
		}
	}
	return 0, false
}

// RatioOf returns a named ratio at a concurrency.
func (r CommitReport) RatioOf(name string, c int) (Ratio, bool) {
	for _, x := range r.Ratios {
		if x.Name == name && x.Concurrency == c {
			return x, true
		}
	}
	return Ratio{}, false
}
