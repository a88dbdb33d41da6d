package run

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mementohq/memento/internal/localschema"
)

// MigrateFunc turns a state of version v into version v+1. It must be pure
// and deterministic: the same input always yields the same output.
type MigrateFunc func(state json.RawMessage) (json.RawMessage, error)

// Registry knows, per workflow, the current state schema version, the JSON
// Schema of each version and the migration from each version to the next.
type Registry struct {
	mu         sync.RWMutex
	current    map[string]int
	migrations map[string]map[int]MigrateFunc
	schemas    map[string]map[int]*jsonschema.Schema
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{
		current:    map[string]int{},
		migrations: map[string]map[int]MigrateFunc{},
		schemas:    map[string]map[int]*jsonschema.Schema{},
	}
}

// SetCurrent declares the schema version a workflow's code expects.
func (r *Registry) SetCurrent(workflow string, version int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current[workflow] = version
}

// empty tells whether nothing at all is registered.
func (r *Registry) empty() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.current) == 0 && len(r.schemas) == 0
}

// Current returns the declared version and whether the workflow is known.
func (r *Registry) Current(workflow string) (int, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.current[workflow]
	return v, ok
}

// RegisterMigration adds the migration from version `from` to from+1.
func (r *Registry) RegisterMigration(workflow string, from int, fn MigrateFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.migrations[workflow] == nil {
		r.migrations[workflow] = map[int]MigrateFunc{}
	}
	r.migrations[workflow][from] = fn
}

// RegisterSchema compiles and adds the JSON Schema of one state version.
func (r *Registry) RegisterSchema(workflow string, version int, schema []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return fmt.Errorf("parse schema %s v%d: %w", workflow, version, err)
	}
	c := localschema.NewCompiler()
	url := fmt.Sprintf("memento:///%s/v%d.json", workflow, version)
	if err := c.AddResource(url, doc); err != nil {
		return fmt.Errorf("add schema %s v%d: %w", workflow, version, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return fmt.Errorf("compile schema %s v%d: %w", workflow, version, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.schemas[workflow] == nil {
		r.schemas[workflow] = map[int]*jsonschema.Schema{}
	}
	r.schemas[workflow][version] = s
	return nil
}

// Validate checks state against the schema of its version, if one is registered.
func (r *Registry) Validate(workflow string, version int, state json.RawMessage) error {
	r.mu.RLock()
	s := r.schemas[workflow][version]
	r.mu.RUnlock()
	if s == nil {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(state))
	if err != nil {
		return fmt.Errorf("%w: %s v%d: %v", ErrSchemaValidation, workflow, version, err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%w: %s v%d: %v", ErrSchemaValidation, workflow, version, err)
	}
	return nil
}

// MigrationStep records one applied migration.
type MigrationStep struct {
	From         int    `json:"from"`
	To           int    `json:"to"`
	DigestBefore string `json:"digest_before"`
	DigestAfter  string `json:"digest_after"`
}

// CheckPath tells whether a state of version `from` can be brought to the
// workflow's current version. An unknown workflow needs no migration.
func (r *Registry) CheckPath(workflow string, from int) (target int, err error) {
	cur, ok := r.Current(workflow)
	if !ok {
		return from, nil
	}
	if from > cur {
		return 0, fmt.Errorf("%w: %s state v%d is newer than the code's v%d", ErrNoMigrationPath, workflow, from, cur)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for v := from; v < cur; v++ {
		if r.migrations[workflow][v] == nil {
			return 0, fmt.Errorf("%w: %s has no migration from v%d to v%d", ErrNoMigrationPath, workflow, v, v+1)
		}
	}
	return cur, nil
}

// Migrate applies the chain from `from` to the current version, one version
// at a time, validating after each step. It returns the final state and the
// steps with digests before and after each.
func (r *Registry) Migrate(workflow string, from int, state json.RawMessage) (json.RawMessage, []MigrationStep, error) {
	target, err := r.CheckPath(workflow, from)
	if err != nil {
		return nil, nil, err
	}
	if err := r.Validate(workflow, from, state); err != nil {
		return nil, nil, fmt.Errorf("before migration: %w", err)
	}
	var steps []MigrationStep
	for v := from; v < target; v++ {
		r.mu.RLock()
		fn := r.migrations[workflow][v]
		r.mu.RUnlock()
		next, err := fn(state)
		if err != nil {
			return nil, nil, fmt.Errorf("migrate %s v%d->v%d: %w", workflow, v, v+1, err)
		}
		if !isJSONObject(next) {
			return nil, nil, fmt.Errorf("%w: migrate %s v%d->v%d produced a non-object state", ErrSchemaValidation, workflow, v, v+1)
		}
		if err := r.Validate(workflow, v+1, next); err != nil {
			return nil, nil, fmt.Errorf("after migration v%d->v%d: %w", v, v+1, err)
		}
		steps = append(steps, MigrationStep{From: v, To: v + 1, DigestBefore: Digest(state), DigestAfter: Digest(next)})
		state = next
	}
	return state, steps, nil
}

// Digest is the sha256 of a JSON document in canonical form (keys sorted,
// no insignificant space), so equal states have equal digests.
func Digest(doc json.RawMessage) string {
	canon := doc
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err == nil {
		if b, err := json.Marshal(v); err == nil {
			canon = b
		}
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func isJSONObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	return json.Valid(b)
}
