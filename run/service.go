package run

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/mementohq/memento/internal/periodic"
)

// DefaultMaxStateBytes is the state size limit unless configured: large
// payloads belong in an artifact store, with a digest and URI in the state.
const DefaultMaxStateBytes = 1 << 20

// MaxRevision bounds a revision a request may name: no run gets near it
// (2^53, the largest integer every JSON reader holds exactly), and the
// stores' 64-bit arithmetic on one past it must not overflow.
const MaxRevision = 1 << 53

// Limits on identifiers and lists.
const (
	MaxIDLength     = 256 // as every id the HTTP API takes in a path
	MaxListLimit    = 1000
	DefaultListSize = 100
	MaxLeaseTTL     = 24 * time.Hour
	MinLeaseTTL     = 10 * time.Millisecond
)

// Options configure a Service.
type Options struct {
	MaxStateBytes int       // 0 means DefaultMaxStateBytes
	Registry      *Registry // nil means no migrations or schemas
}

// Service applies the rules of durable runs on top of a Store.
type Service struct {
	store    Store
	maxState int
	reg      *Registry
	schemas  *schemaCache
}

// NewService wires a Service to a Store.
func NewService(store Store, opts Options) *Service {
	if opts.MaxStateBytes <= 0 {
		opts.MaxStateBytes = DefaultMaxStateBytes
	}
	if opts.Registry == nil {
		opts.Registry = NewRegistry()
	}
	return &Service{store: store, maxState: opts.MaxStateBytes, reg: opts.Registry, schemas: newSchemaCache()}
}

// Registry returns the migration registry in use.
func (s *Service) Registry() *Registry { return s.reg }

// MaxStateBytes is the size limit of a state and of an event payload.
func (s *Service) MaxStateBytes() int { return s.maxState }

// Store returns the underlying store.
func (s *Service) Store() Store { return s.store }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

// ValidID checks a caller-chosen identifier.
func ValidID(kind, id string) error {
	if id == "" {
		return invalid("%s is required", kind)
	}
	if len(id) > MaxIDLength {
		return invalid("%s is longer than %d bytes", kind, MaxIDLength)
	}
	if !utf8.ValidString(id) {
		return invalid("%s is not valid UTF-8", kind)
	}
	for _, r := range id {
		if r < 0x21 || r == 0x7f || r == '/' || r == '?' || r == '#' || r == '%' {
			return invalid("%s contains a character that is not allowed (space, control, '/', '?', '#', '%%')", kind)
		}
	}
	if id == "." || id == ".." {
		// A URL path cannot name it: clients and servers resolve dot segments.
		return invalid("%s must not be %q", kind, id)
	}
	return nil
}

func (s *Service) checkState(state json.RawMessage) (json.RawMessage, error) {
	if len(state) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if len(state) > s.maxState {
		return nil, fmt.Errorf("%w: %d bytes, limit %d; store large payloads as artifacts and keep a digest and URI in the state", ErrStateTooLarge, len(state), s.maxState)
	}
	if !isJSONObject(state) {
		return nil, invalid("state must be a JSON object")
	}
	return state, nil
}

// RequestDigest is the digest of a create request, for idempotency checks.
func RequestDigest(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Create makes a new run in status running at revision 1.
func (s *Service) Create(ctx context.Context, tenantID string, req CreateRequest, idempotencyKey string) (Run, bool, error) {
	return s.create(ctx, tenantID, req, idempotencyKey, "", 0)
}

// CreateLeased is Create with the new run's lease taken for owner, for
// ttl, in the same store call: a worker that creates a run to drive it at
// once saves AcquireLease's round trip. The lease is returned only when
// the run was created (created=true); a run that existed already (an
// idempotent retry) is returned as it is, its lease to be acquired as usual.
func (s *Service) CreateLeased(ctx context.Context, tenantID string, req CreateRequest, idempotencyKey, owner string, ttl time.Duration) (Run, Lease, bool, error) {
	if err := ValidID("lease owner", owner); err != nil {
		return Run{}, Lease{}, false, err
	}
	if ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		// As AcquireLease: a lease it could not renew is refused before
		// the run is created (a worker's heartbeat renews it at ttl/3).
		return Run{}, Lease{}, false, invalid("lease ttl must be between %s and %s", MinLeaseTTL, MaxLeaseTTL)
	}
	r, created, err := s.create(ctx, tenantID, req, idempotencyKey, owner, ttl)
	if err != nil || !created {
		return r, Lease{}, created, err
	}
	if r.LeaseOwner != owner || r.LeaseEpoch < 1 || r.LeaseExpiresAt == nil {
		return Run{}, Lease{}, false, fmt.Errorf("create run %s: the store did not take the lease", r.RunID)
	}
	return r, Lease{Owner: owner, Epoch: r.LeaseEpoch, ExpiresAt: *r.LeaseExpiresAt, Revision: r.StateRevision}, true, nil
}

