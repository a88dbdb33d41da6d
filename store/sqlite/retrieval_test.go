package sqlite_test

import (
	"testing"

	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/storetest"
)

func TestRetrievalStoreSuite(t *testing.T) {
	db := openTemp(t) // subtests use random tenants: one file serves them all
	storetest.RetrievalStoreSuite(t, func(t *testing.T) retrieval.Store { return db.Retrieval() })
}
