package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/search"
)

// Targets of `bench memory` (issue 8).
const (
	MemorySearchTargetP95  = 20 * time.Millisecond // search p95 at 100k items
	MemoryExtractTargetP95 = 5 * time.Millisecond  // add with offline extraction p95
)

// MemoryConfig is one `bench memory` run on one backend.
type MemoryConfig struct {
	Backend string
	// Store is an empty store of its own; the run fills it.
	Store     memory.Store
	Embedder  memory.Embedder  // nil: full text only
	Extractor memory.Extractor // the offline extractor for the extract figure
	// Sizes are the item counts measured, ascending: the many-subject
	// tenant grows to each in turn.
	Sizes []int
	// Subjects is the many-subject tenant's subject count (default 10k).
	Subjects int
	// OneSubject caps the one-subject tenant (default 100k; negative skips
	// it): it grows with Sizes up to this many items of one subject.
	OneSubject int
	Queries    int // searches per figure (default 200)
	// AddSamples is how many items go through memory.Service.Add, one at a
	// time, for the ingestion rate and add p95 (default 2000); the next as
	// many are written straight to the store as the baseline.
	AddSamples     int
	ExtractSamples int // Extract calls timed (default 300)
	// Workers bulk-load the rest (default 2).
	Workers  int
	Seed     int64
	Progress io.Writer
}

// MemoryReport is what `bench memory` prints.
type MemoryReport struct {
	Backend  string         `json:"backend"`
	Embedder string         `json:"embedder"`
	Ingest   MemoryIngest   `json:"ingest"`
	Extract  MemoryExtract  `json:"extract"`
	Search   []MemorySearch `json:"search"`
	Targets  MemoryTargets  `json:"targets"`
}

// MemoryIngest: Service.Add against the store's own Insert of the same claims.
type MemoryIngest struct {
	AddClaims      int     `json:"add_claims"`
	AddPerSec      float64 `json:"add_per_sec"`
	AddP50MS       float64 `json:"add_p50_ms"`
	AddP95MS       float64 `json:"add_p95_ms"`
	InsertPerSec   float64 `json:"store_insert_per_sec"`
	InsertP95MS    float64 `json:"store_insert_p95_ms"`
	AddOverInsert  float64 `json:"add_p95_over_insert_p95"`
	BulkClaims     int     `json:"bulk_claims"`
	BulkPerSec     float64 `json:"bulk_per_sec"`
	BulkWorkers    int     `json:"bulk_workers"`
	BulkIsAddShape bool    `json:"bulk_writes_what_add_writes"`
}

// MemoryExtract: Service.Extract (apply) of one message against Service.Add
// of one claim, interleaved.
type MemoryExtract struct {
	Calls       int            `json:"calls"`
	Extractor   string         `json:"extractor"`
	P50MS       float64        `json:"p50_ms"`
	P95MS       float64        `json:"p95_ms"`
	AddP95MS    float64        `json:"baseline_add_p95_ms"`
	OverAdd     float64        `json:"p95_over_add_p95"`
	Outcomes    map[string]int `json:"outcomes"`
	MeetsTarget bool           `json:"meets_target"`
}

// MemorySearch is one search figure: Service.Search (hybrid, k 10)
// against the store's SearchText for the same subject and words.
type MemorySearch struct {
	Layout     string  `json:"layout"` // "10k-subjects" or "one-subject"
	Items      int     `json:"items"`
	PerSubject int     `json:"items_per_subject"`
	Mode       string  `json:"mode"`
	Queries    int     `json:"queries"`
	FirstMS    float64 `json:"first_search_ms,omitempty"` // one-subject: loads and indexes the vectors
	P50MS      float64 `json:"p50_ms"`
	P95MS      float64 `json:"p95_ms"`
	TextP50MS  float64 `json:"baseline_text_p50_ms"`
	TextP95MS  float64 `json:"baseline_text_p95_ms"`
	OverText   float64 `json:"p95_over_text_p95"`
	// Approximate: the subject's vector index is past
	// memory.ApproximateVectorLimit, so the quantized scan answers (the
	// rule the index follows; the service does not expose its cache).
	Approximate bool `json:"vector_index_approximate"`
}