func (s *Service) create(ctx context.Context, tenantID string, req CreateRequest, idempotencyKey, owner string, ttl time.Duration) (Run, bool, error) {
	// The digest covers the request as sent: a retry without run_id must match
	// the first attempt, whose generated id and defaults it cannot know.
	digest := RequestDigest(req)
	if req.RunID == "" {
		req.RunID = uuid.Must(uuid.NewV7()).String()
	} else if err := ValidID("run_id", req.RunID); err != nil {
		return Run{}, false, err
	}
	if err := ValidID("workflow_name", req.WorkflowName); err != nil {
		return Run{}, false, err
	}
	if len(req.WorkflowVersion) > MaxIDLength {
		return Run{}, false, invalid("workflow_version is longer than %d bytes", MaxIDLength)
	}
	if len(idempotencyKey) > MaxIDLength {
		return Run{}, false, invalid("Idempotency-Key is longer than %d bytes", MaxIDLength)
	}
	if len(req.NextStep) > MaxIDLength {
		return Run{}, false, invalid("next_step is longer than %d bytes", MaxIDLength)
	}
	if req.StateSchemaVersion < 0 || req.StateSchemaVersion > math.MaxInt32 {
		return Run{}, false, invalid("state_schema_version must be between 0 and %d", math.MaxInt32)
	}
	if req.StateSchemaVersion == 0 {
		if cur, ok := s.reg.Current(req.WorkflowName); ok {
			req.StateSchemaVersion = cur
		} else {
			req.StateSchemaVersion = 1
		}
	}
	state, err := s.checkState(req.State)
	if err != nil {
		return Run{}, false, err
	}
	if _, err := s.reg.CheckPath(req.WorkflowName, req.StateSchemaVersion); err != nil {
		return Run{}, false, err
	}
	if err := s.reg.Validate(req.WorkflowName, req.StateSchemaVersion, state); err != nil {
		return Run{}, false, err
	}
	// Only what is cached, as in commitChecked: a workflow without
	// registered schemas costs no query, and the store refuses a create
	// that skipped one (SchemaRequiredError), which then costs one.
	var check SchemaCheck
	if reg, compiled, hit := s.schemas.registration(tenantID, req.WorkflowName, req.StateSchemaVersion); hit {
		if err := validateWith(compiled, req.WorkflowName, req.StateSchemaVersion, state); err != nil {
			return Run{}, false, err
		}
		check = SchemaCheck{WorkflowName: req.WorkflowName, Version: req.StateSchemaVersion, Digest: reg.Digest}
	}
	nr := NewRun{
		Schema:     check,
		LeaseOwner: owner,
		LeaseTTL:   ttl,
		Run: Run{
			TenantID:           tenantID,
			RunID:              req.RunID,
			WorkflowName:       req.WorkflowName,
			WorkflowVersion:    req.WorkflowVersion,
			StateSchemaVersion: req.StateSchemaVersion,
			Status:             StatusRunning,
			NextStep:           req.NextStep,
			State:              state,
			StateRevision:      1,
		},
		IdempotencyKey: idempotencyKey,
	}
	if idempotencyKey != "" {
		nr.RequestDigest = digest
	}
	for attempt := 0; ; attempt++ {
		r, created, err := s.store.CreateRun(ctx, nr)
		var need *SchemaRequiredError
		if errors.As(err, &need) && attempt < 2 {
			if nr.Schema, err = s.checkRegistered(ctx, tenantID, req.WorkflowName, req.StateSchemaVersion, state); err != nil {
				return Run{}, false, fmt.Errorf("create run %s: %w", req.RunID, err)
			}
			continue
		}
		if errors.Is(err, ErrIdempotencyMismatch) {
			// Name the key, not the id generated for this attempt, which
			// no run has.
			return Run{}, false, fmt.Errorf("create run: Idempotency-Key %q: %w", idempotencyKey, err)
		}
		if err != nil {
			return Run{}, false, fmt.Errorf("create run %s: %w", req.RunID, err)
		}
		s.schemas.see(tenantID, r.RunID, r.WorkflowName, r.StateSchemaVersion)
		return r, created, nil
	}
}

