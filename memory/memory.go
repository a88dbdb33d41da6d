package memory

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/unicode/norm"
)

// Status is where a claim stands. Expiry is not a status: a current claim
// past its expires_at is simply not served.
type Status string

// The statuses of a claim. Superseded, invalidated and rejected are final.
const (
	StatusCurrent     Status = "current"
	StatusSuperseded  Status = "superseded"
	StatusInvalidated Status = "invalidated"
	StatusHeld        Status = "held" // waits for explicit confirmation
	StatusRejected    Status = "rejected"
)

// Known reports whether s is one of the statuses above (a store may then
// write it into a statement as a literal).
func (s Status) Known() bool {
	switch s {
	case StatusCurrent, StatusSuperseded, StatusInvalidated, StatusHeld, StatusRejected:
		return true
	}
	return false
}

// Source types a provenance may name.
const (
	SourceMessage  = "message"   // a session or chat message
	SourceRunEvent = "run_event" // an event of a durable run
	SourceTool     = "tool"      // a tool's answer
	SourceUser     = "user"      // the user, through an app form or setting
	SourceOperator = "operator"  // a human operator
	SourceDocument = "document"  // an outside document
	SourceImport   = "import"    // a bulk import from another system
)

// How a claim was validated (Provenance.ValidatedBy).
const (
	ValidatedUserStated    = "user_stated"    // the user said it explicitly
	ValidatedUserConfirmed = "user_confirmed" // the user confirmed it when asked
	ValidatedToolConfirmed = "tool_confirmed" // an authoritative system returned it
	ValidatedOperator      = "operator"       // a human operator entered it
	ValidatedImported      = "imported"       // carried over from another system of record
	ValidatedModelInferred = "model_inferred" // a model guessed it: not kept long term
)

// Provenance says where a claim came from and how it was validated.
type Provenance struct {
	SourceType    string   `json:"source_type"`
	SourceID      string   `json:"source_id"`
	SourceVersion string   `json:"source_version,omitempty"`
	RunID         string   `json:"run_id,omitempty"`
	EventSeq      int64    `json:"event_seq,omitempty"`
	MessageIDs    []string `json:"message_ids,omitempty"`
	ValidatedBy   string   `json:"validated_by"`
	// Extractor names the extractor and its version when one produced the claim.
	Extractor string `json:"extractor,omitempty"`
}

// Claim is one narrow fact about a subject (DESIGN.md rule 9).
type Claim struct {
	MemoryID      string          `json:"memory_id"`
	TenantID      string          `json:"tenant_id"`
	SubjectID     string          `json:"subject_id"`
	Namespace     string          `json:"namespace"`
	Key           string          `json:"key"`
	Value         json.RawMessage `json:"value"`
	SchemaVersion int             `json:"schema_version"`
	// Text is what search indexes: given by the writer, or rendered from key
	// and value.
	Text string `json:"text"`
	// Category is a coarse kind ("preference", "place", "health", ...);
	// sensitive categories are held for confirmation.
	Category   string     `json:"category,omitempty"`
	Provenance Provenance `json:"provenance"`
	Confidence float64    `json:"confidence"`
	// ValidFrom is when the fact became true in the world.
	ValidFrom time.Time  `json:"valid_from"`
	ExpiresAt *time.Time `json:"expires_at"`
	Status    Status     `json:"status"`
	// Expired marks, on a read by id or of a history, a current claim past
	// its ExpiresAt: no longer served by list, search or context. Not stored.
	Expired            bool       `json:"expired,omitempty"`
	InvalidatedAt      *time.Time `json:"invalidated_at"`
	InvalidationReason string     `json:"invalidation_reason,omitempty"`
	Supersedes         string     `json:"supersedes,omitempty"`
	SupersededBy       string     `json:"superseded_by,omitempty"`
	// SupersededAt is when the successor took over (its valid_from).
	SupersededAt *time.Time `json:"superseded_at,omitempty"`
	ConsentBasis string     `json:"consent_basis,omitempty"`
	// ValueDigest identifies (namespace, key, value) without the content: a
	// tombstone keeps it after forgetting.
	ValueDigest string    `json:"value_digest"`
	CreatedAt   time.Time `json:"created_at"`
	// ConfirmedAt moves when an exact duplicate refreshes the claim.
	ConfirmedAt   time.Time `json:"confirmed_at"`
	Confirmations int       `json:"confirmations"`
	// Version is the subject's change counter at the last write of this
	// claim (see Store.SubjectVersion).
	Version int64 `json:"-"`
}

