package retrieval

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mementohq/memento/llm/hashembed"
	"github.com/mementohq/memento/search"
)

// BenchmarkTenantIndexSearch measures one ranking (full text and vectors)
// in the in-process index of 100k chunks shaped like bench retrieval's
// (about 75 Zipf-drawn words each, embedded by hashembed, 1,000 users in
// 100 groups): for a principal under random ACLs and for the same chunks
// all readable by the tenant, interleaved query by query. It reports the
// median thread CPU time of each and their ratio (acl/open), which is the
// cost of the ACL filter; and, as dense-open, the open ranking with a
// dense query vector (every dimension set, as a neural embedder's), where
// hashembed's short queries set a few dozen.
func BenchmarkTenantIndexSearch(b *testing.B) {
	const chunks, perDoc, dim, users, groups = 100_000, 10, 256, 1000, 100
	rng := rand.New(rand.NewPCG(1, 2))
	emb := hashembed.New(dim)
	zipf := rand.NewZipf(rng, 1.1, 1, 20000)
	text := func(words int) string {
		var sb strings.Builder
		for range words {
			fmt.Fprintf(&sb, "t%dx ", zipf.Uint64())
		}
		return sb.String()
	}
	acl, open := newTenantIndex("acl"), newTenantIndex("open")
	for d := range chunks / perDoc {
		var a []string
		for range 1 + rng.IntN(3) {
			if rng.IntN(2) == 0 {
				a = append(a, fmt.Sprintf("user:u%d", rng.IntN(users)))
			} else {
				a = append(a, fmt.Sprintf("group:g%d", rng.IntN(groups)))
			}
		}
		a = dedupSorted(a)
		for c := range perDoc {
			t := text(75)
			vs, err := emb.Embed(b.Context(), []string{t})
			if err != nil {
				b.Fatal(err)
			}
			r := IndexRow{ChunkID: ChunkID(fmt.Sprintf("d%d", d), 1, c), DocumentID: fmt.Sprintf("d%d", d), Version: 1,
				Terms: EncodeTerms(t), Vector: vs[0]}
			r.ACL = a
			acl.add(r)
			r.ACL = []string{EntryTenant}
			open.add(r)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var tAcl, tOpen, tDense []time.Duration
	hits := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := text(3)
		vs, err := emb.Embed(b.Context(), []string{q})
		if err != nil {
			b.Fatal(err)
		}
		qv, dense := vs[0], make([]float32, dim)
		for j := range dense {
			dense[j] = float32(rng.NormFloat64())
		}
		search.Normalize(dense)
		var gs []string
		for range 1 + rng.IntN(3) {
			gs = append(gs, fmt.Sprintf("g%d", rng.IntN(groups)))
		}
		entries := Entries(fmt.Sprintf("user:u%d", rng.IntN(users)), dedupSorted(gs))
		for _, side := range []int{i % 2, 1 - i%2} {
			x, ts := acl, &tAcl
			if side == 1 {
				x, ts = open, &tOpen
			}
			t0 := threadCPU(b)
			text, vec := searchIndex(x, entries, []string{q}, qv, 50)
			*ts = append(*ts, threadCPU(b)-t0)
			hits += len(text) + len(vec)
		}
		t0 := threadCPU(b)
		searchIndex(open, entries, []string{q}, dense, 50)
		tDense = append(tDense, threadCPU(b)-t0)
	}
	b.StopTimer()
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	ma, mo := med(tAcl), med(tOpen)
	b.ReportMetric(float64(ma.Microseconds())/1000, "acl-ms")
	b.ReportMetric(float64(mo.Microseconds())/1000, "open-ms")
	b.ReportMetric(float64(ma)/float64(mo), "acl/open")
	b.ReportMetric(float64(med(tDense).Microseconds())/1000, "dense-open-ms")
	if hits == 0 {
		b.Fatal("no hits: the benchmark measures nothing")
	}
}

// threadCPU is the calling thread's CPU time (the caller locks its thread).
func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatalf("thread CPU clock: %v", err)
	}
	return time.Duration(ts.Nano())
}
