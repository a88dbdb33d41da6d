package tracestore_test

import (
	"testing"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/store/tracestore"
	"github.com/mementohq/memento/storetest"
)

func TestMemoryPassesTheSuiteAndTraces(t *testing.T) {
	var r recorder
	r.init()
	tr := r.tp.Tracer("test")
	storetest.MemoryStoreSuite(t, func(t *testing.T) memory.Store {
		return tracestore.Memory{Store: memstore.New().Memory(), T: tr}
	})
	got := r.names()
	for _, want := range []string{"store.MemoryInsert", "store.MemoryGet", "store.MemoryList", "store.MemoryTransition",
		"store.MemoryForget", "store.MemorySearchText", "store.MemoryVectors", "store.MemoryPutVectors"} {
		if got[want] == 0 {
			t.Errorf("no span %s; got %v", want, got)
		}
	}
}
