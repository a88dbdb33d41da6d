package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// MaxProfileClaims bounds the claims one profile shows; a profile that
// leaves claims out says so (Truncated, Omitted).
const MaxProfileClaims = 2000

// Profile is a subject's current claims as one compact, token-counted view
// per namespace: what a context builder puts in front of the model.
type Profile struct {
	SubjectID   string          `json:"subject_id"`
	Namespaces  []NamespaceView `json:"namespaces"`
	Tokens      int             `json:"tokens"`
	Tokenizer   string          `json:"tokenizer"`
	Claims      int             `json:"claims"`
	Truncated   bool            `json:"truncated"`
	Omitted     int             `json:"omitted"`
	GeneratedAt time.Time       `json:"generated_at"`
	// version and expiry say when the cached copy is stale.
	version int64
	expires *time.Time
}

// NamespaceView is one namespace of a profile.
type NamespaceView struct {
	Namespace string        `json:"namespace"`
	Text      string        `json:"text"`
	Tokens    int           `json:"tokens"`
	Items     []ProfileItem `json:"items"`
}

// ProfileItem is one claim in a profile, with the id that traces it back.
type ProfileItem struct {
	MemoryID string          `json:"memory_id"`
	Key      string          `json:"key"`
	Value    json.RawMessage `json:"value"`
	// Provenance is where the claim came from: every fact with its source.
	Provenance Provenance `json:"provenance"`
}

// Profile returns the subject's profile, from the cache when the subject
// version has not moved and no claim in it has expired since.
func (s *Service) Profile(ctx context.Context, tenantID, subjectID string) (Profile, error) {
	if err := checkID("subject_id", subjectID); err != nil {
		return Profile{}, err
	}
	v, err := s.store.SubjectVersion(ctx, tenantID, subjectID)
	if err != nil {
		return Profile{}, fmt.Errorf("profile of subject %s: %w", subjectID, err)
	}
	now := s.now()
	if p, ok := s.profiles.get(tenantID, subjectID); ok && p.version == v && (p.expires == nil || p.expires.After(now)) {
		return p, nil
	}
	p := Profile{SubjectID: subjectID, Tokenizer: s.opts.TokenizerName, GeneratedAt: now, version: v, Namespaces: []NamespaceView{}}
	byNS := map[string]*NamespaceView{}
	lq := ListQuery{TenantID: tenantID, SubjectID: subjectID, Statuses: []Status{StatusCurrent}, LiveAt: &now, Limit: MaxListLimit}
	for {
		cs, err := s.store.List(ctx, lq)
		if err != nil {
			return Profile{}, fmt.Errorf("profile of subject %s: %w", subjectID, err)
		}
		for _, c := range cs {
			if p.Claims >= MaxProfileClaims {
				p.Truncated = true
				p.Omitted++
				continue
			}
			p.Claims++
			nv := byNS[c.Namespace]
			if nv == nil {
				nv = &NamespaceView{Namespace: c.Namespace}
				byNS[c.Namespace] = nv
			}
			nv.Items = append(nv.Items, ProfileItem{MemoryID: c.MemoryID, Key: c.Key, Value: c.Value, Provenance: c.Provenance})
			if c.ExpiresAt != nil && (p.expires == nil || c.ExpiresAt.Before(*p.expires)) {
				e := *c.ExpiresAt
				p.expires = &e
			}
		}
		if len(cs) < lq.Limit {
			break
		}
		lq.AfterCreated, lq.AfterID = cs[len(cs)-1].CreatedAt, cs[len(cs)-1].MemoryID
	}
	names := make([]string, 0, len(byNS))
	for n := range byNS {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		nv := byNS[n]
		sort.Slice(nv.Items, func(i, j int) bool { return nv.Items[i].Key < nv.Items[j].Key })
		var b strings.Builder
		for _, it := range nv.Items {
			b.WriteString(it.Key)
			b.WriteString(": ")
			b.WriteString(renderValue(it.Value))
			b.WriteByte('\n')
		}
		nv.Text = b.String()
		nv.Tokens = s.opts.CountTokens(nv.Text)
		p.Tokens += nv.Tokens
		p.Namespaces = append(p.Namespaces, *nv)
	}
	s.profiles.put(tenantID, subjectID, p)
	return p, nil
}

// renderValue shows a JSON string bare and anything else as compact JSON.
func renderValue(v json.RawMessage) string {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s
	}
	return string(v)
}

// profileCache is a bounded LRU of built profiles.
type profileCache struct {
	c *lru.Cache[subjectKey, Profile]
}

func newProfileCache(size int) *profileCache {
	c, _ := lru.New[subjectKey, Profile](size) // errors only for size <= 0
	return &profileCache{c: c}
}

func (pc *profileCache) get(tenant, subject string) (Profile, bool) {
	return pc.c.Get(subjectKey{tenant, subject})
}

func (pc *profileCache) put(tenant, subject string, p Profile) {
	pc.c.Add(subjectKey{tenant, subject}, p)
}

func (pc *profileCache) drop(tenant, subject string) { pc.c.Remove(subjectKey{tenant, subject}) }
