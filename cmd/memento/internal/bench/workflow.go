package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow"
)

// TargetWorkflow is the workflow SDK on PostgreSQL in reports.
const TargetWorkflow = "memento-workflow"

// WorkflowConfig configures RunWorkflow: workflows of no-op steps through
// the workflow SDK on PostgreSQL, beside DBOS doing the same.
type WorkflowConfig struct {
	PostgresURL string
	// Steps per workflow (0: DefaultPeerSteps, the peer's count too).
	Steps       int
	Duration    time.Duration
	Warmup      time.Duration
	Rounds      int
	Concurrency []int
	Peer        PeerConfig
	Progress    io.Writer
}

// WorkflowReport is the result of RunWorkflow.
type WorkflowReport struct {
	Postgres         string        `json:"postgres"`
	StepsPerWorkflow int           `json:"steps_per_workflow"`
	Duration         time.Duration `json:"duration_ns"`
	Rounds           int           `json:"rounds"`
	Concurrency      []int         `json:"concurrency"`
	NumCPU           int           `json:"num_cpu"`
	GoVersion        string        `json:"go_version"`
	Peer             *PeerInfo     `json:"peer,omitempty"`
	Results          []Measurement `json:"results"`
	Ratios           []Ratio       `json:"ratios"`
}

// RunWorkflow measures steps per second of whole workflows (start, every
// step committed, completion) at each concurrency, each worker driving one
// workflow after another, and the same for the DBOS peer in the same run.
func RunWorkflow(ctx context.Context, cfg WorkflowConfig) (rep WorkflowReport, err error) {
	cc := CommitConfig{PostgresURL: cfg.PostgresURL, Duration: cfg.Duration, Warmup: cfg.Warmup, Rounds: cfg.Rounds, Concurrency: cfg.Concurrency, Progress: cfg.Progress}
	if err := cc.fill(); err != nil {
		return rep, fmt.Errorf("bench workflow: %w", err)
	}
	if cfg.Steps <= 0 {
		cfg.Steps = DefaultPeerSteps
	}
	cfg.Peer.Steps = cfg.Steps
	rep = WorkflowReport{Postgres: redactURL(cc.PostgresURL), StepsPerWorkflow: cfg.Steps, Duration: cc.Duration, Rounds: cc.Rounds,
		Concurrency: cc.Concurrency, NumCPU: runtime.NumCPU(), GoVersion: runtime.Version()}
	pg, err := openPostgres(ctx, cc.PostgresURL, max(slices.Max(cc.Concurrency), 4))
	if err != nil {
		return rep, fmt.Errorf("bench workflow: %w", err)
	}
	defer pg.close()
	eng := workflow.New(pg.svc, toolop.NewService(pg.db, nil), workflow.Options{Tenant: Tenant, Owner: "bench-worker", LeaseTTL: time.Minute})
	steps := make([]workflow.Step, cfg.Steps)
	for i := range steps {
		steps[i] = workflow.Step{Name: "step-" + strconv.Itoa(i+1), Run: func(context.Context, *workflow.StepContext) error { return nil }}
	}
	if err := eng.Register(workflow.Workflow{Name: "bench-noop", Version: "1", Steps: steps}); err != nil {
		return rep, fmt.Errorf("bench workflow: %w", err)
	}
	var peer *peerRunner
	if !cfg.Peer.Skip {
		if peer, err = preparePeer(ctx, cfg.Peer, cc.Progress); err != nil {
			return rep, fmt.Errorf("bench workflow: %w", err)
		}
		defer peer.close()
	}
	var seq atomic.Int64
	rounds := map[string][]float64{}
	key := func(name string, c int) string { return name + "@" + strconv.Itoa(c) }
	for r := 0; r < cc.Rounds; r++ {
		for _, c := range cc.Concurrency {
			v, err := measureWorkflows(ctx, eng, &seq, c, cfg.Steps, cc.Warmup, cc.Duration)
			if err != nil {
				return rep, fmt.Errorf("bench workflow: concurrency %d: %w", c, err)
			}
			rounds[key(TargetWorkflow, c)] = append(rounds[key(TargetWorkflow, c)], v)
			fmt.Fprintf(cc.Progress, "round %d/%d  %-16s c=%-3d %10.0f steps/s\n", r+1, cc.Rounds, TargetWorkflow, c, v)
		}
		if peer != nil {
			pr, err := peer.run(ctx, cc.PostgresURL, cc.Concurrency, cc.Warmup, cc.Duration)
			if err != nil {
				return rep, fmt.Errorf("bench workflow: %w", err)
			}
			rep.Peer = &pr.info
			for _, c := range cc.Concurrency {
				v, ok := pr.stepsPerSec[c]
				if !ok {
					return rep, fmt.Errorf("bench workflow: the peer reported no result at concurrency %d", c)
				}
				rounds[key(TargetDBOS, c)] = append(rounds[key(TargetDBOS, c)], v)
				fmt.Fprintf(cc.Progress, "round %d/%d  %-16s c=%-3d %10.0f steps/s\n", r+1, cc.Rounds, TargetDBOS, c, v)
			}
		}
	}
	names := []string{TargetWorkflow}
	if peer != nil {
		names = append(names, TargetDBOS)
	}
	for _, n := range names {
		for _, c := range cc.Concurrency {
			rs := rounds[key(n, c)]
			rep.Results = append(rep.Results, Measurement{Target: n, Concurrency: c, OpsPerSec: Median(rs), Rounds: rs})
		}
	}
	if peer != nil {
		for _, c := range cc.Concurrency {
			a, b := rounds[key(TargetWorkflow, c)], rounds[key(TargetDBOS, c)]
			per := make([]float64, len(a))
			for i := range a {
				if b[i] > 0 {
					per[i] = a[i] / b[i]
				}
			}
			rep.Ratios = append(rep.Ratios, Ratio{Name: "memento workflow/dbos", Concurrency: c, Value: Median(per), Rounds: per, Goal: 2})
		}
	}
	return rep, nil
}

