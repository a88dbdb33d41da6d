package faultstore

import (
	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/toolop"
)

// Backend is a store of every kind in one value, as memstore.Store and the
// SQL backends are (retention deletes a run's ledger with it; a session
// store keeps the vault).
type Backend interface {
	run.Store
	toolop.Store
	session.Store
	pii.Store
}

// All is a Backend with faults injected; the four wrappers share one Injector.
type All struct {
	*Runs
	*Ops
	*Sessions
	*Vault
}

// All wraps every interface of s.
func (in *Injector) All(s Backend) All {
	return All{Runs: in.Runs(s), Ops: in.Ops(s), Sessions: in.Sessions(s), Vault: in.Vault(s)}
}