// Get returns a run as stored.
func (s *Service) Get(ctx context.Context, tenantID, runID string) (Run, error) {
	r, err := s.store.GetRun(ctx, tenantID, runID)
	if err != nil {
		return Run{}, fmt.Errorf("get run %s: %w", runID, err)
	}
	s.schemas.see(tenantID, runID, r.WorkflowName, r.StateSchemaVersion)
	return r, nil
}

type cursor struct {
	C int64  `json:"c"`
	R string `json:"r"`
}

// EncodeCursor makes an opaque cursor from a keyset position.
func EncodeCursor(createdAt time.Time, runID string) string {
	b, _ := json.Marshal(cursor{C: createdAt.UnixMicro(), R: runID})
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor reads a cursor made by EncodeCursor.
func DecodeCursor(c string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", invalid("malformed cursor")
	}
	var cur cursor
	if err := json.Unmarshal(b, &cur); err != nil || ValidID("cursor", cur.R) != nil {
		// An id no run can have (NUL, invalid UTF-8) is no cursor we gave.
		return time.Time{}, "", invalid("malformed cursor")
	}
	return time.UnixMicro(cur.C).UTC(), cur.R, nil
}

// List returns a page of runs and the cursor of the next page ("" at the end).
func (s *Service) List(ctx context.Context, tenantID string, status Status, workflow, cur string, limit int) ([]Run, string, error) {
	if limit <= 0 {
		limit = DefaultListSize
	}
	if limit > MaxListLimit {
		return nil, "", invalid("limit must be at most %d", MaxListLimit)
	}
	if status != "" && !ValidStatus(status) {
		return nil, "", invalid("unknown status %q", status)
	}
	f := ListFilter{Status: status, WorkflowName: workflow, Limit: limit + 1}
	if cur != "" {
		t, id, err := DecodeCursor(cur)
		if err != nil {
			return nil, "", err
		}
		f.AfterCreated, f.AfterRunID = t, id
	}
	runs, err := s.store.ListRuns(ctx, tenantID, f)
	if err != nil {
		return nil, "", fmt.Errorf("list runs: %w", err)
	}
	next := ""
	if len(runs) > limit {
		runs = runs[:limit]
		last := runs[len(runs)-1]
		next = EncodeCursor(last.CreatedAt, last.RunID)
	}
	return runs, next, nil
}

// Events returns events after seq `after`, at most limit.
func (s *Service) Events(ctx context.Context, tenantID, runID string, after int64, limit int) ([]Event, error) {
	if limit <= 0 {
		limit = DefaultListSize
	}
	if limit > MaxListLimit {
		return nil, invalid("limit must be at most %d", MaxListLimit)
	}
	if after < 0 {
		return nil, invalid("after must not be negative")
	}
	// The store answers ErrNotFound for an unknown run: no separate lookup.
	evs, err := s.store.ListEvents(ctx, tenantID, runID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list events of run %s: %w", runID, err)
	}
	return evs, nil
}