// MemoryTargets says how the run stands against issue 8's targets.
type MemoryTargets struct {
	SearchP95At100kMS float64 `json:"search_p95_at_100k_ms"` // worst layout
	SearchTargetMS    float64 `json:"search_target_ms"`
	SearchMet         *bool   `json:"search_met"` // nil: 100k not measured
	ExtractP95MS      float64 `json:"extract_p95_ms"`
	ExtractTargetMS   float64 `json:"extract_target_ms"`
	ExtractMet        bool    `json:"extract_met"`
}

// The synthetic corpus: each claim is a verb and seven words drawn from a
// vocabulary of memVocab made-up words by a Zipf law (s 1.1), as words
// fall in text, so a three-word query matches a realistic few of a large
// subject's claims rather than a tenth of them (a tiny vocabulary would
// make every query match thousands of claims and time only ranking).
const memVocab = 20_000

var (
	memVerbs  = []string{"likes", "prefers", "hates", "collects", "studies", "plays", "cooks", "visits", "reads", "avoids", "buys", "repairs"}
	memPlaces = []string{"Lyon", "Berlin", "Rome", "Porto", "Oslo", "Kyoto", "Austin", "Lima", "Tartu", "Graz", "Turin", "Leeds"}
	memAdjs   = []string{"quiet", "old", "spicy", "green", "fast", "cheap", "rare", "wooden", "vintage", "sweet", "loud", "tiny"}
	memNouns  = []string{"jazz", "records", "tea", "coffee", "bicycles", "novels", "mugs", "orchids", "cameras", "maps", "chess", "pasta"}
	memWords  = func() []string {
		cons, vows := "bdfgklmnprstvz", "aeiou"
		ws := make([]string, memVocab)
		for i := range ws {
			var b strings.Builder
			for n := i + 1; n > 0; n /= len(cons) * len(vows) {
				d := n % (len(cons) * len(vows))
				b.WriteByte(cons[d%len(cons)])
				b.WriteByte(vows[d/len(cons)])
			}
			ws[i] = b.String() + "n"
		}
		return ws
	}()
)

// memZipf draws word ranks; one per generator, as rand.Zipf keeps its r.
func memZipf(r *rand.Rand) *rand.Zipf { return rand.NewZipf(r, 1.1, 2, memVocab-1) }

func memText(r *rand.Rand, z *rand.Zipf) string {
	ws := []string{memVerbs[r.Intn(len(memVerbs))]}
	for i := 0; i < 7; i++ {
		ws = append(ws, memWords[z.Uint64()])
	}
	return strings.Join(ws, " ")
}

func memQuery(r *rand.Rand, z *rand.Zipf) string {
	return memWords[z.Uint64()] + " " + memWords[z.Uint64()] + " " + memWords[z.Uint64()]
}

// memInput is item i of a layout: key "fact.<i>" (a new key each time, so
// Add adds), value and text from the corpus.
func memInput(r *rand.Rand, z *rand.Zipf, subject string, i int) memory.AddInput {
	text := memText(r, z)
	v, _ := json.Marshal(text)
	return memory.AddInput{
		SubjectID:  subject,
		Key:        "fact." + strconv.Itoa(i),
		Value:      v,
		Text:       text,
		Provenance: memory.Provenance{SourceType: memory.SourceImport, SourceID: "bench-" + strconv.Itoa(i), ValidatedBy: memory.ValidatedImported},
	}
}

