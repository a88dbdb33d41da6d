package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mementohq/memento/internal/localschema"
)

// Errors of the schema registrations kept in the store.
var (
	ErrSchemaNotFound = errors.New("state schema not registered")
	ErrSchemaConflict = errors.New("a different schema is registered for this version")
	ErrInvalidSchema  = errors.New("invalid JSON Schema")
)

// MaxSchemaBytes bounds a registered JSON Schema.
const MaxSchemaBytes = 256 << 10

// Schema is the JSON Schema of one state version of a workflow, registered
// per tenant. A registered version is immutable: its digest never changes,
// so a compiled copy can be cached forever by any server instance.
type Schema struct {
	WorkflowName string          `json:"workflow_name"`
	Version      int             `json:"version"`
	Digest       string          `json:"digest"`
	Schema       json.RawMessage `json:"schema"`
	CreatedAt    time.Time       `json:"created_at"`
}

// SchemaCheck tells a Store which registered schema the Service validated a
// commit's state against (zero when none).
type SchemaCheck struct {
	WorkflowName string
	Version      int
	Digest       string
}

// SchemaRequiredError is what a Store's Commit answers when the run's
// workflow has registered schemas and the commit's SchemaCheck is not the
// one of the version the commit lands at (the declared version, or the
// run's when it declares none). Registered is false when that version has
// no schema although others of the workflow do. Nothing was changed.
type SchemaRequiredError struct {
	WorkflowName string
	Version      int
	Registered   bool
}

func (e *SchemaRequiredError) Error() string {
	if !e.Registered {
		return fmt.Sprintf("%s has registered schemas but none for v%d", e.WorkflowName, e.Version)
	}
	return fmt.Sprintf("the state must be validated against the schema of %s v%d", e.WorkflowName, e.Version)
}

// compileSchema compiles a JSON Schema document.
func compileSchema(workflow string, version int, doc []byte) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	c := localschema.NewCompiler()
	url := "memento:///" + workflow + "/v" + strconv.Itoa(version) + ".json"
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	return s, nil
}

// schemaCache keeps compiled registered schemas by digest (immutable, so
// never stale) and, per run, the workflow and version its last commit
// showed: a guess that saves a failed round trip, never trusted, since the
// store checks the commit against the registration itself.
type schemaCache struct {
	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema // by digest
	byKey    map[string]Schema             // tenant/workflow/version -> registration
	runs     map[string]SchemaCheck        // tenant/run -> workflow and version last seen
}

const schemaCacheMax = 10000

func newSchemaCache() *schemaCache {
	return &schemaCache{compiled: map[string]*jsonschema.Schema{}, byKey: map[string]Schema{}, runs: map[string]SchemaCheck{}}
}

func schemaKey(tenant, workflow string, version int) string {
	return tenant + "\x00" + workflow + "\x00" + strconv.Itoa(version)
}

func (c *schemaCache) registration(tenant, workflow string, version int) (Schema, *jsonschema.Schema, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.byKey[schemaKey(tenant, workflow, version)]
	if !ok {
		return Schema{}, nil, false
	}
	return s, c.compiled[s.Digest], true
}

func (c *schemaCache) add(tenant string, s Schema, compiled *jsonschema.Schema) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byKey) >= schemaCacheMax {
		clear(c.byKey)
		clear(c.compiled)
	}
	c.byKey[schemaKey(tenant, s.WorkflowName, s.Version)] = s
	c.compiled[s.Digest] = compiled
}

func (c *schemaCache) lastSeen(tenant, runID string) (SchemaCheck, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.runs[tenant+"\x00"+runID]
	return s, ok
}

func (c *schemaCache) see(tenant, runID, workflow string, version int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.runs) >= schemaCacheMax {
		clear(c.runs)
	}
	c.runs[tenant+"\x00"+runID] = SchemaCheck{WorkflowName: workflow, Version: version}
}

