package postgres

import (
	"testing"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/storetest"
)

func TestMemoryStoreSuite(t *testing.T) {
	db := openTestDB(t) // subtests use random tenants: one schema serves them all
	storetest.MemoryStoreSuite(t, func(t *testing.T) memory.Store { return db })
}