// BulkInsert is what memory.Service.Add writes for in when in's key has no
// current claim, in the default namespace with no TTL policy, without a
// consent basis, TTL or expiry: the same claim (a fresh id, the compacted
// value, its digest, text, provenance, confidence 1, schema version 1,
// valid from now, current) and the same vector row, for the bulk loader
// to give the store directly and skip Add's two reads (namespace policy,
// current claim of the key). TestBulkInsertIsWhatAddWrites holds it to Add.
func BulkInsert(ctx context.Context, e memory.Embedder, tenantID string, in memory.AddInput, now time.Time) (memory.InsertParams, error) {
	now = now.UTC().Truncate(time.Microsecond)
	ns := in.Namespace
	if ns == "" {
		ns = memory.DefaultNamespace
	}
	value, err := compactJSON(in.Value)
	if err != nil {
		return memory.InsertParams{}, err
	}
	text := strings.TrimSpace(in.Text)
	if text == "" {
		text = memory.RenderText(in.Key, value)
	}
	prov := in.Provenance
	prov.MessageIDs = append([]string(nil), prov.MessageIDs...)
	c := memory.Claim{
		MemoryID: uuid.NewString(), TenantID: tenantID, SubjectID: in.SubjectID, Namespace: ns, Key: in.Key,
		Value: value, SchemaVersion: 1, Text: text, Category: strings.ToLower(strings.TrimSpace(in.Category)),
		Provenance: prov, Confidence: 1, ValidFrom: now, Status: memory.StatusCurrent,
		ValueDigest: memory.ValueDigest(ns, in.Key, value), CreatedAt: now, ConfirmedAt: now, Confirmations: 1,
	}
	p := memory.InsertParams{Claim: c}
	if e != nil {
		vs, err := e.Embed(ctx, []string{text})
		if err != nil {
			return memory.InsertParams{}, fmt.Errorf("embed: %w", err)
		}
		p.Vector = &memory.Vector{MemoryID: c.MemoryID, Namespace: ns, Model: e.Model(), Values: vs[0]}
	}
	return p, nil
}

func compactJSON(v json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return nil, fmt.Errorf("value is not JSON: %w", err)
	}
	return b.Bytes(), nil
}

