package server

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are per Server (own registry), so several servers in one process
// (tests, embedding) never clash on registration.
type metrics struct {
	reg             *prometheus.Registry
	requests        *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	commits         prometheus.Counter
	commitConflicts *prometheus.CounterVec
	memoryWrites    *prometheus.CounterVec
	// series caches the request series per route and status (seriesKey ->
	// *httpSeries); both sets are small and fixed by the routes.
	series sync.Map
}

type seriesKey struct {
	route  string
	status int
}

// httpSeries are the request counter and latency histogram of one route and status.
type httpSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// seriesOf looks the series of a route and status up in the vectors once,
// sparing every later request the label hashing and locking.
func (m *metrics) seriesOf(route string, status int) *httpSeries {
	k := seriesKey{route, status}
	if v, ok := m.series.Load(k); ok {
		return v.(*httpSeries)
	}
	code := strconv.Itoa(status)
	v, _ := m.series.LoadOrStore(k, &httpSeries{
		requests: m.requests.WithLabelValues(route, code),
		duration: m.duration.WithLabelValues(route, code),
	})
	return v.(*httpSeries)
}

// Conflict kinds counted by memento_run_commit_conflicts_total.
const (
	conflictRevision   = "revision"
	conflictLease      = "lease"
	conflictTransition = "transition"
)

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memento_http_requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "memento_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "status"}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memento_run_commits_total",
			Help: "Step commits applied to runs.",
		}),
		commitConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memento_run_commit_conflicts_total",
			Help: "Step commits refused, by kind: revision (stale expected revision), lease (lost lease or stale epoch), transition (status not allowed).",
		}, []string{"kind"}),
		memoryWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memento_memory_writes_total",
			Help: "Long-term memory writes (add, extract with apply, confirm) by outcome: added, superseded, merged, held, refused, failed.",
		}, []string{"outcome"}),
	}
	// Pre-create the conflict series so dashboards see zeros, not gaps.
	for _, k := range []string{conflictRevision, conflictLease, conflictTransition} {
		m.commitConflicts.WithLabelValues(k)
	}
	m.reg.MustRegister(m.requests, m.duration, m.commits, m.commitConflicts, m.memoryWrites,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
