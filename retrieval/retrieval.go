package retrieval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// ACL entries. A document's ACL names who may read it: a principal exactly
// ("user:alice"), a group ("group:support", resolved through membership at
// every retrieval) or EntryTenant (everyone in the tenant).
const (
	EntryTenant = "tenant"
	GroupPrefix = "group:"
)

// Document is one version of a source document as Memento indexed it.
// Version is Memento's counter of the document (1 for the first write, +1
// for every change of content, source version, metadata or ACL); the source
// system's own version travels as SourceVersion. IndexedAt is when the
// content was last written or confirmed unchanged: a TTL counts from it.
type Document struct {
	TenantID      string          `json:"tenant_id"`
	DocumentID    string          `json:"document_id"`
	SourceURI     string          `json:"source_uri"`
	SourceVersion string          `json:"source_version"`
	Content       string          `json:"content"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	ACL           []string        `json:"acl"`
	Version       int64           `json:"version"`
	Chunks        int             `json:"chunks"`
	UpdatedAt     time.Time       `json:"updated_at"`
	IndexedAt     time.Time       `json:"indexed_at"`
}

// Chunk is one token window of a document version. ID is
// "<document_id>:p<version>:c<n>", n from 0; Digest is "sha256:" and the
// hex SHA-256 of Text.
type Chunk struct {
	ChunkID       string `json:"chunk_id"`
	DocumentID    string `json:"document_id"`
	Version       int64  `json:"version"`
	N             int    `json:"n"`
	Text          string `json:"text"`
	Digest        string `json:"content_digest"`
	SourceURI     string `json:"source_uri"`
	SourceVersion string `json:"source_version"`
	// Terms is EncodeTerms(Text), set by the Service when it writes the
	// chunk: what the in-process full-text index loads.
	Terms string `json:"-"`
}

// ChunkID names chunk n of a document version.
func ChunkID(documentID string, version int64, n int) string {
	return fmt.Sprintf("%s:p%d:c%d", documentID, version, n)
}

// Digest is the content digest of a text.
func Digest(text string) string {
	h := sha256.Sum256([]byte(text))
	return "sha256:" + hex.EncodeToString(h[:])
}

// Vector is a chunk's embedding under one model, as written with its
// document (and ACL).
type Vector struct {
	ChunkID    string
	DocumentID string
	Model      string
	Values     []float32
	ACL        []string
}

// Hit is one retrieved chunk with its provenance.
type Hit struct {
	DocumentID    string    `json:"document_id"`
	SourceURI     string    `json:"source_uri"`
	SourceVersion string    `json:"source_version"`
	Version       int64     `json:"version"`
	ChunkID       string    `json:"chunk_id"`
	ContentDigest string    `json:"content_digest"`
	RetrievedAt   time.Time `json:"retrieved_at"`
	Score         float64   `json:"score"`
	Text          string    `json:"text"`
}

// Snapshot is one stored retrieval: what a principal got for a query at an
// index version. It is immutable; its texts are kept by digest while it is.
type Snapshot struct {
	TenantID     string    `json:"tenant_id"`
	SnapshotID   string    `json:"snapshot_id"`
	QueryDigest  string    `json:"query_digest"`
	IndexVersion int64     `json:"index_version"`
	Principal    string    `json:"principal"`
	K            int       `json:"k"`
	CreatedAt    time.Time `json:"created_at"`
	Hits         []Hit     `json:"hits"`
}

// InvalidationKind says what made projection rows stale.
type InvalidationKind string

// The invalidation kinds.
const (
	// DocumentReplaced: a new version (content, source version or metadata,
	// and maybe the ACL too) replaced the indexed one.
	DocumentReplaced InvalidationKind = "document_replaced"
	// ACLChanged: only the ACL changed; the chunks were re-projected.
	ACLChanged InvalidationKind = "acl_changed"
	// DocumentDeleted: the document and every projection row of it are gone.
	DocumentDeleted InvalidationKind = "document_deleted"
	// MembershipChanged: a principal joined or left a group; retrieval
	// resolves groups at every call, so no row is stale, but caches and
	// snapshots taken before it are.
	MembershipChanged InvalidationKind = "membership_changed"
)

// Invalidation is one audit event. IndexVersion is the tenant's index
// version the change moved to; it orders the events and is the list cursor.
type Invalidation struct {
	TenantID     string           `json:"tenant_id"`
	IndexVersion int64            `json:"index_version"`
	Kind         InvalidationKind `json:"kind"`
	DocumentID   string           `json:"document_id,omitempty"`
	OldVersion   int64            `json:"old_version,omitempty"`
	NewVersion   int64            `json:"new_version,omitempty"`
	Group        string           `json:"group,omitempty"`
	Principal    string           `json:"principal,omitempty"`
	Change       string           `json:"change,omitempty"` // "added" or "removed" for membership
	RowsRemoved  int              `json:"rows_removed"`
	At           time.Time        `json:"at"`
}

// Entries is what a principal may read by: itself, its groups and the
// tenant-wide entry, deduplicated and sorted.
func Entries(principal string, groups []string) []string {
	out := []string{principal, EntryTenant}
	for _, g := range groups {
		out = append(out, GroupPrefix+g)
	}
	return dedupSorted(out)
}

// Readable reports whether an ACL grants one of entries.
func Readable(acl, entries []string) bool {
	for _, a := range acl {
		for _, e := range entries {
			if a == e {
				return true
			}
		}
	}
	return false
}

// ValidPrincipal checks a principal that retrieves or joins a group: a
// non-empty id that is neither a group nor the tenant entry.
func ValidPrincipal(p string) error {
	switch {
	case strings.TrimSpace(p) == "" || len(p) > 256 || strings.ContainsRune(p, 0) || !utf8.ValidString(p):
		return fmt.Errorf("%w: a principal is 1 to 256 bytes of UTF-8 without NUL", ErrInvalidInput)
	case p == EntryTenant || strings.HasPrefix(p, GroupPrefix):
		return fmt.Errorf("%w: a principal is a user or service id, not %q", ErrInvalidInput, p)
	case lookalike(p):
		// Kept as an id, it would grant nobody the tenant or the group it
		// reads as, and all of it to a principal of that very name.
		return fmt.Errorf("%w: %q reads as the tenant entry or a group but is spelt otherwise: write %q or %q", ErrInvalidInput, p, EntryTenant, GroupPrefix+"<name>")
	case strings.HasSuffix(p, ":"):
		return fmt.Errorf("%w: the principal %q names no id after its prefix", ErrInvalidInput, p)
	}
	return nil
}

// lookalike reports whether p reads as the tenant entry or a group entry
// without being one: in another case, or with spaces around it.
func lookalike(p string) bool {
	l := strings.ToLower(strings.TrimSpace(p))
	return l == EntryTenant || strings.HasPrefix(l, GroupPrefix)
}

// wildcards are ACL entries that read as "everyone" but would only match a
// principal of that very name: refused, with the entry that means it.
var wildcards = map[string]bool{"*": true, "all": true, "any": true, "anyone": true, "everyone": true, "public": true}

// ValidGroup checks a group name (without the "group:" prefix).
func ValidGroup(g string) error {
	if strings.TrimSpace(g) == "" || len(g) > 256 || strings.ContainsRune(g, 0) || !utf8.ValidString(g) {
		return fmt.Errorf("%w: a group name is 1 to 256 bytes of UTF-8 without NUL", ErrInvalidInput)
	}
	return nil
}

// NormalizeACL checks entries and returns them deduplicated and sorted.
func NormalizeACL(acl []string) ([]string, error) {
	if len(acl) == 0 {
		return nil, fmt.Errorf("%w: a document needs an acl (use [\"tenant\"] for everyone in the tenant)", ErrInvalidInput)
	}
	if len(acl) > 1000 {
		return nil, fmt.Errorf("%w: an acl has at most 1000 entries", ErrInvalidInput)
	}
	for _, a := range acl {
		switch {
		case a == EntryTenant:
		case strings.HasPrefix(a, GroupPrefix):
			if err := ValidGroup(strings.TrimPrefix(a, GroupPrefix)); err != nil {
				return nil, err
			}
		case wildcards[strings.ToLower(strings.TrimSpace(a))]:
			return nil, fmt.Errorf("%w: acl entry %q is no wildcard; %q is everyone in the tenant", ErrInvalidInput, a, EntryTenant)
		default:
			if err := ValidPrincipal(a); err != nil {
				return nil, err
			}
		}
	}
	return dedupSorted(acl), nil
}

func dedupSorted(in []string) []string {
	out := append([]string(nil), in...)
	slices.Sort(out)
	j := 0
	for i, s := range out {
		if i == 0 || s != out[j-1] {
			out[j] = s
			j++
		}
	}
	return out[:j]
}