// RunMemory runs the whole `bench memory` measurement on cfg.Store.
func RunMemory(ctx context.Context, cfg MemoryConfig) (*MemoryReport, error) {
	if cfg.Store == nil {
		return nil, errors.New("bench memory: no store")
	}
	if len(cfg.Sizes) == 0 {
		return nil, errors.New("bench memory: no sizes")
	}
	sizes := slices.Clone(cfg.Sizes)
	slices.Sort(sizes)
	setDefault(&cfg.Subjects, 10_000)
	setDefault(&cfg.OneSubject, 100_000)
	setDefault(&cfg.Queries, 200)
	setDefault(&cfg.AddSamples, 2000)
	setDefault(&cfg.ExtractSamples, 300)
	setDefault(&cfg.Workers, 2)
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "bench memory: "+format+"\n", args...)
		}
	}
	svc := memory.NewService(cfg.Store, memory.Options{Embedder: cfg.Embedder, Extractor: cfg.Extractor})
	rep := &MemoryReport{Backend: cfg.Backend, Embedder: "none"}
	if cfg.Embedder != nil {
		rep.Embedder = cfg.Embedder.Model()
	}
	r := rand.New(rand.NewSource(cfg.Seed))
	z := memZipf(r)
	const manyTenant, oneTenant = "bench-many", "bench-one"
	subjectOf := func(i int) string { return "s" + strconv.Itoa(i%cfg.Subjects) }

	// Ingestion: Add one at a time, then the store's Insert of the same
	// shape, one at a time, as the baseline.
	loaded := 0
	nAdd := min(cfg.AddSamples, sizes[len(sizes)-1])
	progress("ingest: %d claims through Service.Add", nAdd)
	addLat := make([]time.Duration, 0, nAdd)
	t0 := time.Now()
	for ; loaded < nAdd; loaded++ {
		in := memInput(r, z, subjectOf(loaded), loaded)
		t := time.Now()
		if _, err := svc.Add(ctx, manyTenant, in); err != nil {
			return nil, fmt.Errorf("bench memory: add: %w", err)
		}
		addLat = append(addLat, time.Since(t))
	}
	addElapsed := time.Since(t0)
	nIns := min(cfg.AddSamples, sizes[len(sizes)-1]-loaded)
	insLat := make([]time.Duration, 0, nIns)
	t0 = time.Now()
	for end := loaded + nIns; loaded < end; loaded++ {
		t := time.Now()
		p, err := BulkInsert(ctx, cfg.Embedder, manyTenant, memInput(r, z, subjectOf(loaded), loaded), time.Now())
		if err == nil {
			_, err = cfg.Store.Insert(ctx, p)
		}
		if err != nil {
			return nil, fmt.Errorf("bench memory: store insert: %w", err)
		}
		insLat = append(insLat, time.Since(t))
	}
	insElapsed := time.Since(t0)
	rep.Ingest = MemoryIngest{
		AddClaims: nAdd, AddPerSec: rate(nAdd, addElapsed), AddP50MS: ms(pct(addLat, 50)), AddP95MS: ms(pct(addLat, 95)),
		InsertPerSec: rate(nIns, insElapsed), InsertP95MS: ms(pct(insLat, 95)), BulkWorkers: cfg.Workers, BulkIsAddShape: true,
	}
	rep.Ingest.AddOverInsert = ratio(rep.Ingest.AddP95MS, rep.Ingest.InsertP95MS)
	progress("ingest: add %.0f/s (p95 %.2f ms), store insert %.0f/s (p95 %.2f ms)", rep.Ingest.AddPerSec, rep.Ingest.AddP95MS, rep.Ingest.InsertPerSec, rep.Ingest.InsertP95MS)

	// Extraction: one message per call, apply, interleaved with an Add of
	// one claim as the baseline.
	if cfg.Extractor != nil {
		ex, err := measureExtract(ctx, svc, manyTenant, r, cfg)
		if err != nil {
			return nil, err
		}
		rep.Extract = ex
		progress("extract: p95 %.2f ms (add p95 %.2f ms)", ex.P95MS, ex.AddP95MS)
	}

	var bulkN int
	var bulkT time.Duration
	oneLoaded := 0
	for _, size := range sizes {
		if loaded < size {
			progress("load: many-subject tenant %d → %d items (%d workers, straight to the store)", loaded, size, cfg.Workers)
			t := time.Now()
			if err := bulkLoad(ctx, cfg, manyTenant, loaded, size, subjectOf); err != nil {
				return nil, err
			}
			bulkN += size - loaded
			bulkT += time.Since(t)
			loaded = size
		}
		s, err := measureSearch(ctx, svc, cfg, manyTenant, func(r *rand.Rand) string { return subjectOf(r.Intn(min(size, cfg.Subjects))) }, r, false)
		if err != nil {
			return nil, err
		}
		s.Layout, s.Items, s.PerSubject = fmt.Sprintf("%d-subjects", min(size, cfg.Subjects)), size, max(1, size/cfg.Subjects)
		s.Approximate = cfg.Embedder != nil && s.PerSubject > memory.ApproximateVectorLimit
		rep.Search = append(rep.Search, s)
		progress("search: %s %d items: p95 %.2f ms (text p95 %.2f ms)", s.Layout, size, s.P95MS, s.TextP95MS)

		one := min(size, cfg.OneSubject)
		if cfg.OneSubject < 0 || one <= oneLoaded {
			continue
		}
		progress("load: one-subject tenant %d → %d items", oneLoaded, one)
		t := time.Now()
		if err := bulkLoad(ctx, cfg, oneTenant, oneLoaded, one, func(int) string { return "s0" }); err != nil {
			return nil, err
		}
		bulkN += one - oneLoaded
		bulkT += time.Since(t)
		oneLoaded = one
		s, err = measureSearch(ctx, svc, cfg, oneTenant, func(*rand.Rand) string { return "s0" }, r, true)
		if err != nil {
			return nil, err
		}
		s.Layout, s.Items, s.PerSubject = "one-subject", one, one
		s.Approximate = cfg.Embedder != nil && one > memory.ApproximateVectorLimit
		rep.Search = append(rep.Search, s)
		progress("search: one subject of %d items: first %.0f ms, p95 %.2f ms (text p95 %.2f ms)", one, s.FirstMS, s.P95MS, s.TextP95MS)
	}
	rep.Ingest.BulkClaims, rep.Ingest.BulkPerSec = bulkN, rate(bulkN, bulkT)

	rep.Targets = MemoryTargets{SearchTargetMS: ms(MemorySearchTargetP95), ExtractTargetMS: ms(MemoryExtractTargetP95), ExtractP95MS: rep.Extract.P95MS, ExtractMet: rep.Extract.MeetsTarget}
	for _, s := range rep.Search {
		if s.Items == 100_000 {
			rep.Targets.SearchP95At100kMS = max(rep.Targets.SearchP95At100kMS, s.P95MS)
			met := rep.Targets.SearchP95At100kMS < ms(MemorySearchTargetP95)
			rep.Targets.SearchMet = &met
		}
	}
	return rep, nil
}

