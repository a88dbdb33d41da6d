package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mementohq/memento/run"
)

// PutSchema registers a schema version; see run.Store.
func (db *DB) PutSchema(ctx context.Context, tenantID string, s run.Schema) (run.Schema, bool, error) {
	var (
		out     run.Schema
		created bool
	)
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		prev, err := getSchema(ctx, tx, tenantID, s.WorkflowName, s.Version)
		if err == nil {
			if prev.Digest != s.Digest {
				return fmt.Errorf("registered already with digest %s: %w", prev.Digest, run.ErrSchemaConflict)
			}
			out = prev
			return nil
		}
		if !errors.Is(err, run.ErrSchemaNotFound) {
			return err
		}
		now := db.nowMicros()
		if _, err := tx.ExecContext(ctx, `INSERT INTO workflow_schemas (tenant_id, workflow_name, version, digest, schema, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, tenantID, s.WorkflowName, s.Version, s.Digest, string(s.Schema), now); err != nil {
			return err
		}
		s.CreatedAt = fromMicros(now)
		out, created = s, true
		return nil
	})
	if err != nil {
		return run.Schema{}, false, err // the service names the schema
	}
	return out, created, nil
}

func getSchema(ctx context.Context, q querier, tenantID, workflow string, version int) (run.Schema, error) {
	s := run.Schema{WorkflowName: workflow, Version: version}
	var (
		doc     string
		created int64
	)
	err := q.QueryRowContext(ctx, `SELECT digest, schema, created_at FROM workflow_schemas
		WHERE tenant_id = ? AND workflow_name = ? AND version = ?`, tenantID, workflow, version).Scan(&s.Digest, &doc, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return run.Schema{}, fmt.Errorf("%s v%d: %w", workflow, version, run.ErrSchemaNotFound)
	}
	if err != nil {
		return run.Schema{}, err
	}
	s.Schema = json.RawMessage(doc)
	s.CreatedAt = fromMicros(created)
	return s, nil
}

// GetSchema returns a registered schema; see run.Store.
func (db *DB) GetSchema(ctx context.Context, tenantID, workflow string, version int) (run.Schema, error) {
	s, err := getSchema(ctx, db.r, tenantID, workflow, version)
	if err != nil {
		return run.Schema{}, err // the service names the schema
	}
	return s, nil
}

// ListSchemas pages a workflow's schemas by version; see run.Store.
func (db *DB) ListSchemas(ctx context.Context, tenantID, workflow string, afterVersion, limit int) ([]run.Schema, error) {
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	rows, err := db.r.QueryContext(ctx, `SELECT version, digest, schema, created_at FROM workflow_schemas
		WHERE tenant_id = ? AND workflow_name = ? AND version > ? ORDER BY version LIMIT ?`, tenantID, workflow, afterVersion, limit)
	if err != nil {
		return nil, fmt.Errorf("list schemas: %w", err)
	}
	defer rows.Close()
	out := []run.Schema{}
	for rows.Next() {
		s := run.Schema{WorkflowName: workflow}
		var (
			doc     string
			created int64
		)
		if err := rows.Scan(&s.Version, &s.Digest, &doc, &created); err != nil {
			return nil, fmt.Errorf("list schemas: %w", err)
		}
		s.Schema = json.RawMessage(doc)
		s.CreatedAt = fromMicros(created)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list schemas: %w", err)
	}
	return out, nil
}

// checkSchema is the commit's schema condition (see run.Store): nil when the
// run's workflow has no registered schema or c names the digest of the one
// registered for the version the commit lands at.
func checkSchema(ctx context.Context, tx *sql.Tx, tenantID string, r run.Run, c run.StoreCommit) error {
	version := r.StateSchemaVersion
	if c.StateSchemaVersion != 0 {
		version = c.StateSchemaVersion
	}
	s, err := getSchema(ctx, tx, tenantID, r.WorkflowName, version)
	if err == nil {
		if s.Digest == c.Schema.Digest {
			return nil
		}
		return &run.SchemaRequiredError{WorkflowName: r.WorkflowName, Version: version, Registered: true}
	}
	if !errors.Is(err, run.ErrSchemaNotFound) {
		return err
	}
	var one int
	err = tx.QueryRowContext(ctx, `SELECT 1 FROM workflow_schemas WHERE tenant_id = ? AND workflow_name = ? LIMIT 1`,
		tenantID, r.WorkflowName).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return &run.SchemaRequiredError{WorkflowName: r.WorkflowName, Version: version}
}
