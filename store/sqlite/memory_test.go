package sqlite_test

import (
	"testing"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/storetest"
)

func TestMemoryStoreSuite(t *testing.T) {
	db := openTemp(t) // subtests use random tenants: one file serves them all
	storetest.MemoryStoreSuite(t, func(t *testing.T) memory.Store { return db })
}