// Live reports whether c is served by reads at now.
func (c Claim) Live(now time.Time) bool {
	return c.Status == StatusCurrent && (c.ExpiresAt == nil || c.ExpiresAt.After(now))
}

// LiveAt reports whether c was the claim in force at time t (valid time):
// valid from at or before t and not yet superseded, invalidated or expired.
func (c Claim) LiveAt(t time.Time) bool {
	if c.Status == StatusHeld || c.Status == StatusRejected || c.ValidFrom.After(t) {
		return false
	}
	for _, end := range []*time.Time{c.SupersededAt, c.InvalidatedAt, c.ExpiresAt} {
		if end != nil && !end.After(t) {
			return false
		}
	}
	return true
}

// ValueDigest is the digest a tombstone keeps: SHA-256 over the namespace,
// the key and the canonical value, so the same fact is recognised whatever
// its JSON spacing or string case.
func ValueDigest(namespace, key string, value json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(canonicalValue(value))
	return hex.EncodeToString(h.Sum(nil))
}

// digest is the value digest of a claim of the tenant: keyed when the
// service has a DigestKey (see Options.DigestKey), else ValueDigest.
func (s *Service) digest(tenantID, namespace, key string, value json.RawMessage) string {
	if len(s.opts.DigestKey) == 0 {
		return ValueDigest(namespace, key, value)
	}
	m := hmac.New(sha256.New, s.opts.DigestKey)
	for _, part := range []string{tenantID, namespace, key} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	m.Write(canonicalValue(value))
	return keyedDigestPrefix + hex.EncodeToString(m.Sum(nil))
}

// keyedDigestPrefix tells a keyed digest from an unkeyed one.
const keyedDigestPrefix = "k1:"

// sameFact reports whether two claims of one subject hold the same fact
// (namespace, key and canonical value): by digest when both are of one
// kind, by value when one was kept before digests were keyed.
func sameFact(a, b Claim) bool {
	if a.ValueDigest != "" && b.ValueDigest != "" &&
		strings.HasPrefix(a.ValueDigest, keyedDigestPrefix) == strings.HasPrefix(b.ValueDigest, keyedDigestPrefix) {
		return a.ValueDigest == b.ValueDigest
	}
	return a.Namespace == b.Namespace && a.Key == b.Key && sameValue(a.Value, b.Value)
}

// sameValue reports whether two values are the same fact's value.
func sameValue(a, b json.RawMessage) bool { return bytes.Equal(canonicalValue(a), canonicalValue(b)) }

// canonicalValue is value with sorted object keys, no spacing, and strings
// case-folded with their spaces collapsed: "Russian" and " russian " are the
// same fact.
func canonicalValue(value json.RawMessage) []byte {
	var v any
	d := json.NewDecoder(bytes.NewReader(value))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return value
	}
	var b bytes.Buffer
	writeCanonical(&b, v)
	return b.Bytes()
}

func writeCanonical(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			writeCanonical(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e)
		}
		b.WriteByte(']')
	case string:
		s, _ := json.Marshal(norm.NFC.String(strings.Join(strings.Fields(strings.ToLower(x)), " ")))
		b.Write(s)
	case json.Number:
		b.WriteString(canonicalNumber(string(x)))
	default:
		s, _ := json.Marshal(x)
		b.Write(s)
	}
}

