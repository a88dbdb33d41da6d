package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/session"
	mredis "github.com/mementohq/memento/store/redis"
)

// Session operations and the targets each is measured on.
const (
	OpGet    = "get"
	OpAppend = "append"
	OpPatch  = "patch"

	TargetMemento = "memento"
	TargetFloor   = "floor"

	// SessionRatioGoal is the share of the raw Redis floor the issue asks for.
	SessionRatioGoal = 0.7
	// AppendRatioGoal is the goal for append against the hand-written
	// pipeline floor (RPUSH + LTRIM + EXPIRE + HSET).
	AppendRatioGoal = 0.8
)

// DefaultSessionSlice is the turn length of memento and floor within a measurement.
const DefaultSessionSlice = 200 * time.Millisecond

// SessionOps lists the operations in report order.
var SessionOps = []string{OpGet, OpAppend, OpPatch}

// SessionsConfig configures RunSessions.
type SessionsConfig struct {
	// RedisURL is the server to measure. Every key lives under a random
	// prefix and is deleted at the end.
	RedisURL string
	// Duration of each measurement (0: DefaultDuration); Warmup before it,
	// unmeasured (0: Duration/10; negative: none).
	Duration time.Duration
	Warmup   time.Duration
	// Slice is how long memento and its floor take turns within a
	// measurement (0: DefaultSessionSlice), so both see the same background
	// load on a shared machine.
	Slice time.Duration
	// Rounds repeats every measurement; medians are reported.
	Rounds int
	// Concurrency lists the numbers of concurrent clients, each on its own session.
	Concurrency []int
	// NoRedaction measures without the personal-data redactor (on by default,
	// as in production).
	NoRedaction bool
	// NoStateCache turns off the Redis store's state cache, so every patch
	// reads the state before its compare-and-set (as on a cache miss).
	NoStateCache bool
	// Progress receives a line per measurement (nil: nothing).
	Progress io.Writer
}

// SessionResult is one operation on one target at one concurrency.
type SessionResult struct {
	Op          string    `json:"op"`
	Target      string    `json:"target"`
	Concurrency int       `json:"concurrency"`
	OpsPerSec   float64   `json:"ops_per_sec"`
	Rounds      []float64 `json:"rounds"`
	// P50 and P99 are latencies over every measured operation of all rounds.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
}

// SessionsReport is the result of RunSessions.
type SessionsReport struct {
	Redis        string          `json:"redis"`
	RedisVersion string          `json:"redis_version"`
	KeyPrefix    string          `json:"key_prefix"`
	Duration     time.Duration   `json:"duration_ns"`
	Warmup       time.Duration   `json:"warmup_ns"`
	Slice        time.Duration   `json:"slice_ns"`
	Rounds       int             `json:"rounds"`
	Concurrency  []int           `json:"concurrency"`
	Redaction    bool            `json:"redaction"`
	StateCache   bool            `json:"state_cache"`
	NumCPU       int             `json:"num_cpu"`
	GoVersion    string          `json:"go_version"`
	StateBytes   int             `json:"state_bytes"`
	MessageBytes int             `json:"message_bytes"`
	Results      []SessionResult `json:"results"`
	Ratios       []Ratio         `json:"ratios"`
}

