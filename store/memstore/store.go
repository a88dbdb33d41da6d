package memstore

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/toolop"
)

var (
	_ run.Store     = (*Store)(nil)
	_ toolop.Store  = (*Store)(nil)
	_ session.Store = (*Store)(nil)
	_ pii.Store     = (*Store)(nil)
)

// key names a row: every table is scoped by tenant first.
type key struct{ tenant, id string }

// Store keeps runs, the operation ledger, sessions, vault records and
// long-term memory (through Memory) in maps guarded by one mutex. Values are copied in and out, so a caller never
// aliases what is stored. The zero value is not usable; call New.
type Store struct {
	mu  sync.Mutex
	now func() time.Time

	runs      map[key]*runRow
	idem      map[key]string // (tenant, idempotency key) -> run id
	ops       map[key]toolop.Operation
	approvals map[key]toolop.Approval
	sessions  map[key]*sessionRow
	vault     map[key]pii.Record
	schemas   map[schemaKey]run.Schema
	mem       memoryState             // see Memory
	summaries map[key]compact.Summary // see Summaries
	ret       retrievalState          // see Retrieval
}

// New returns an empty store.
func New() *Store {
	return &Store{
		now:       time.Now,
		runs:      map[key]*runRow{},
		idem:      map[key]string{},
		ops:       map[key]toolop.Operation{},
		approvals: map[key]toolop.Approval{},
		sessions:  map[key]*sessionRow{},
		vault:     map[key]pii.Record{},
		schemas:   map[schemaKey]run.Schema{},
		mem:       newMemoryState(),
		summaries: map[key]compact.Summary{},
	}
}

// nowMicros is the store's clock at the precision every backend keeps.
func (s *Store) nowMicros() int64 { return s.now().UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// micro truncates t to what a SQL backend would give back.
func micro(t time.Time) time.Time { return fromMicros(t.UnixMicro()) }

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func cloneJSON(b json.RawMessage) json.RawMessage { return json.RawMessage(cloneBytes(b)) }

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

// SetClock replaces the store's clock (time.Now) for tests that move time;
// call it before the store is shared.
func (s *Store) SetClock(now func() time.Time) { s.now = now }