// bulkBatch is how many claims one bulk-load transaction writes when the
// store is a memory.BatchInserter.
const bulkBatch = 500

// bulkLoad writes items [from, to) of a tenant with cfg.Workers writers,
// in transactions of bulkBatch claims when the store takes batches (one
// commit per batch; while one writer's batch commits, another builds and
// embeds its next), else one Insert per claim.
func bulkLoad(ctx context.Context, cfg MemoryConfig, tenant string, from, to int, subject func(int) string) error {
	bi, batched := cfg.Store.(memory.BatchInserter)
	size := 1
	if batched {
		size = bulkBatch
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next = from
		fail error
	)
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(cfg.Seed + int64(from) + int64(w)*7919))
			z := memZipf(r)
			ps := make([]memory.InsertParams, 0, size)
			for {
				mu.Lock()
				lo := next
				hi := min(lo+size, to)
				next = hi
				stop := fail != nil || lo >= to || ctx.Err() != nil
				mu.Unlock()
				if stop {
					return
				}
				ps = ps[:0]
				var err error
				for i := lo; i < hi && err == nil; i++ {
					var p memory.InsertParams
					if p, err = BulkInsert(ctx, cfg.Embedder, tenant, memInput(r, z, subject(i), i), time.Now()); err == nil {
						ps = append(ps, p)
					}
				}
				if err == nil {
					if batched {
						_, err = bi.InsertBatch(ctx, ps)
					} else {
						_, err = cfg.Store.Insert(ctx, ps[0])
					}
				}
				if err != nil {
					mu.Lock()
					fail = fmt.Errorf("bench memory: bulk insert: %w", err)
					mu.Unlock()
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if fail == nil {
		fail = ctx.Err()
	}
	return fail
}

// measureSearch interleaves Service.Search (hybrid when an embedder is
// set) and the store's SearchText (the baseline: what full text alone
// costs, with the service's candidate count) on the same subject and words.
func measureSearch(ctx context.Context, svc *memory.Service, cfg MemoryConfig, tenant string, subject func(*rand.Rand) string, r *rand.Rand, first bool) (MemorySearch, error) {
	out := MemorySearch{Mode: memory.ModeHybrid, Queries: cfg.Queries}
	if cfg.Embedder == nil {
		out.Mode = memory.ModeFulltext
	}
	if first {
		q := memory.SearchQuery{Query: memQuery(r, memZipf(r)), SubjectID: subject(r), K: 10}
		t := time.Now()
		if _, err := svc.Search(ctx, tenant, q); err != nil {
			return out, fmt.Errorf("bench memory: search: %w", err)
		}
		out.FirstMS = ms(time.Since(t))
	}
	z := memZipf(r)
	lat := make([]time.Duration, 0, cfg.Queries)
	base := make([]time.Duration, 0, cfg.Queries)
	for i := 0; i < cfg.Queries; i++ {
		q := memory.SearchQuery{Query: memQuery(r, z), SubjectID: subject(r), K: 10}
		t := time.Now()
		if _, err := svc.Search(ctx, tenant, q); err != nil {
			return out, fmt.Errorf("bench memory: search: %w", err)
		}
		lat = append(lat, time.Since(t))
		t = time.Now()
		if _, err := cfg.Store.SearchText(ctx, memory.TextQuery{TenantID: tenant, SubjectID: q.SubjectID, Terms: search.Terms(q.Query), Limit: 30, Now: time.Now()}); err != nil {
			return out, fmt.Errorf("bench memory: store search: %w", err)
		}
		base = append(base, time.Since(t))
	}
	out.P50MS, out.P95MS = ms(pct(lat, 50)), ms(pct(lat, 95))
	out.TextP50MS, out.TextP95MS = ms(pct(base, 50)), ms(pct(base, 95))
	out.OverText = ratio(out.P95MS, out.TextP95MS)
	return out, nil
}

var extractMessages = []string{
	"I live in %s now.",
	"Actually, I moved to %s in May.",
	"I prefer %s tea in the morning.",
	"Please answer in %s from now on.",
	"I hate %s, so no more of those please.",
	"My name is %s.",
}

var extractFills = [][]string{memPlaces, memPlaces, memAdjs, {"Russian", "German", "French", "Italian", "Spanish"}, memNouns, {"Anna", "Olga", "Pavel", "Marta", "Louis", "Kenji"}}

func measureExtract(ctx context.Context, svc *memory.Service, tenant string, r *rand.Rand, cfg MemoryConfig) (MemoryExtract, error) {
	z := memZipf(r)
	out := MemoryExtract{Calls: cfg.ExtractSamples, Extractor: cfg.Extractor.Name(), Outcomes: map[string]int{}}
	lat := make([]time.Duration, 0, cfg.ExtractSamples)
	base := make([]time.Duration, 0, cfg.ExtractSamples)
	for i := 0; i < cfg.ExtractSamples; i++ {
		subject := "x" + strconv.Itoa(r.Intn(1000))
		j := r.Intn(len(extractMessages))
		fill := extractFills[j][r.Intn(len(extractFills[j]))]
		msg := memory.Message{ID: "m" + strconv.Itoa(i), Role: "user", Content: fmt.Sprintf(extractMessages[j], fill), At: time.Now()}
		t := time.Now()
		res, err := svc.Extract(ctx, tenant, memory.ExtractInput{SubjectID: subject, Messages: []memory.Message{msg}, Apply: true})
		if err != nil {
			return out, fmt.Errorf("bench memory: extract: %w", err)
		}
		lat = append(lat, time.Since(t))
		for _, it := range res.Items {
			out.Outcomes[string(it.Outcome)]++
		}
		for range res.Skipped {
			out.Outcomes["skipped"]++
		}
		in := memInput(r, z, subject, 1_000_000_000+i)
		t = time.Now()
		if _, err := svc.Add(ctx, tenant, in); err != nil {
			return out, fmt.Errorf("bench memory: add: %w", err)
		}
		base = append(base, time.Since(t))
	}
	out.P50MS, out.P95MS, out.AddP95MS = ms(pct(lat, 50)), ms(pct(lat, 95)), ms(pct(base, 95))
	out.OverAdd = ratio(out.P95MS, out.AddP95MS)
	out.MeetsTarget = pct(lat, 95) < MemoryExtractTargetP95
	return out, nil
}

func setDefault(v *int, d int) {
	if *v == 0 {
		*v = d
	}
}

func pct(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