func (c *SessionsConfig) fill() error {
	if c.RedisURL == "" {
		return errors.New("a Redis URL is required")
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
		c.Slice = DefaultSessionSlice
	}
	c.Slice = min(c.Slice, c.Duration)
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

// benchState is a typical small agent state in the recommended shape.
func benchState(i int) []byte {
	n := strconv.Itoa(i)
	return []byte(`{"current_goal":"find a gift for my sister","current_step":"step-` + n + `",` +
		`"user_choices":{"recipient":"sister","style":"practical"},"collected_fields":{"budget_eur":50,"age":34,"n":` + n + `},` +
		`"pending_questions":["hobbies?"],"tool_results":[{"tool":"catalog.search","ref":"artifact://results/` + n + `","digest":"sha256:9f2c"}],` +
		`"temporary_constraints":{"ship_before":"2025-12-20"}}`)
}

// benchMessage is one chat turn of typical length, without personal data.
var benchMessage = session.MessageInput{
	Role:     "user",
	Content:  "Something practical for the kitchen, she cooks a lot; nothing over fifty euros please, and it should arrive before the holidays.",
	Metadata: json.RawMessage(`{"turn":7,"lang":"en"}`),
}

// sessionOp is one client's next operation; i counts its operations.
type sessionOp func(ctx context.Context, i int) error

// sessionTarget prepares one client per concurrency slot.
type sessionTarget struct {
	op, name string
	prepare  func(ctx context.Context, n int) ([]sessionOp, error)
}

type sessionBench struct {
	store  *mredis.Store
	svc    *session.Service
	raw    *goredis.Client
	prefix string
	ttl    time.Duration
}

// RunSessions measures session get, append and patch per second through
// session.Service on Redis, and in the same rounds the floor: raw go-redis
// commands moving the same payload (GET of the session as served; SET of
// the message; GET+SET of the state, the read-modify-write a patch is).
func RunSessions(ctx context.Context, cfg SessionsConfig) (rep SessionsReport, err error) {
	if err := cfg.fill(); err != nil {
		return rep, fmt.Errorf("bench sessions: %w", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "memento-bench-" + hex.EncodeToString(b) + ":"
	o := mredis.Options{Prefix: prefix}
	if cfg.NoStateCache {
		o.StateCacheBytes = -1
	}
	st, err := mredis.Open(ctx, cfg.RedisURL, o)
	if err != nil {
		return rep, fmt.Errorf("bench sessions: %w", err)
	}
	defer st.Close()
	opts, _ := goredis.ParseURL(cfg.RedisURL) // Open parsed it already
	raw := goredis.NewClient(opts)
	defer raw.Close()
	sb := &sessionBench{store: st, raw: raw, prefix: prefix, ttl: 10 * time.Minute}
	defer sb.cleanup()
	var red session.Redactor
	if !cfg.NoRedaction {
		// Encrypted as a server on Redis must be: a throwaway key.
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		v, err := pii.NewVault(st, pii.VaultOptions{Key: key})
		if err != nil {
			return rep, fmt.Errorf("bench sessions: %w", err)
		}
		red = v
	}
	sb.svc = session.NewService(st, session.Options{Redactor: red})

	info, _ := raw.Info(ctx, "server").Result()
	rep = SessionsReport{
		Redis: redactURL(cfg.RedisURL), RedisVersion: infoField(info, "redis_version"), KeyPrefix: prefix,
		Duration: cfg.Duration, Warmup: cfg.Warmup, Slice: cfg.Slice, Rounds: cfg.Rounds, Concurrency: cfg.Concurrency,
		Redaction: !cfg.NoRedaction, StateCache: !cfg.NoStateCache, NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(),
		StateBytes: len(benchState(0)), MessageBytes: len(benchMessage.Content) + len(benchMessage.Metadata),
	}
	pairs := [][2]sessionTarget{
		{sb.mementoGet(), sb.floorGet()},
		{sb.mementoAppend(), sb.floorAppend()},
		{sb.mementoPatch(), sb.floorPatch()},
	}
	type key struct {
		t string
		c int
	}
	rounds := map[key][]float64{}
	lats := map[key][]time.Duration{}
	for r := 1; r <= cfg.Rounds; r++ {
		for _, c := range cfg.Concurrency {
			for _, pair := range pairs {
				var ops [2][]sessionOp
				for i, t := range pair {
					if ops[i], err = t.prepare(ctx, c); err != nil {
						return rep, fmt.Errorf("bench sessions: prepare %s %s: %w", t.op, t.name, err)
					}
				}
				n, l, err := measureTurns(ctx, ops, cfg.Warmup, cfg.Duration, cfg.Slice)
				if err != nil {
					return rep, fmt.Errorf("bench sessions: %s c=%d: %w", pair[0].op, c, err)
				}
				for i, t := range pair {
					k := key{t.op + "/" + t.name, c}
					v := float64(n[i]) / cfg.Duration.Seconds()
					rounds[k] = append(rounds[k], v)
					lats[k] = append(lats[k], l[i]...)
					fmt.Fprintf(cfg.Progress, "round %d/%d  %-6s %-7s c=%-3d %9.0f ops/s\n", r, cfg.Rounds, t.op, t.name, c, v)
				}
			}
		}
	}
	for _, op := range SessionOps {
		for _, tn := range []string{TargetMemento, TargetFloor} {
			for _, c := range cfg.Concurrency {
				k := key{op + "/" + tn, c}
				p50, p99 := percentiles(lats[k])
				rep.Results = append(rep.Results, SessionResult{Op: op, Target: tn, Concurrency: c,
					OpsPerSec: Median(rounds[k]), Rounds: rounds[k], P50: p50, P99: p99})
			}
		}
		for _, c := range cfg.Concurrency {
			m, f := rounds[key{op + "/" + TargetMemento, c}], rounds[key{op + "/" + TargetFloor, c}]
			var per []float64
			for i := range m {
				if i < len(f) && f[i] > 0 {
					per = append(per, m[i]/f[i])
				}
			}
			rep.Ratios = append(rep.Ratios, Ratio{Name: op + " memento/floor", Concurrency: c, Value: Median(per), Rounds: per, Goal: goalOf(op)})
		}
	}
	return rep, nil
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// cleanup deletes every key the benchmark wrote.
func (sb *sessionBench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := sb.raw.Scan(ctx, 0, sb.prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			sb.raw.Del(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		sb.raw.Del(ctx, keys...)
	}
}

const benchUser = "bench-user"

// newSessions creates n sessions with a state and a few messages of history.
func (sb *sessionBench) newSessions(ctx context.Context, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		ids[i] = "s-" + hex.EncodeToString(b)
		if _, _, err := sb.svc.Put(ctx, Tenant, ids[i], session.PutRequest{UserID: benchUser, State: benchState(0), TTL: sb.ttl}); err != nil {
			return nil, err
		}
		msgs := make([]session.MessageInput, 10)
		for j := range msgs {
			msgs[j] = benchMessage
		}
		if _, err := sb.svc.Append(ctx, Tenant, ids[i], benchUser, msgs); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func (sb *sessionBench) mementoGet() sessionTarget {
	return sessionTarget{op: OpGet, name: TargetMemento, prepare: func(ctx context.Context, n int) ([]sessionOp, error) {
		ids, err := sb.newSessions(ctx, n)
		if err != nil {
			return nil, err
		}
		ops := make([]sessionOp, n)
		for w, id := range ids {
			ops[w] = func(ctx context.Context, _ int) error {
				_, err := sb.svc.Get(ctx, Tenant, id, benchUser)
				return err
			}
		}
		return ops, nil
	}}
}

// floorKeys makes n plain keys holding payload, with an expiry like a session's.
func (sb *sessionBench) floorKeys(ctx context.Context, n int, payload []byte) ([]string, error) {
	keys := make([]string, n)
	for i := range keys {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		keys[i] = sb.prefix + "floor:" + hex.EncodeToString(b)
		if err := sb.raw.Set(ctx, keys[i], payload, sb.ttl).Err(); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

func (sb *sessionBench) floorGet() sessionTarget {
	return sessionTarget{op: OpGet, name: TargetFloor, prepare: func(ctx context.Context, n int) ([]sessionOp, error) {
		// The same payload: the session exactly as Get serves it.
		ids, err := sb.newSessions(ctx, 1)
		if err != nil {
			return nil, err
		}
		s, err := sb.svc.Get(ctx, Tenant, ids[0], benchUser)
		if err != nil {
			return nil, err
		}
		payload, _ := json.Marshal(s)
		keys, err := sb.floorKeys(ctx, n, payload)
		if err != nil {
			return nil, err
		}
		ops := make([]sessionOp, n)
		for w, k := range keys {
			ops[w] = func(ctx context.Context, _ int) error { return sb.raw.Get(ctx, k).Err() }
		}
		return ops, nil
	}}
}

func (sb *sessionBench) mementoAppend() sessionTarget {
	return sessionTarget{op: OpAppend, name: TargetMemento, prepare: func(ctx context.Context, n int) ([]sessionOp, error) {
		ids, err := sb.newSessions(ctx, n)
		if err != nil {
			return nil, err
		}
		ops := make([]sessionOp, n)
		for w, id := range ids {
			ops[w] = func(ctx context.Context, _ int) error {
				_, err := sb.svc.Append(ctx, Tenant, id, benchUser, []session.MessageInput{benchMessage})
				return err
			}
		}
		return ops, nil
	}}
}

// floorAppend is the capped message log a user would write by hand on
// go-redis: RPUSH the message, LTRIM to the cap, EXPIRE the list and HSET the
// session's last activity, in one pipeline (one round trip, no atomic user
// or expiry check, no sequence numbers).
func (sb *sessionBench) floorAppend() sessionTarget {
	return sessionTarget{op: OpAppend, name: TargetFloor, prepare: func(ctx context.Context, n int) ([]sessionOp, error) {
		payload, _ := json.Marshal(benchMessage)
		keys, err := sb.floorKeys(ctx, n, payload)
		if err != nil {
			return nil, err
		}
		maxMessages := int64(sb.svc.Options().MaxMessages)
		ops := make([]sessionOp, n)
		for w, k := range keys {
			list, meta := k+":messages", k+":meta"
			ops[w] = func(ctx context.Context, i int) error {
				_, err := sb.raw.Pipelined(ctx, func(p goredis.Pipeliner) error {
					p.RPush(ctx, list, payload)
					p.LTrim(ctx, list, -maxMessages, -1)
					p.Expire(ctx, list, sb.ttl)
					p.HSet(ctx, meta, "last_activity", i)
					return nil
				})
				return err
			}
		}
		return ops, nil
	}}
}

func (sb *sessionBench) mementoPatch() sessionTarget {
	return sessionTarget{op: OpPatch, name: TargetMemento, prepare: func(ctx context.Context, n int) ([]sessionOp, error) {
		ids, err := sb.newSessions(ctx, n)
		if err != nil {
			return nil, err
		}
		ops := make([]sessionOp, n)
		for w, id := range ids {
			rev := int64(1)
			ops[w] = func(ctx context.Context, i int) error {
				s, err := sb.svc.Patch(ctx, Tenant, id, benchUser, rev, json.RawMessage(`{"current_step":"step-`+strconv.Itoa(i)+`","collected_fields":{"n":`+strconv.Itoa(i)+`}}`))
				if err != nil {
					return err
				}
				rev = s.Revision
				return nil
			}
		}
		return ops, nil
	}}
}

func (sb *sessionBench) floorPatch() sessionTarget {
	return sessionTarget{op: OpPatch, name: TargetFloor, prepare: func(ctx context.Context, n int) ([]sessionOp, error) {
		keys, err := sb.floorKeys(ctx, n, benchState(0))
		if err != nil {
			return nil, err
		}
		ops := make([]sessionOp, n)
		for w, k := range keys {
			ops[w] = func(ctx context.Context, i int) error {
				if err := sb.raw.Get(ctx, k).Err(); err != nil {
					return err
				}
				return sb.raw.Set(ctx, k, benchState(i), sb.ttl).Err()
			}
		}
		return ops, nil
	}}
}

// measureTurns measures two targets in alternating turns of slice until
// each has had d of measured time, after one warmup of each.
func measureTurns(ctx context.Context, ops [2][]sessionOp, warmup, d, slice time.Duration) ([2]int64, [2][]time.Duration, error) {
	var (
		n   [2]int64
		lat [2][]time.Duration
	)
	if warmup > 0 {
		for i := range ops {
			if _, _, err := measureSessionOps(ctx, ops[i], 0, warmup); err != nil {
				return n, lat, err
			}
		}
	}
	for done := time.Duration(0); done < d; done += slice {
		turn := min(slice, d-done)
		for i := range ops {
			c, l, err := measureSessionOps(ctx, ops[i], 0, turn)
			if err != nil {
				return n, lat, err
			}
			n[i] += c
			lat[i] = append(lat[i], l...)
		}
	}
	return n, lat, nil
}

// measureSessionOps runs each client in its own goroutine, back to back,
// through a warmup and then d; it counts the operations that completed
// within d and returns their latencies.
func measureSessionOps(ctx context.Context, ops []sessionOp, warmup, d time.Duration) (int64, []time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	from := time.Now().Add(warmup)
	until := from.Add(d)
	lat := make([][]time.Duration, len(ops))
	var wg sync.WaitGroup
	for w, op := range ops {
		wg.Go(func() {
			for i := 1; ctx.Err() == nil; i++ {
				start := time.Now()
				if err := op(ctx, i); err != nil {
					cancel(err)
					return
				}
				end := time.Now()
				if end.After(until) {
					return
				}
				if !start.Before(from) {
					lat[w] = append(lat[w], end.Sub(start))
				}
			}
		})
	}
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil {
		return 0, nil, cause
	}
	all := slices.Concat(lat...)
	return int64(len(all)), all, nil
}

// percentiles returns the 50th and 99th percentile (nearest rank).
func percentiles(xs []time.Duration) (p50, p99 time.Duration) {
	if len(xs) == 0 {
		return 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.5) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return at(0.50), at(0.99)
}

// WriteJSON writes the report as indented JSON.
func (r SessionsReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Result returns one measurement.
func (r SessionsReport) Result(op, target string, c int) (SessionResult, bool) {
	for _, m := range r.Results {
		if m.Op == op && m.Target == target && m.Concurrency == c {
			return m, true
		}
	}
	return SessionResult{}, false
}

// WriteTable prints the measurements and the ratios as aligned text.
func (r SessionsReport) WriteTable(w io.Writer) {
	red, cache := "on", "on"
	if !r.Redaction {
		red = "off"
	}
	if !r.StateCache {
		cache = "off"
	}
	fmt.Fprintf(w, "session operations per second: median of %d rounds × %s (warmup %s; memento and floor in alternating %s turns), %d CPUs, %s\n", r.Rounds, r.Duration, r.Warmup, r.Slice, r.NumCPU, r.GoVersion)
	fmt.Fprintf(w, "redis %s at %s; state %d B, message %d B, redaction %s, state cache %s\n", r.RedisVersion, r.Redis, r.StateBytes, r.MessageBytes, red, cache)
	fmt.Fprintln(w, "floor: raw go-redis on the same payload — get: GET of the session as served; append: RPUSH+LTRIM+EXPIRE+HSET of a capped message log in one pipeline; patch: GET+SET of the state")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "op\ttarget\tc\tops/s\tp50\tp99\tratio\tgoal\t")
	for _, op := range SessionOps {
		for _, c := range r.Concurrency {
			var ratio Ratio
			for _, x := range r.Ratios {
				if x.Name == op+" memento/floor" && x.Concurrency == c {
					ratio = x
				}
			}
			for _, tn := range []string{TargetMemento, TargetFloor} {
				m, ok := r.Result(op, tn, c)
				if !ok {
					continue
				}
				rc, gc := "", ""
				if tn == TargetMemento {
					rc = fmt.Sprintf("%.2f", ratio.Value)
					if ratio.Goal > 0 && ratio.Value < ratio.Goal {
						rc = "!" + rc
					}
					gc = fmt.Sprintf("≥%.2f", ratio.Goal)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", op, tn, c, num(fmt.Sprintf("%.0f", m.OpsPerSec)),
					num(fmtLatency(m.P50)), num(fmtLatency(m.P99)), num(rc), gc)
			}
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "(ratio = memento ops/s ÷ floor ops/s, median of the per-round ratios; ! marks one below its goal)")
}

func fmtLatency(d time.Duration) string {
	return fmt.Sprintf("%.0fµs", float64(d.Microseconds()))
}

// goalOf is the memento/floor ratio an operation should reach.
func goalOf(op string) float64 {
	if op == OpAppend {
		return AppendRatioGoal
	}
	return SessionRatioGoal
}
