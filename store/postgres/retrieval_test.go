package postgres

import (
	"testing"

	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/storetest"
)

func TestRetrievalStoreSuite(t *testing.T) {
	db := openTestDB(t) // subtests use random tenants: one schema serves them all
	storetest.RetrievalStoreSuite(t, func(t *testing.T) retrieval.Store { return db.Retrieval() })
}
