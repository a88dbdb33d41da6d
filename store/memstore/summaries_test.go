package memstore_test

import (
	"testing"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/storetest"
)

func TestSummaryStoreSuite(t *testing.T) {
	storetest.SummaryStoreSuite(t, func(t *testing.T) compact.Store { return memstore.New().Summaries() })
}

func TestCompactionSuite(t *testing.T) {
	storetest.CompactionSuite(t, func(t *testing.T) storetest.CompactionBackend {
		s := memstore.New()
		return storetest.CompactionBackend{Runs: s, Ops: s, Sessions: s, Summaries: s.Summaries(), Retention: true}
	})
}
