package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mementohq/memento/run"
)

// PutSchema registers a schema version; see run.Store.
func (db *DB) PutSchema(ctx context.Context, tenantID string, s run.Schema) (run.Schema, bool, error) {
	err := db.pool.QueryRow(ctx, `
		INSERT INTO workflow_schemas (tenant_id, workflow_name, version, digest, schema, created_at)
		VALUES ($1, $2, $3, $4, $5, now())
		ON CONFLICT DO NOTHING RETURNING created_at`,
		tenantID, s.WorkflowName, s.Version, s.Digest, string(s.Schema)).Scan(&s.CreatedAt)
	if err == nil {
		s.CreatedAt = s.CreatedAt.UTC()
		return s, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return run.Schema{}, false, fmt.Errorf("register schema: %w", err)
	}
	prev, err := db.GetSchema(ctx, tenantID, s.WorkflowName, s.Version)
	if err != nil {
		return run.Schema{}, false, err
	}
	if prev.Digest != s.Digest {
		return run.Schema{}, false, fmt.Errorf("registered already with digest %s: %w", prev.Digest, run.ErrSchemaConflict)
	}
	return prev, false, nil
}

// GetSchema returns a registered schema; see run.Store.
func (db *DB) GetSchema(ctx context.Context, tenantID, workflow string, version int) (run.Schema, error) {
	s := run.Schema{WorkflowName: workflow, Version: version}
	var doc string
	err := db.pool.QueryRow(ctx, `
		SELECT digest, schema, created_at FROM workflow_schemas
		WHERE tenant_id = $1 AND workflow_name = $2 AND version = $3`, tenantID, workflow, version).
		Scan(&s.Digest, &doc, &s.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return run.Schema{}, fmt.Errorf("%s v%d: %w", workflow, version, run.ErrSchemaNotFound)
	}
	if err != nil {
		return run.Schema{}, err // the service names the schema
	}
	s.Schema = json.RawMessage(doc)
	s.CreatedAt = s.CreatedAt.UTC()
	return s, nil
}

// ListSchemas pages a workflow's schemas by version; see run.Store.
func (db *DB) ListSchemas(ctx context.Context, tenantID, workflow string, afterVersion, limit int) ([]run.Schema, error) {
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	rows, err := db.pool.Query(ctx, `
		SELECT version, digest, schema, created_at FROM workflow_schemas
		WHERE tenant_id = $1 AND workflow_name = $2 AND version > $3
		ORDER BY version LIMIT $4`, tenantID, workflow, afterVersion, limit)
	if err != nil {
		return nil, fmt.Errorf("list schemas of %s: %w", workflow, err)
	}
	defer rows.Close()
	var out []run.Schema
	for rows.Next() {
		s := run.Schema{WorkflowName: workflow}
		var doc string
		if err := rows.Scan(&s.Version, &s.Digest, &doc, &s.CreatedAt); err != nil {
			return nil, fmt.Errorf("list schemas of %s: %w", workflow, err)
		}
		s.Schema = json.RawMessage(doc)
		s.CreatedAt = s.CreatedAt.UTC()
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list schemas of %s: %w", workflow, err)
	}
	return out, nil
}

// schemaGuardSQL is the commit's schema condition on the run row being
// updated: its workflow has no registered schema (the aggregate over no
// row is NULL), or $19 is the digest of the one registered for the version
// the commit lands at. One probe of the workflow's few rows.
const schemaGuardSQL = `
	  AND coalesce((SELECT bool_or(w.version = CASE WHEN $10::int > 0 THEN $10::int ELSE runs.state_schema_version END
	                               AND w.digest = $19::text)
	                FROM workflow_schemas w
	                WHERE w.tenant_id = $1 AND w.workflow_name = runs.workflow_name), true)`

// schemaRequired tells, for a commit the guard refused, whether the schema
// condition is what failed, as a *run.SchemaRequiredError (nil if not).
func (db *DB) schemaRequired(ctx context.Context, tenantID, runID string, c run.StoreCommit) (*run.SchemaRequiredError, error) {
	var (
		workflow           string
		version            int
		hasAny, registered bool
		digest             *string
	)
	err := db.pool.QueryRow(ctx, `
		SELECT r.workflow_name, v.version,
			EXISTS (SELECT 1 FROM workflow_schemas w WHERE w.tenant_id = $1 AND w.workflow_name = r.workflow_name),
			(SELECT w.digest FROM workflow_schemas w WHERE w.tenant_id = $1 AND w.workflow_name = r.workflow_name AND w.version = v.version)
		FROM runs r, LATERAL (SELECT CASE WHEN $3::int > 0 THEN $3::int ELSE r.state_schema_version END AS version) v
		WHERE r.tenant_id = $1 AND r.run_id = $2`, tenantID, runID, c.StateSchemaVersion).
		Scan(&workflow, &version, &hasAny, &digest)
	if err != nil {
		return nil, err
	}
	registered = digest != nil
	switch {
	case !hasAny:
		return nil, nil
	case !registered || *digest != c.Schema.Digest:
		return &run.SchemaRequiredError{WorkflowName: workflow, Version: version, Registered: registered}, nil
	}
	return nil, nil
}

// createSchemaRequired tells, for a create the guard of createRunSQL
// refused while no run clashes, whether the schema condition failed: the
// workflow has registered schemas and digest is not that of version's.
func (db *DB) createSchemaRequired(ctx context.Context, tenantID, workflow string, version int, digest string) (*run.SchemaRequiredError, error) {
	var (
		hasAny bool
		stored *string
	)
	err := db.pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM workflow_schemas WHERE tenant_id = $1 AND workflow_name = $2),
			(SELECT digest FROM workflow_schemas WHERE tenant_id = $1 AND workflow_name = $2 AND version = $3)`,
		tenantID, workflow, version).Scan(&hasAny, &stored)
	if err != nil {
		return nil, fmt.Errorf("read registered schemas: %w", err)
	}
	switch {
	case !hasAny, stored != nil && *stored == digest:
		return nil, nil
	case stored != nil:
		return &run.SchemaRequiredError{WorkflowName: workflow, Version: version, Registered: true}, nil
	}
	return &run.SchemaRequiredError{WorkflowName: workflow, Version: version}, nil
}
