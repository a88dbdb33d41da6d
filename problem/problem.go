package problem

import (
	"maps"
	"net/http"
)

// TypeBase prefixes every problem type URI; the rest is the kind.
const TypeBase = "https://memento.dev/problems/"

// Type returns the type URI of kind.
func Type(kind string) string { return TypeBase + kind }

// Kinds any route may answer. A kind is the stable kebab-case tail of a
// problem type URI; clients branch on it, so it never changes meaning once
// published.
const (
	InvalidRequest       = "invalid-request"
	RequestTooLarge      = "request-too-large"
	UnsupportedMediaType = "unsupported-media-type"
	Unauthorized         = "unauthorized"
	Forbidden            = "forbidden"
	NotFound             = "not-found"
	MethodNotAllowed     = "method-not-allowed"
	PreconditionFailed   = "precondition-failed"
	Internal             = "internal"
	Unavailable          = "unavailable"
	NotReady             = "not-ready"
	ClientClosedRequest  = "client-closed-request"
	Timeout              = "timeout"
	// Overloaded: more requests are in flight than the server admits.
	Overloaded = "overloaded"
	// CommitOutcomeUnknown: the connection to the store broke after the
	// write was sent, so it may or may not have been applied; re-reading
	// the resource (its revision) settles it.
	CommitOutcomeUnknown = "commit-outcome-unknown"
)

// Kinds of the runs domain.
const (
	RunNotFound         = "run-not-found"
	AlreadyExists       = "already-exists"
	IdempotencyMismatch = "idempotency-mismatch"
	RevisionConflict    = "revision-conflict"
	LeaseHeld           = "lease-held"
	LeaseLost           = "lease-lost"
	InvalidTransition   = "invalid-transition"
	RunNotActive        = "run-not-active"
	StateTooLarge       = "state-too-large"
	NoMigrationPath     = "no-migration-path"
	SchemaValidation    = "schema-validation"
	CheckpointExists    = "checkpoint-exists"
	CheckpointNotFound  = "checkpoint-not-found"
	RevisionNotFound    = "revision-not-found"
	SchemaNotFound      = "schema-not-found"
	SchemaConflict      = "schema-conflict"
	InvalidSchema       = "invalid-schema"
)

// Kinds of the sessions domain.
const (
	SessionNotFound      = "session-not-found"
	PreconditionRequired = "precondition-required"
	MessageTooLarge      = "message-too-large"
	PIINotFound          = "pii-not-found"
)

// Kinds of the operation ledger, approvals and resume.
const (
	OperationNotFound    = "operation-not-found"
	DigestMismatch       = "digest-mismatch"
	OperationTransition  = "invalid-operation-transition"
	ApprovalNotFound     = "approval-not-found"
	ApprovalExists       = "approval-exists"
	ApprovalDecided      = "approval-decided"
	ApprovalExpired      = "approval-expired"
	ResumeRefused        = "resume-refused"
	OperationUnsupported = "unsupported-operation-transition"
)

// Kinds of long-term memory.
const (
	MemoryNotFound = "memory-not-found"
	// MemoryRefused: policy did not keep the claim (a model's guess, a
	// passing state); the problem carries outcome "refused" and the reason.
	MemoryRefused = "memory-refused"
	// MemoryProvenanceRequired: a claim without a usable provenance.
	MemoryProvenanceRequired = "memory-provenance-required"
	// MemoryConsentRequired: a personal namespace and no consent basis.
	MemoryConsentRequired = "memory-consent-required"
	// MemoryForgotten: the subject's claim was forgotten and its tombstone
	// blocks it for good, so it is a refusal (422), not a conflict a retry
	// could resolve.
	MemoryForgotten = "memory-forgotten"
	// MemoryConflict: the key's current claim moved concurrently, or the
	// claim is not in a status that allows the change.
	MemoryConflict = "memory-conflict"
	// ExtractorNotConfigured: extraction asked of a server with no extractor.
	ExtractorNotConfigured = "extractor-not-configured"
	// ContextBudgetTooSmall: the parts of a context that are never cut
	// (system, tools, query) do not fit the budget less the reserve.
	ContextBudgetTooSmall = "context-budget-too-small"
	// DocumentNotFound: no such document in the tenant.
	DocumentNotFound = "document-not-found"
	// DocumentConflict: concurrent writes of one document kept moving its
	// version; retrying settles it.
	DocumentConflict = "document-conflict"
	// RetrievalSnapshotNotFound: no such snapshot (or retention removed it).
	RetrievalSnapshotNotFound = "retrieval-snapshot-not-found"
)

// Kinds of compaction (summaries).
const (
	SummaryNotFound = "summary-not-found"
	// SummaryRange: the range asked for does not continue the summary
	// chain or lies outside the log.
	SummaryRange = "summary-range"
	// CompactorFailed: the compactor (a model) failed or answered
	// something that is not a valid summary; nothing was stored.
	CompactorFailed = "compactor-failed"
)

// Info is how a kind is answered: its default HTTP status and its title.
type Info struct {
	Status int
	Title  string
}