// canonicalNumber writes a JSON number so that every spelling of one value
// is the same text: 1, 1.0, 1e0 and 10e-1 are "1"; 100, 1e2 and 100.00 are
// "100"; -0 is "0". It works on the decimal digits (exact, unlike a float64,
// and with no big arithmetic for an exponent of a million). The common
// spellings (integers, plain decimals) stay as they are; a value whose
// plain form would pass 40 digits is written as digits "e" exponent.
func canonicalNumber(n string) string {
	written := n
	neg := strings.HasPrefix(n, "-")
	n = strings.TrimPrefix(n, "-")
	mant, exp := n, 0
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		e, err := strconv.Atoi(n[i+1:])
		if err != nil || e > 1e9 || e < -1e9 {
			return written // an exponent no stored value needs: left as written
		}
		mant, exp = n[:i], e
	}
	digits := mant
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		digits = mant[:i] + mant[i+1:]
		exp -= len(mant) - i - 1
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0"
	}
	z := len(digits) - len(strings.TrimRight(digits, "0"))
	digits, exp = digits[:len(digits)-z], exp+z
	sign := ""
	if neg {
		sign = "-"
	}
	switch {
	case exp >= 0 && len(digits)+exp <= 40:
		return sign + digits + strings.Repeat("0", exp)
	case exp < 0 && -exp < len(digits):
		return sign + digits[:len(digits)+exp] + "." + digits[len(digits)+exp:]
	case exp < 0 && -exp-len(digits) < 40:
		return sign + "0." + strings.Repeat("0", -exp-len(digits)) + digits
	}
	return sign + digits + "e" + strconv.Itoa(exp)
}

// RenderText is the searchable text of a claim with no text of its own: the
// key's words, then the string leaves of the value.
func RenderText(key string, value json.RawMessage) string {
	words := strings.FieldsFunc(key, func(r rune) bool { return r == '.' || r == '_' || r == '-' || r == '/' || r == ':' })
	var parts []string
	parts = append(parts, strings.Join(words, " ")+":")
	var v any
	if err := json.Unmarshal(value, &v); err == nil {
		collectLeaves(v, &parts)
	}
	return strings.Join(parts, " ")
}

func collectLeaves(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			collectLeaves(x[k], out)
		}
	case []any:
		for _, e := range x {
			collectLeaves(e, out)
		}
	case string:
		*out = append(*out, x)
	case nil:
	default:
		b, _ := json.Marshal(x)
		*out = append(*out, string(b))
	}
}

// Tombstone is what forgetting leaves: enough to refuse the same claim
// again, nothing of its content.
type Tombstone struct {
	TenantID    string    `json:"tenant_id"`
	SubjectID   string    `json:"subject_id"`
	Namespace   string    `json:"namespace"`
	Key         string    `json:"key"`
	ValueDigest string    `json:"value_digest"`
	CreatedAt   time.Time `json:"created_at"`
}

// ForgetRecord is the audit record of one forget: who, what scope, how many,
// never the content.
type ForgetRecord struct {
	ForgetID   string    `json:"forget_id"`
	TenantID   string    `json:"tenant_id"`
	SubjectID  string    `json:"subject_id"`
	Namespace  string    `json:"namespace,omitempty"` // "" is every namespace
	Reason     string    `json:"reason,omitempty"`
	Claims     int       `json:"claims"`
	Tombstones int       `json:"tombstones"`
	CreatedAt  time.Time `json:"created_at"`
}

// Namespace is a tenant's policy for one namespace.
type Namespace struct {
	TenantID string `json:"tenant_id"`
	Name     string `json:"namespace"`
	// Personal namespaces take only claims with a consent basis.
	Personal bool `json:"personal"`
	// Sensitive namespaces hold every claim for explicit confirmation unless
	// the user confirmed it.
	Sensitive bool `json:"sensitive"`
	// TTL, when > 0, is the default lifetime of a claim written there.
	TTL time.Duration `json:"-"`
}

// Vector is a claim's embedding under one model.
type Vector struct {
	MemoryID  string
	Namespace string
	Model     string
	Values    []float32
	ExpiresAt *time.Time
	// Version is the subject version at which the vector was written.
	Version int64
}
