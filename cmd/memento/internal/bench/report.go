package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

var targetLabels = map[string]string{
	TargetPostgresFloor:  "postgres floor (bare pgx, 1 statement)",
	TargetPostgresEngine: "postgres engine (run.Service)",
	TargetPostgresHTTP:   "postgres http (client→server→db)",
	TargetSQLiteFloor:    "sqlite floor (same driver, same statements)",
	TargetSQLiteEngine:   "sqlite engine (run.Service)",
	TargetDBOS:           "dbos transact (steps)",
}

// WriteTable prints the measurements and ratios as aligned text.
func (r CommitReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "step commits per second: median of %d rounds; per round each target runs %s in turns of %s (after %s warmup); %d CPUs, %s\n",
		r.Rounds, r.Duration, r.Slice, r.Warmup, r.NumCPU, r.GoVersion)
	fmt.Fprintf(w, "postgres: %s (pool_max_conns %d)\n", r.Postgres, r.PoolMaxConns)
	if r.Peer != nil {
		fmt.Fprintf(w, "peer: %s %s, workflows of %d no-op steps\n", r.Peer.Name, r.Peer.Version, r.Peer.StepsPerWorkflow)
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"target"}
	for _, c := range r.Concurrency {
		head = append(head, num("c="+strconv.Itoa(c)))
	}
	head = append(head, "rounds")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	var order []string
	seen := map[string]bool{}
	for _, m := range r.Results {
		if !seen[m.Target] {
			seen[m.Target] = true
			order = append(order, m.Target)
		}
	}
	for _, t := range order {
		label := targetLabels[t]
		if label == "" {
			label = t
		}
		row := []string{label}
		var spread []string
		for _, c := range r.Concurrency {
			v, ok := r.Lookup(t, c)
			if !ok {
				row = append(row, num("-"))
				continue
			}
			row = append(row, num(fmt.Sprintf("%.0f", v)))
			for _, m := range r.Results {
				if m.Target == t && m.Concurrency == c {
					spread = append(spread, spreadOf(m.Rounds))
				}
			}
		}
		row = append(row, strings.Join(spread, " "))
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head[0] = "ratio"
	head[len(head)-1] = "goal"
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	var names []string
	seen = map[string]bool{}
	for _, x := range r.Ratios {
		if !seen[x.Name] {
			seen[x.Name] = true
			names = append(names, x.Name)
		}
	}
	for _, n := range names {
		row := []string{n}
		goals := map[float64][]string{}
		var goalOrder []float64
		for _, c := range r.Concurrency {
			x, ok := r.RatioOf(n, c)
			if !ok {
				row = append(row, num("-"))
				continue
			}
			cell := fmt.Sprintf("%.2f", x.Value)
			if x.Goal > 0 {
				if x.Value < x.Goal {
					cell = "!" + cell
				}
				if _, ok := goals[x.Goal]; !ok {
					goalOrder = append(goalOrder, x.Goal)
				}
				goals[x.Goal] = append(goals[x.Goal], "c="+strconv.Itoa(c))
			}
			row = append(row, num(cell))
		}
		var gs []string
		for _, g := range goalOrder {
			txt := fmt.Sprintf("≥%.2f", g)
			if len(goals[g]) < len(r.Concurrency) {
				txt += " at " + strings.Join(goals[g], ",")
			}
			gs = append(gs, txt)
		}
		row = append(row, strings.Join(gs, "; "))
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintln(w, "(a ratio is the median of its per-round ratios; ! marks one below its goal;")
	fmt.Fprintln(w, " ± is half the spread of the rounds, relative to their median)")
}

// num right-aligns a number in its column.
func num(s string) string { return fmt.Sprintf("%10s", s) }

// spreadOf shows how far the rounds lie apart: (max-min)/median in percent.
func spreadOf(rounds []float64) string {
	if len(rounds) < 2 {
		return ""
	}
	lo, hi := rounds[0], rounds[0]
	for _, v := range rounds {
		lo, hi = min(lo, v), max(hi, v)
	}
	m := Median(rounds)
	if m == 0 {
		return ""
	}
	return fmt.Sprintf("±%.0f%%", 50*(hi-lo)/m)
}