// AcquireLease takes (epoch 0) or renews (epoch > 0) the lease of a run.
func (s *Service) AcquireLease(ctx context.Context, tenantID, runID, owner string, epoch int64, ttl time.Duration) (Lease, error) {
	if err := ValidID("owner", owner); err != nil {
		return Lease{}, err
	}
	if ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return Lease{}, invalid("lease ttl must be between %s and %s", MinLeaseTTL, MaxLeaseTTL)
	}
	if epoch < 0 {
		return Lease{}, invalid("epoch must not be negative")
	}
	l, err := s.store.AcquireLease(ctx, tenantID, runID, owner, epoch, ttl)
	if err != nil {
		return Lease{}, fmt.Errorf("lease run %s for %s: %w", runID, owner, err)
	}
	return l, nil
}

// ReleaseLease gives the lease back.
func (s *Service) ReleaseLease(ctx context.Context, tenantID, runID string, l Lease) error {
	if err := ValidID("lease.owner", l.Owner); err != nil {
		return err
	}
	if l.Epoch <= 0 {
		return invalid("lease.epoch must be positive")
	}
	if err := s.store.ReleaseLease(ctx, tenantID, runID, l.Owner, l.Epoch); err != nil {
		return fmt.Errorf("release lease of run %s: %w", runID, err)
	}
	return nil
}

// Commit validates a commit and hands it to the store, which applies it in
// one transaction guarded by revision and lease.
func (s *Service) Commit(ctx context.Context, tenantID, runID string, c CommitRequest) (Run, Event, error) {
	sc, err := s.validateCommit(c)
	if err != nil {
		return Run{}, Event{}, err
	}
	r, ev, err := s.commitChecked(ctx, tenantID, runID, sc)
	if err != nil {
		return Run{}, Event{}, fmt.Errorf("commit run %s at revision %d: %w", runID, c.ExpectedRevision, err)
	}
	return r, ev, nil
}

// commitChecked validates the state against the schema of the version the
// commit lands at (the declared one, or the run's) and commits. The run's
// workflow and version come from what this service last saw of it; the
// store refuses a commit validated against anything but the registered
// schema of that version (SchemaRequiredError), and then the state is
// validated against that one and the commit tried again.
func (s *Service) commitChecked(ctx context.Context, tenantID, runID string, sc StoreCommit) (Run, Event, error) {
	seen, ok := s.schemas.lastSeen(tenantID, runID)
	if sc.StateSchemaVersion != 0 {
		// A declared version (a migration, mostly: rare) is checked against
		// the run as it is at the expected revision; at any other revision
		// the store refuses the commit anyway.
		r, err := s.store.GetRun(ctx, tenantID, runID)
		if err != nil {
			return Run{}, Event{}, err
		}
		if r.StateRevision == sc.ExpectedRevision && sc.StateSchemaVersion < r.StateSchemaVersion {
			return Run{}, Event{}, invalid("state_schema_version %d is older than the run's %d: a state moves to newer schema versions only (migrations are not undone)", sc.StateSchemaVersion, r.StateSchemaVersion)
		}
		seen, ok = SchemaCheck{WorkflowName: r.WorkflowName, Version: r.StateSchemaVersion}, true
	}
	if !ok && !s.reg.empty() {
		// Schemas registered in code need the workflow before the store call.
		r, err := s.store.GetRun(ctx, tenantID, runID)
		if err != nil {
			return Run{}, Event{}, err
		}
		seen, ok = SchemaCheck{WorkflowName: r.WorkflowName, Version: r.StateSchemaVersion}, true
	}
	if ok {
		version := seen.Version
		if sc.StateSchemaVersion != 0 {
			version = sc.StateSchemaVersion
			if _, err := s.reg.CheckPath(seen.WorkflowName, version); err != nil {
				return Run{}, Event{}, err
			}
		}
		if err := s.reg.Validate(seen.WorkflowName, version, sc.State); err != nil {
			return Run{}, Event{}, err
		}
		// Only what is cached: a workflow without registered schemas costs
		// no query, and one with them answers SchemaRequiredError once.
		if reg, compiled, hit := s.schemas.registration(tenantID, seen.WorkflowName, version); hit {
			if err := validateWith(compiled, seen.WorkflowName, version, sc.State); err != nil {
				return Run{}, Event{}, err
			}
			sc.Schema = SchemaCheck{WorkflowName: seen.WorkflowName, Version: version, Digest: reg.Digest}
		}
	}
	for attempt := 0; ; attempt++ {
		r, ev, err := s.store.Commit(ctx, tenantID, runID, sc)
		var need *SchemaRequiredError
		if !errors.As(err, &need) {
			if err == nil {
				s.schemas.see(tenantID, runID, r.WorkflowName, r.StateSchemaVersion)
			}
			return r, ev, err
		}
		if !need.Registered {
			return Run{}, Event{}, fmt.Errorf("%w: %v", ErrNoMigrationPath, need)
		}
		if attempt >= 2 {
			return Run{}, Event{}, err
		}
		s.schemas.see(tenantID, runID, need.WorkflowName, need.Version)
		if sc.StateSchemaVersion != 0 {
			if _, err := s.reg.CheckPath(need.WorkflowName, sc.StateSchemaVersion); err != nil {
				return Run{}, Event{}, err
			}
		}
		if err := s.reg.Validate(need.WorkflowName, need.Version, sc.State); err != nil {
			return Run{}, Event{}, err
		}
		if sc.Schema, err = s.checkRegistered(ctx, tenantID, need.WorkflowName, need.Version, sc.State); err != nil {
			return Run{}, Event{}, err
		}
	}
}

