package search

import (
	"flag"
	"fmt"
	"math/rand"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var (
	crossSizes = flag.String("vector.sizes", "1000,10000,50000", "comma-separated index sizes for BenchmarkVectorCrossover")
	crossDims  = flag.String("vector.dims", "100,256", "comma-separated dimensions for BenchmarkVectorCrossover")
	crossData  = flag.String("vector.data", "random", "random (unit Gaussian, the hard case) or clustered (100 centres, nearer real embeddings)")
)

func ints(t testing.TB, s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out
}

// cpuTime is the calling thread's CPU time (the caller locks its thread).
func cpuTime(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatalf("thread CPU clock: %v", err)
	}
	return time.Duration(ts.Nano())
}

// clusteredVec draws around one of the centres, so neighbourhoods exist.
func clusteredVec(r *rand.Rand, centres [][]float32) []float32 {
	c := centres[r.Intn(len(centres))]
	v := make([]float32, len(c))
	for i := range v {
		v[i] = c[i] + float32(r.NormFloat64())*0.08
	}
	Normalize(v)
	return v
}

// BenchmarkVectorCrossover measures, per size and dimension, the exact
// scan (the baseline) and the graph on the same index and the same
// queries, interleaved query by query: median latency of each, their
// ratio, recall@10 of the graph against the scan, and the build time.
// Times are the thread's CPU time, not the wall clock: on a shared,
// overloaded machine a preemption lands more often inside the longer of
// two calls and wall time punishes it unfairly. It is where
// DefaultExactLimit comes from:
//
//	go test -run x -bench VectorCrossover -benchtime 200x ./search \
//	  -vector.sizes 1000,10000,50000,100000,300000 -vector.dims 100,256
func BenchmarkVectorCrossover(b *testing.B) {
	for _, dim := range ints(b, *crossDims) {
		for _, n := range ints(b, *crossSizes) {
			b.Run(fmt.Sprintf("dim=%d/n=%d", dim, n), func(b *testing.B) {
				r := rand.New(rand.NewSource(int64(n + dim)))
				var centres [][]float32
				for i := 0; i < 100; i++ {
					centres = append(centres, randVec(r, dim))
				}
				draw := func() []float32 {
					if *crossData == "clustered" {
						return clusteredVec(r, centres)
					}
					return randVec(r, dim)
				}
				runtime.LockOSThread() // thread CPU time below
				defer runtime.UnlockOSThread()
				vs := make([][]float32, n)
				for i := range vs {
					vs[i] = draw()
				}
				x := NewVectorIndexWith(dim, Options{ExactLimit: 1})
				t0 := cpuTime(b)
				for i, v := range vs {
					x.Upsert("v"+strconv.Itoa(i), v, Meta{})
				}
				build := cpuTime(b) - t0
				qs := make([][]float32, 100)
				for i := range qs {
					qs[i] = draw()
				}
				rc := recallAt10(b, x, qs, nil)
				var ex, ap []time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					q := qs[i%len(qs)]
					t1 := cpuTime(b)
					x.floatScan(q, 10, nil)
					t2 := cpuTime(b)
					x.Search(q, 10, nil)
					ex, ap = append(ex, t2-t1), append(ap, cpuTime(b)-t2)
				}
				slices.Sort(ex)
				slices.Sort(ap)
				me, ma := ex[len(ex)/2], ap[len(ap)/2]
				b.ReportMetric(float64(me.Microseconds()), "exact-us")
				b.ReportMetric(float64(ma.Microseconds()), "hnsw-us")
				b.ReportMetric(float64(me)/float64(max(ma, 1)), "speedup")
				b.ReportMetric(rc, "recall@10")
				b.ReportMetric(build.Seconds(), "build-s")
			})
		}
	}
}

// BenchmarkVectorSearch100k is the exact scan alone, for comparison with
// earlier runs.
func BenchmarkVectorSearch100k(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	x := NewVectorIndexWith(100, Options{ExactLimit: -1})
	for i := 0; i < 100_000; i++ {
		x.Upsert(fmt.Sprint(i), randVec(r, 100), Meta{})
	}
	q := randVec(r, 100)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x.Search(q, 40, nil)
	}
}
