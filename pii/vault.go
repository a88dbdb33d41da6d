package pii

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors callers branch on.
var (
	ErrNotFound   = errors.New("personal data reference not found")
	ErrInvalidRef = errors.New("malformed personal data reference")
)

// DefaultRetention is how long the vault keeps a value unless configured.
// It is independent of session TTLs: a checkpoint may outlive its session
// and still need to resolve the reference it carries.
const DefaultRetention = 30 * 24 * time.Hour

// RefPrefix starts every reference: "pii:<kind>:<id>".
const RefPrefix = "pii:"

// Record is one protected value as a backend stores it. Sealed is the value
// encrypted with the vault key when one is configured (see Vault).
type Record struct {
	TenantID  string
	ID        string
	Kind      Kind
	Sealed    []byte
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Store persists vault records, scoped by tenant. Implementations live under
// store/ and must pass storetest.PIIVaultSuite.
type Store interface {
	// PutRecords inserts records (ids are fresh and unique).
	PutRecords(ctx context.Context, recs []Record) error
	// GetRecord returns a live record; a missing, expired or other-tenant
	// record is ErrNotFound.
	GetRecord(ctx context.Context, tenantID, id string) (Record, error)
	// DeleteRecord removes a record; deleting a missing one is not an error.
	DeleteRecord(ctx context.Context, tenantID, id string) error
}

// VaultOptions configure a Vault.
type VaultOptions struct {
	// Retention of stored values; 0 means DefaultRetention.
	Retention time.Duration
	// Key, when set (16, 24 or 32 bytes), encrypts values with AES-GCM bound
	// to tenant and id, so a copied row cannot be read in another tenant.
	// The engine always sets one (memento.New refuses redaction without
	// it); a vault without a key stores values as given, for tests.
	Key []byte
	// Redactor decides what is personal data; nil means NewRedactor(Options{}).
	Redactor *Redactor
}

// Vault replaces personal data with references and resolves them again.
type Vault struct {
	store     Store
	red       *Redactor
	retention time.Duration
	aead      cipher.AEAD
}

// Sealing formats: the first byte of Record.Sealed.
const (
	sealPlain = 0
	sealGCM   = 1
)

// NewVault wires a vault to its store.
func NewVault(store Store, o VaultOptions) (*Vault, error) {
	v := &Vault{store: store, red: o.Redactor, retention: o.Retention}
	if v.red == nil {
		v.red = NewRedactor(Options{})
	}
	if v.retention <= 0 {
		v.retention = DefaultRetention
	}
	if len(o.Key) > 0 {
		block, err := aes.NewCipher(o.Key)
		if err != nil {
			return nil, fmt.Errorf("vault key: %w", err)
		}
		if v.aead, err = cipher.NewGCM(block); err != nil {
			return nil, fmt.Errorf("vault key: %w", err)
		}
	}
	return v, nil
}

// Redactor returns the redactor in use.
func (v *Vault) Redactor() *Redactor { return v.red }

// Encrypted reports whether values are encrypted at rest.
func (v *Vault) Encrypted() bool { return v.aead != nil }

// newID returns 26 random lowercase letters (about 122 bits). Letters only,
// so a reference never ends in a digit that would glue to a number after it.
func newID() string {
	out := make([]byte, 0, 26)
	var buf [32]byte
	for len(out) < 26 {
		_, _ = rand.Read(buf[:])
		for _, c := range buf {
			// Rejection sampling keeps the letters uniform: 234 = 9*26.
			if c < 234 && len(out) < 26 {
				out = append(out, 'a'+c%26)
			}
		}
	}
	return string(out)
}

// Ref formats a reference.
func Ref(k Kind, id string) string { return RefPrefix + string(k) + ":" + id }

// ParseRef splits a reference into kind and id.
func ParseRef(ref string) (Kind, string, error) {
	if !refRE.MatchString(ref) || len(refRE.FindString(ref)) != len(ref) {
		return "", "", fmt.Errorf("%w: %q", ErrInvalidRef, truncate(ref, 80))
	}
	rest := strings.TrimPrefix(ref, RefPrefix)
	i := strings.IndexByte(rest, ':')
	return Kind(rest[:i]), rest[i+1:], nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func aad(tenantID, id string, k Kind) []byte {
	return []byte(tenantID + "\x00" + id + "\x00" + string(k))
}

func (v *Vault) seal(tenantID, id string, k Kind, value string) []byte {
	if v.aead == nil {
		return append([]byte{sealPlain}, value...)
	}
	nonce := make([]byte, v.aead.NonceSize())
	_, _ = rand.Read(nonce)
	out := append([]byte{sealGCM}, nonce...)
	return v.aead.Seal(out, nonce, []byte(value), aad(tenantID, id, k))
}

func (v *Vault) open(r Record) (string, error) {
	if len(r.Sealed) == 0 {
		return "", fmt.Errorf("vault record %s: empty", r.ID)
	}
	switch r.Sealed[0] {
	case sealPlain:
		return string(r.Sealed[1:]), nil
	case sealGCM:
		if v.aead == nil {
			return "", fmt.Errorf("vault record %s is encrypted and no key is configured", r.ID)
		}
		ns := v.aead.NonceSize()
		if len(r.Sealed) < 1+ns {
			return "", fmt.Errorf("vault record %s: truncated", r.ID)
		}
		pt, err := v.aead.Open(nil, r.Sealed[1:1+ns], r.Sealed[1+ns:], aad(r.TenantID, r.ID, r.Kind))
		if err != nil {
			return "", fmt.Errorf("vault record %s: decrypt: %w", r.ID, err)
		}
		return string(pt), nil
	default:
		return "", fmt.Errorf("vault record %s: unknown sealing %d", r.ID, r.Sealed[0])
	}
}

// Protect returns texts with personal data replaced by references, after
// storing the values in one call. The same value within one call gets one
// reference. With redaction disabled, texts come back unchanged.
func (v *Vault) Protect(ctx context.Context, tenantID string, texts []string) ([]string, error) {
	if !v.red.Enabled() {
		return texts, nil
	}
	out := make([]string, len(texts))
	var (
		recs []Record
		seen map[string]string
		now  time.Time
	)
	for i, t := range texts {
		fs := v.red.Find(t)
		if len(fs) == 0 {
			out[i] = t
			continue
		}
		if seen == nil {
			seen, now = map[string]string{}, time.Now().UTC()
		}
		out[i] = Replace(t, fs, func(f Finding) string {
			key := string(f.Kind) + "\x00" + f.Value
			if ref, ok := seen[key]; ok {
				return ref
			}
			id := newID()
			recs = append(recs, Record{
				TenantID: tenantID, ID: id, Kind: f.Kind,
				Sealed:    v.seal(tenantID, id, f.Kind, f.Value),
				CreatedAt: now, ExpiresAt: now.Add(v.retention),
			})
			ref := Ref(f.Kind, id)
			seen[key] = ref
			return ref
		})
	}
	if len(recs) > 0 {
		if err := v.store.PutRecords(ctx, recs); err != nil {
			// The error names how many values, never the values.
			return nil, fmt.Errorf("store %d personal data values: %w", len(recs), err)
		}
	}
	return out, nil
}

// CleanJSON reports that Protect would change no string of the JSON text b
// (see Redactor.CleanJSON), so a caller may store b without decoding it.
func (v *Vault) CleanJSON(b []byte) bool { return v.red.CleanJSON(b) }

// Resolved is the value behind a reference.
type Resolved struct {
	Ref       string    `json:"ref"`
	Kind      Kind      `json:"kind"`
	Value     string    `json:"value"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Resolve returns the value behind ref. Callers must have authorised the
// caller for this separately: holding a reference is not a right to its value.
func (v *Vault) Resolve(ctx context.Context, tenantID, ref string) (Resolved, error) {
	k, id, err := ParseRef(ref)
	if err != nil {
		return Resolved{}, err
	}
	r, err := v.store.GetRecord(ctx, tenantID, id)
	if err != nil {
		return Resolved{}, fmt.Errorf("resolve %s: %w", ref, err)
	}
	if r.Kind != k {
		return Resolved{}, fmt.Errorf("resolve %s: %w", ref, ErrNotFound)
	}
	val, err := v.open(r)
	if err != nil {
		return Resolved{}, fmt.Errorf("resolve %s: %w", ref, err)
	}
	return Resolved{Ref: ref, Kind: k, Value: val, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}, nil
}

// Forget deletes the value behind ref; the reference then resolves to ErrNotFound.
func (v *Vault) Forget(ctx context.Context, tenantID, ref string) error {
	_, id, err := ParseRef(ref)
	if err != nil {
		return err
	}
	if err := v.store.DeleteRecord(ctx, tenantID, id); err != nil {
		return fmt.Errorf("forget %s: %w", ref, err)
	}
	return nil
}