func (s *Service) validateCommit(c CommitRequest) (StoreCommit, error) {
	if c.ExpectedRevision < 1 || c.ExpectedRevision > MaxRevision {
		return StoreCommit{}, invalid("expected_revision must be within [1, %d]", int64(MaxRevision))
	}
	if err := ValidID("lease.owner", c.Lease.Owner); err != nil {
		return StoreCommit{}, err
	}
	if c.Lease.Epoch < 1 {
		return StoreCommit{}, invalid("lease.epoch must be at least 1")
	}
	if err := ValidID("event.event_type", c.Event.EventType); err != nil {
		return StoreCommit{}, err
	}
	if strings.HasPrefix(c.Event.EventType, "run.") {
		return StoreCommit{}, invalid("event types starting with \"run.\" are reserved")
	}
	if len(c.Event.StepID) > MaxIDLength || len(c.NextStep) > MaxIDLength {
		return StoreCommit{}, invalid("step ids must be at most %d bytes", MaxIDLength)
	}
	// Stores keep these as 32-bit integers.
	if c.Event.Attempt < 0 || c.Event.Attempt > math.MaxInt32 {
		return StoreCommit{}, invalid("event.attempt must be between 0 and %d", math.MaxInt32)
	}
	if len(c.StatusReason) > 4096 {
		return StoreCommit{}, invalid("status_reason must be at most 4096 bytes")
	}
	if c.StateSchemaVersion < 0 || c.StateSchemaVersion > math.MaxInt32 {
		return StoreCommit{}, invalid("state_schema_version must be between 0 and %d", math.MaxInt32)
	}
	if c.VerifiedSeq < 0 || c.VerifiedSeq > c.ExpectedRevision {
		return StoreCommit{}, invalid("verified seq must be between 0 and expected_revision")
	}
	payload := c.Event.Payload
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	} else if !json.Valid(payload) {
		return StoreCommit{}, invalid("event.payload must be valid JSON")
	}
	if len(payload) > s.maxState {
		return StoreCommit{}, fmt.Errorf("%w: event payload %d bytes, limit %d", ErrStateTooLarge, len(payload), s.maxState)
	}
	if len(c.State) == 0 {
		return StoreCommit{}, invalid("state is required (the whole new state, a JSON object)")
	}
	state, err := s.checkState(c.State)
	if err != nil {
		return StoreCommit{}, err
	}
	from := []Status{StatusRunning, StatusSuspended}
	if c.Status != "" {
		if !ValidStatus(c.Status) {
			return StoreCommit{}, invalid("unknown status %q", c.Status)
		}
		from = AllowedFrom(c.Status)
	}
	ev := c.Event
	ev.Payload = payload
	return StoreCommit{
		ExpectedRevision:   c.ExpectedRevision,
		Owner:              c.Lease.Owner,
		Epoch:              c.Lease.Epoch,
		Event:              ev,
		State:              state,
		NextStep:           c.NextStep,
		Status:             c.Status,
		StatusReason:       c.StatusReason,
		StateSchemaVersion: c.StateSchemaVersion,
		FromStatuses:       from,
		Spend:              SpendOf(payload),
		VerifiedSeq:        c.VerifiedSeq,
	}, nil
}