// catalogue holds every kind; a kind missing here is answered as internal.
var catalogue = map[string]Info{
	InvalidRequest:       {http.StatusBadRequest, "Invalid request"},
	RequestTooLarge:      {http.StatusRequestEntityTooLarge, "Request body too large"},
	UnsupportedMediaType: {http.StatusUnsupportedMediaType, "Unsupported media type"},
	Unauthorized:         {http.StatusUnauthorized, "Unauthorized"},
	Forbidden:            {http.StatusForbidden, "Forbidden"},
	NotFound:             {http.StatusNotFound, "Not found"},
	MethodNotAllowed:     {http.StatusMethodNotAllowed, "Method not allowed"},
	PreconditionFailed:   {http.StatusPreconditionFailed, "Precondition failed"},
	Internal:             {http.StatusInternalServerError, "Internal server error"},
	Unavailable:          {http.StatusServiceUnavailable, "Backend unavailable"},
	NotReady:             {http.StatusServiceUnavailable, "Not ready"},
	ClientClosedRequest:  {499, "Client closed request"},
	Timeout:              {http.StatusGatewayTimeout, "Timeout"},
	Overloaded:           {http.StatusServiceUnavailable, "Server overloaded"},
	CommitOutcomeUnknown: {http.StatusServiceUnavailable, "Commit outcome unknown"},

	RunNotFound:         {http.StatusNotFound, "Run not found"},
	AlreadyExists:       {http.StatusConflict, "Already exists"},
	IdempotencyMismatch: {http.StatusUnprocessableEntity, "Idempotency key reused with a different request"},
	RevisionConflict:    {http.StatusConflict, "Revision conflict"},
	LeaseHeld:           {http.StatusConflict, "Lease held by another owner"},
	LeaseLost:           {http.StatusConflict, "Lease lost"},
	InvalidTransition:   {http.StatusUnprocessableEntity, "Invalid status transition"},
	RunNotActive:        {http.StatusConflict, "Run is not active"},
	StateTooLarge:       {http.StatusRequestEntityTooLarge, "State too large"},
	NoMigrationPath:     {http.StatusUnprocessableEntity, "No migration path"},
	SchemaValidation:    {http.StatusUnprocessableEntity, "State does not match its schema"},
	CheckpointExists:    {http.StatusConflict, "Checkpoint already exists"},
	CheckpointNotFound:  {http.StatusNotFound, "Checkpoint not found"},
	RevisionNotFound:    {http.StatusNotFound, "Revision not found"},
	SchemaNotFound:      {http.StatusNotFound, "State schema not registered"},
	SchemaConflict:      {http.StatusConflict, "A different schema is registered for this version"},
	InvalidSchema:       {http.StatusUnprocessableEntity, "Invalid JSON Schema"},

	SessionNotFound:      {http.StatusNotFound, "Session not found"},
	PreconditionRequired: {http.StatusPreconditionRequired, "Precondition required"},
	MessageTooLarge:      {http.StatusRequestEntityTooLarge, "Message too large"},
	PIINotFound:          {http.StatusNotFound, "Personal data reference not found"},

	OperationNotFound:    {http.StatusNotFound, "Operation not found"},
	DigestMismatch:       {http.StatusConflict, "Operation id reused with a different request"},
	OperationTransition:  {http.StatusConflict, "Operation status transition not allowed"},
	ApprovalNotFound:     {http.StatusNotFound, "Approval not found"},
	ApprovalExists:       {http.StatusConflict, "Approval id reused with a different request"},
	ApprovalDecided:      {http.StatusConflict, "Approval already decided"},
	ApprovalExpired:      {http.StatusConflict, "Approval expired"},
	ResumeRefused:        {http.StatusUnprocessableEntity, "Resume refused by a verification check"},
	OperationUnsupported: {http.StatusNotFound, "No such operation transition"},

	MemoryNotFound:           {http.StatusNotFound, "Memory not found"},
	MemoryRefused:            {http.StatusUnprocessableEntity, "Claim refused by memory policy"},
	MemoryProvenanceRequired: {http.StatusUnprocessableEntity, "A claim needs its provenance"},
	MemoryConsentRequired:    {http.StatusUnprocessableEntity, "A personal namespace needs a consent basis"},
	MemoryForgotten:          {http.StatusUnprocessableEntity, "The claim was forgotten; its tombstone blocks it"},
	MemoryConflict:           {http.StatusConflict, "The claim changed concurrently or is not in a status that allows this"},
	ExtractorNotConfigured:   {http.StatusUnprocessableEntity, "No memory extractor is configured"},
	ContextBudgetTooSmall:    {http.StatusUnprocessableEntity, "The budget does not hold the parts that are never cut"},

	SummaryNotFound:           {http.StatusNotFound, "Summary not found"},
	SummaryRange:              {http.StatusConflict, "Range does not continue the summary chain or the log"},
	CompactorFailed:           {http.StatusBadGateway, "Compactor failed"},
	DocumentNotFound:          {http.StatusNotFound, "Document not found"},
	DocumentConflict:          {http.StatusConflict, "The document changed concurrently"},
	RetrievalSnapshotNotFound: {http.StatusNotFound, "Retrieval snapshot not found"},
}

// Lookup returns how kind is answered; ok is false for an unknown kind.
func Lookup(kind string) (info Info, ok bool) {
	info, ok = catalogue[kind]
	return info, ok
}

// All returns every kind with how it is answered; the map is the caller's.
func All() map[string]Info { return maps.Clone(catalogue) }
