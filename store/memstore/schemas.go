package memstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/mementohq/memento/run"
)

// schemaKey names a registered state schema.
type schemaKey struct {
	tenant, workflow string
	version          int
}

// PutSchema registers a schema version; see run.Store.
func (s *Store) PutSchema(ctx context.Context, tenantID string, sc run.Schema) (run.Schema, bool, error) {
	if err := ctx.Err(); err != nil {
		return run.Schema{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := schemaKey{tenantID, sc.WorkflowName, sc.Version}
	if prev, ok := s.schemas[k]; ok {
		if prev.Digest != sc.Digest {
			return run.Schema{}, false, fmt.Errorf("registered already with digest %s: %w", prev.Digest, run.ErrSchemaConflict)
		}
		return cloneSchema(prev), false, nil
	}
	sc.Schema = cloneJSON(sc.Schema)
	sc.CreatedAt = fromMicros(s.nowMicros())
	s.schemas[k] = sc
	return cloneSchema(sc), true, nil
}

func cloneSchema(sc run.Schema) run.Schema {
	sc.Schema = cloneJSON(sc.Schema)
	return sc
}

// GetSchema returns a registered schema; see run.Store.
func (s *Store) GetSchema(ctx context.Context, tenantID, workflow string, version int) (run.Schema, error) {
	if err := ctx.Err(); err != nil {
		return run.Schema{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, ok := s.schemas[schemaKey{tenantID, workflow, version}]
	if !ok {
		return run.Schema{}, fmt.Errorf("%s v%d: %w", workflow, version, run.ErrSchemaNotFound)
	}
	return cloneSchema(sc), nil
}

// ListSchemas pages a workflow's schemas by version; see run.Store.
func (s *Store) ListSchemas(ctx context.Context, tenantID, workflow string, afterVersion, limit int) ([]run.Schema, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []run.Schema{}
	for k, sc := range s.schemas {
		if k.tenant == tenantID && k.workflow == workflow && k.version > afterVersion {
			out = append(out, cloneSchema(sc))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// schemaGuard is the commit's schema condition (see run.Store); the caller
// holds s.mu.
func (s *Store) schemaGuard(tenantID string, r run.Run, c run.StoreCommit) error {
	version := r.StateSchemaVersion
	if c.StateSchemaVersion != 0 {
		version = c.StateSchemaVersion
	}
	if sc, ok := s.schemas[schemaKey{tenantID, r.WorkflowName, version}]; ok {
		if sc.Digest == c.Schema.Digest {
			return nil
		}
		return &run.SchemaRequiredError{WorkflowName: r.WorkflowName, Version: version, Registered: true}
	}
	for k := range s.schemas {
		if k.tenant == tenantID && k.workflow == r.WorkflowName {
			return &run.SchemaRequiredError{WorkflowName: r.WorkflowName, Version: version}
		}
	}
	return nil
}