// Checkpoint labels a revision of a run (the current one if revision is 0).
func (s *Service) Checkpoint(ctx context.Context, tenantID, runID, label string, revision int64) (Checkpoint, error) {
	cp, _, err := s.CheckpointKeyed(ctx, tenantID, runID, label, revision, "")
	return cp, err
}

// CheckpointKeyed is Checkpoint under an idempotency key: a retry finds the
// label it made, at the revision it named (or at the run's current one),
// and answers it with created false. Without a key, or for a label at
// another revision, an existing label is ErrCheckpointExists: a checkpoint
// is never moved.
func (s *Service) CheckpointKeyed(ctx context.Context, tenantID, runID, label string, revision int64, idempotencyKey string) (Checkpoint, bool, error) {
	if err := ValidID("label", label); err != nil {
		return Checkpoint{}, false, err
	}
	if revision < 0 || revision > MaxRevision {
		return Checkpoint{}, false, invalid("revision must be within [0, %d]", int64(MaxRevision))
	}
	if len(idempotencyKey) > MaxIDLength {
		return Checkpoint{}, false, invalid("Idempotency-Key is longer than %d bytes", MaxIDLength)
	}
	if revision == 0 {
		r, err := s.store.GetRun(ctx, tenantID, runID)
		if err != nil {
			return Checkpoint{}, false, fmt.Errorf("checkpoint run %s: %w", runID, err)
		}
		revision = r.StateRevision
	}
	cp, err := s.store.CreateCheckpoint(ctx, tenantID, runID, label, revision)
	if errors.Is(err, ErrCheckpointExists) && idempotencyKey != "" {
		if prev, gerr := s.store.GetCheckpoint(ctx, tenantID, runID, label); gerr == nil && prev.Revision == revision {
			return prev, false, nil
		}
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("checkpoint run %s as %q: %w", runID, label, err)
	}
	return cp, true, nil
}

// EncodeCheckpointCursor makes an opaque cursor from a checkpoint's keyset position.
func EncodeCheckpointCursor(cp Checkpoint) string {
	b, _ := json.Marshal(cursor{C: cp.Revision, R: cp.Label})
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCheckpointCursor reads a cursor made by EncodeCheckpointCursor.
func DecodeCheckpointCursor(c string) (revision int64, label string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", invalid("malformed cursor")
	}
	var cur cursor
	if err := json.Unmarshal(b, &cur); err != nil || ValidID("cursor", cur.R) != nil || cur.C < 1 {
		return 0, "", invalid("malformed cursor")
	}
	return cur.C, cur.R, nil
}

// Checkpoints returns a page of a run's checkpoints, by revision then label,
// and the cursor of the next page ("" at the end).
func (s *Service) Checkpoints(ctx context.Context, tenantID, runID, cur string, limit int) ([]Checkpoint, string, error) {
	if limit <= 0 {
		limit = DefaultListSize
	}
	if limit > MaxListLimit {
		return nil, "", invalid("limit must be at most %d", MaxListLimit)
	}
	var (
		afterRev   int64
		afterLabel string
	)
	if cur != "" {
		var err error
		if afterRev, afterLabel, err = DecodeCheckpointCursor(cur); err != nil {
			return nil, "", err
		}
	}
	cps, err := s.store.ListCheckpoints(ctx, tenantID, runID, afterRev, afterLabel, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list checkpoints of run %s: %w", runID, err)
	}
	next := ""
	if len(cps) > limit {
		cps = cps[:limit]
		next = EncodeCheckpointCursor(cps[len(cps)-1])
	}
	return cps, next, nil
}

// ForkRequest names where a fork starts: a revision or a checkpoint label.
type ForkRequest struct {
	FromRevision int64  `json:"from_revision,omitempty"`
	Checkpoint   string `json:"checkpoint,omitempty"`
	RunID        string `json:"run_id,omitempty"`
}

