package sqlite_test

import (
	"testing"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/storetest"
	"github.com/mementohq/memento/toolop"
)

func TestRecoverySuite(t *testing.T) {
	storetest.RecoverySuite(t, func(t *testing.T) (run.Store, toolop.Store) {
		db := openTemp(t)
		return db, db
	})
}