// measureWorkflows runs c workers, each starting and driving one workflow
// after another; a workflow counts (with all its steps) if it completed
// within the measured window, as the peer counts.
func measureWorkflows(ctx context.Context, eng *workflow.Engine, seq *atomic.Int64, c, steps int, warmup, d time.Duration) (float64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	from := time.Now().Add(warmup)
	until := from.Add(d)
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < c; w++ {
		wg.Go(func() {
			for ctx.Err() == nil {
				id := "wf-" + strconv.FormatInt(seq.Add(1), 10) + "-" + randHex(3)
				r, err := eng.Execute(ctx, "bench-noop", id, nil)
				if err != nil {
					cancel(err)
					return
				}
				if r.Status != run.StatusCompleted {
					cancel(errors.New("workflow " + id + " ended " + string(r.Status) + ": " + r.StatusReason))
					return
				}
				now := time.Now()
				if now.After(until) {
					return
				}
				if !now.Before(from) {
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil {
		return 0, cause
	}
	return float64(done.Load()*int64(steps)) / d.Seconds(), nil
}

// WriteTable prints the report for people.
func (r WorkflowReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "workflows of %d no-op steps on PostgreSQL, %s x %d rounds (median), %d CPUs, %s\n", r.StepsPerWorkflow, r.Duration, r.Rounds, r.NumCPU, r.GoVersion)
	if r.Peer != nil {
		fmt.Fprintf(w, "peer: %s %s\n", r.Peer.Name, r.Peer.Version)
	}
	fmt.Fprintf(w, "%-18s %6s %12s\n", "target", "conc", "steps/s")
	for _, m := range r.Results {
		fmt.Fprintf(w, "%-18s %6d %12.0f\n", m.Target, m.Concurrency, m.OpsPerSec)
	}
	for _, ra := range r.Ratios {
		verdict := "meets"
		if ra.Value < ra.Goal {
			verdict = "below"
		}
		fmt.Fprintf(w, "%-24s c=%-3d %6.2fx  (goal %.1fx: %s)\n", ra.Name, ra.Concurrency, ra.Value, ra.Goal, verdict)
	}
}