// Fork makes a new run from a past revision or checkpoint of a run.
func (s *Service) Fork(ctx context.Context, tenantID, runID string, req ForkRequest) (Run, error) {
	r, _, err := s.ForkKeyed(ctx, tenantID, runID, req, "")
	return r, err
}

// forkIDSpace names the run ids ForkKeyed derives from idempotency keys.
var forkIDSpace = uuid.MustParse("6f1c2a8e-3d4b-5c6d-8e9f-0a1b2c3d4e5f")

// ForkKeyed is Fork with an idempotency key (as Create takes one): the same
// fork asked again under the key answers the run the first made, with
// created false, and the key with another revision or checkpoint of the
// same run is ErrIdempotencyMismatch. Keys are scoped by the source run,
// as the request path is. Without a run_id the key names the new run (a
// UUID derived from tenant, source run and key), so a retry needs no record
// beside the run itself; with one, a run of that id forked from the same
// revision of the same run is the earlier answer.
func (s *Service) ForkKeyed(ctx context.Context, tenantID, runID string, req ForkRequest, idempotencyKey string) (Run, bool, error) {
	if (req.FromRevision == 0) == (req.Checkpoint == "") {
		return Run{}, false, invalid("name exactly one of from_revision or checkpoint")
	}
	if req.FromRevision < 0 || req.FromRevision > MaxRevision {
		return Run{}, false, invalid("from_revision must be within [1, %d]", int64(MaxRevision))
	}
	if len(idempotencyKey) > MaxIDLength {
		return Run{}, false, invalid("Idempotency-Key is longer than %d bytes", MaxIDLength)
	}
	derived, sent := false, req
	switch {
	case req.RunID == "" && idempotencyKey != "":
		req.RunID = uuid.NewSHA1(forkIDSpace, []byte(tenantID+"\x00"+runID+"\x00"+idempotencyKey)).String()
		derived = true
	case req.RunID == "":
		req.RunID = uuid.Must(uuid.NewV7()).String()
	default:
		if err := ValidID("run_id", req.RunID); err != nil {
			return Run{}, false, err
		}
	}
	rev := req.FromRevision
	if req.Checkpoint != "" {
		cp, err := s.store.GetCheckpoint(ctx, tenantID, runID, req.Checkpoint)
		if err != nil {
			return Run{}, false, fmt.Errorf("fork run %s from checkpoint %q: %w", runID, req.Checkpoint, err)
		}
		rev = cp.Revision
	}
	nr := NewRun{Run: Run{TenantID: tenantID, RunID: req.RunID, ParentRunID: runID, ParentRevision: rev}}
	if idempotencyKey != "" {
		// The key is kept with the fork: sent again with another request
		// (another run_id, parent or point), it is a mismatch.
		nr.IdempotencyKey, nr.RequestDigest = idempotencyKey, RequestDigest(struct {
			Op, Parent string
			Request    ForkRequest
		}{"fork", runID, sent})
	}
	r, err := s.store.Fork(ctx, tenantID, runID, rev, nr)
	if errors.Is(err, ErrAlreadyExists) && idempotencyKey != "" && r.RunID == "" {
		// Lost a race to a fork under the same key, which was not there to
		// be seen when this one looked: look again, now that it is.
		r, err = s.store.Fork(ctx, tenantID, runID, rev, nr)
	}
	if errors.Is(err, ErrAlreadyExists) && idempotencyKey != "" && r.RunID != "" {
		s.schemas.see(tenantID, r.RunID, r.WorkflowName, r.StateSchemaVersion)
		return r, false, nil // the key's fork, replayed
	}
	if errors.Is(err, ErrIdempotencyMismatch) {
		return Run{}, false, fmt.Errorf("fork run %s: Idempotency-Key %q: %w", runID, idempotencyKey, err)
	}
	if errors.Is(err, ErrAlreadyExists) && idempotencyKey != "" {
		prev, gerr := s.store.GetRun(ctx, tenantID, req.RunID)
		switch {
		case gerr != nil:
			// Deleted since (retention): the clash stands as it was.
		case prev.ParentRunID == runID && prev.ParentRevision == rev:
			s.schemas.see(tenantID, prev.RunID, prev.WorkflowName, prev.StateSchemaVersion)
			return prev, false, nil
		case derived:
			return Run{}, false, fmt.Errorf("fork run %s at revision %d: %w (run %s was forked from revision %d)", runID, rev, ErrIdempotencyMismatch, prev.RunID, prev.ParentRevision)
		}
	}
	if err != nil {
		return Run{}, false, fmt.Errorf("fork run %s at revision %d: %w", runID, rev, err)
	}
	s.schemas.see(tenantID, r.RunID, r.WorkflowName, r.StateSchemaVersion)
	return r, true, nil
}