// PutSchema registers the JSON Schema of a workflow's state version for a
// tenant. A version is immutable once registered: the same schema again
// answers created=false, a different one ErrSchemaConflict.
func (s *Service) PutSchema(ctx context.Context, tenantID, workflow string, version int, doc json.RawMessage) (Schema, bool, error) {
	if err := ValidID("workflow_name", workflow); err != nil {
		return Schema{}, false, err
	}
	if version < 1 || version > MaxSchemaVersion {
		return Schema{}, false, invalid("version must be between 1 and %d", MaxSchemaVersion)
	}
	if !utf8.Valid(doc) {
		return Schema{}, false, invalid("the schema is not valid UTF-8")
	}
	if len(doc) > MaxSchemaBytes {
		return Schema{}, false, fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidSchema, len(doc), MaxSchemaBytes)
	}
	if !isJSONObject(doc) && !bytes.Equal(bytes.TrimSpace(doc), []byte("true")) && !bytes.Equal(bytes.TrimSpace(doc), []byte("false")) {
		return Schema{}, false, fmt.Errorf("%w: a JSON Schema is an object or a boolean", ErrInvalidSchema)
	}
	if _, err := compileSchema(workflow, version, doc); err != nil {
		return Schema{}, false, fmt.Errorf("register schema %s v%d: %w", workflow, version, err)
	}
	sc := Schema{WorkflowName: workflow, Version: version, Digest: Digest(doc), Schema: doc}
	got, created, err := s.store.PutSchema(ctx, tenantID, sc)
	if err != nil {
		return Schema{}, false, fmt.Errorf("register schema %s v%d: %w", workflow, version, err)
	}
	return got, created, nil
}

// GetSchema returns a registered schema.
func (s *Service) GetSchema(ctx context.Context, tenantID, workflow string, version int) (Schema, error) {
	sc, err := s.store.GetSchema(ctx, tenantID, workflow, version)
	if err != nil {
		return Schema{}, fmt.Errorf("get schema %s v%d: %w", workflow, version, err)
	}
	return sc, nil
}

// ListSchemas returns a page of a workflow's registered schemas by version
// and the cursor of the next page ("" at the end).
func (s *Service) ListSchemas(ctx context.Context, tenantID, workflow, cur string, limit int) ([]Schema, string, error) {
	if limit <= 0 {
		limit = DefaultListSize
	}
	if limit > MaxListLimit {
		return nil, "", invalid("limit must be at most %d", MaxListLimit)
	}
	after := 0
	if cur != "" {
		n, err := strconv.Atoi(cur)
		if err != nil || n < 1 || n > MaxSchemaVersion {
			return nil, "", invalid("malformed cursor")
		}
		after = n
	}
	out, err := s.store.ListSchemas(ctx, tenantID, workflow, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list schemas of %s: %w", workflow, err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = strconv.Itoa(out[len(out)-1].Version)
	}
	return out, next, nil
}

// MaxSchemaVersion bounds state schema versions (they are 32-bit in storage).
const MaxSchemaVersion = 1<<31 - 1

// checkRegistered validates state against the registered schema of
// (workflow, version) and returns the check to hand to the store; a version
// with no schema while others of the workflow have one is refused. A cache
// miss costs one query, which reads the workflow's registrations at once.
func (s *Service) checkRegistered(ctx context.Context, tenantID, workflow string, version int, state json.RawMessage) (SchemaCheck, error) {
	sc, compiled, ok := s.schemas.registration(tenantID, workflow, version)
	if !ok {
		all, err := s.store.ListSchemas(ctx, tenantID, workflow, 0, MaxListLimit)
		if err != nil {
			return SchemaCheck{}, err
		}
		if len(all) == 0 {
			return SchemaCheck{}, nil
		}
		for _, r := range all {
			if r.Version == version {
				if compiled, err = compileSchema(workflow, version, r.Schema); err != nil {
					return SchemaCheck{}, fmt.Errorf("registered schema %s v%d: %w", workflow, version, err)
				}
				sc, ok = r, true
				s.schemas.add(tenantID, r, compiled)
			}
		}
		if !ok {
			return SchemaCheck{}, fmt.Errorf("%w: %s has registered state schemas but none for v%d", ErrNoMigrationPath, workflow, version)
		}
	}
	if err := validateWith(compiled, workflow, version, state); err != nil {
		return SchemaCheck{}, err
	}
	return SchemaCheck{WorkflowName: workflow, Version: version, Digest: sc.Digest}, nil
}

func validateWith(s *jsonschema.Schema, workflow string, version int, state json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(state))
	if err != nil {
		return fmt.Errorf("%w: %s v%d: %v", ErrSchemaValidation, workflow, version, err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%w: %s v%d: %v", ErrSchemaValidation, workflow, version, err)
	}
	return nil
}