// CheckSchema refuses a run whose state schema version cannot be brought to
// the version its workflow's code expects.
func (s *Service) CheckSchema(r Run) error {
	if _, err := s.reg.CheckPath(r.WorkflowName, r.StateSchemaVersion); err != nil {
		return fmt.Errorf("run %s: %w", r.RunID, err)
	}
	return nil
}

// Migrate brings a run's state to its workflow's current schema version,
// one version at a time with validation, and records the migration as a
// state.migrated event carrying digests before and after. The caller must
// hold the lease. A run already current is returned unchanged.
func (s *Service) Migrate(ctx context.Context, tenantID, runID string, l Lease) (Run, error) {
	r, err := s.Get(ctx, tenantID, runID)
	if err != nil {
		return Run{}, err
	}
	target, err := s.reg.CheckPath(r.WorkflowName, r.StateSchemaVersion)
	if err != nil {
		return Run{}, fmt.Errorf("migrate run %s: %w", runID, err)
	}
	if target == r.StateSchemaVersion {
		return r, nil
	}
	state, steps, err := s.reg.Migrate(r.WorkflowName, r.StateSchemaVersion, r.State)
	if err != nil {
		return Run{}, fmt.Errorf("migrate run %s: %w", runID, err)
	}
	payload, _ := json.Marshal(map[string]any{
		"from": r.StateSchemaVersion, "to": target,
		"digest_before": Digest(r.State), "digest_after": Digest(state),
		"steps": steps,
	})
	sc, err := s.validateCommit(CommitRequest{
		ExpectedRevision: r.StateRevision, Lease: l, State: state, NextStep: r.NextStep,
		StateSchemaVersion: target, Event: EventInput{EventType: EventStateMigrated, Payload: payload},
	})
	if err != nil {
		return Run{}, fmt.Errorf("migrate run %s: %w", runID, err)
	}
	nr, _, err := s.commitChecked(ctx, tenantID, runID, sc)
	if err != nil {
		return Run{}, fmt.Errorf("migrate run %s: %w", runID, err)
	}
	return nr, nil
}

// Retain deletes terminal runs that finished longer than maxAge ago, in
// batches, and returns how many were deleted.
func (s *Service) Retain(ctx context.Context, maxAge time.Duration, now time.Time) (int, error) {
	if maxAge <= 0 {
		return 0, invalid("retention age must be positive")
	}
	cutoff := now.Add(-maxAge)
	total := 0
	for {
		n, err := s.store.DeleteTerminalBefore(ctx, cutoff, 500)
		total += n
		if err != nil {
			return total, fmt.Errorf("retention before %s: %w", cutoff.Format(time.RFC3339), err)
		}
		if n < 500 {
			return total, nil
		}
	}
}

// IsConflict reports whether err is a revision or lease conflict (HTTP 409).
func IsConflict(err error) bool {
	return errors.Is(err, ErrRevisionConflict) || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrLeaseHeld)
}

// RetainEvery deletes terminal runs older than maxAge once at start and then
// every interval, until ctx ends. report, if not nil, sees each pass's result.
// The caller owns the goroutine it runs in and stops it by cancelling ctx.
func (s *Service) RetainEvery(ctx context.Context, maxAge, interval time.Duration, report func(deleted int, err error)) {
	periodic.Run(ctx, interval, func(ctx context.Context) (int, error) { return s.Retain(ctx, maxAge, time.Now()) }, report)
}
