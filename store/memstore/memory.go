package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mementohq/memento/memory"
)

var _ memory.Store = (*Memory)(nil)

// Memory is the memory.Store of a Store. It is a view, not a copy: it shares
// the Store's mutex, clock and maps. It is a type of its own because
// memory.Store and session.Store both name a Get.
type Memory struct{ s *Store }

// Memory returns the long-term memory store kept in s.
func (s *Store) Memory() *Memory { return &Memory{s: s} }

// claimRow is a claim as stored; doc is its full-text row, present while the
// claim is current.
type claimRow struct {
	c   memory.Claim
	doc *bm25Doc
}

type vecKey struct{ tenant, memoryID, model string }

type vecRow struct {
	subject string
	v       memory.Vector
}

type tombKey struct{ tenant, subject, namespace, key, digest string }

type memoryState struct {
	claims     map[key]*claimRow
	vectors    map[vecKey]vecRow
	subjects   map[key]int64 // (tenant, subject) -> version
	forgotten  map[key]int64 // (tenant, subject) -> version of its last forget that deleted claims
	tombstones map[tombKey]memory.Tombstone
	forgets    []memory.ForgetRecord
	namespaces map[key]memory.Namespace
}

func newMemoryState() memoryState {
	return memoryState{
		claims:     map[key]*claimRow{},
		vectors:    map[vecKey]vecRow{},
		subjects:   map[key]int64{},
		forgotten:  map[key]int64{},
		tombstones: map[tombKey]memory.Tombstone{},
		namespaces: map[key]memory.Namespace{},
	}
}

// cloneClaim copies c with its times at stored precision, so nothing a
// caller holds aliases the store.
func cloneClaim(c memory.Claim) memory.Claim {
	c.Value = cloneJSON(c.Value)
	c.Provenance.MessageIDs = slices.Clone(c.Provenance.MessageIDs)
	c.ValidFrom = micro(c.ValidFrom)
	c.CreatedAt = micro(c.CreatedAt)
	c.ConfirmedAt = micro(c.ConfirmedAt)
	c.ExpiresAt = microPtr(c.ExpiresAt)
	c.InvalidatedAt = microPtr(c.InvalidatedAt)
	c.SupersededAt = microPtr(c.SupersededAt)
	return c
}

func microPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	m := micro(*t)
	return &m
}

func cloneVector(v memory.Vector) memory.Vector {
	v.Values = slices.Clone(v.Values)
	v.ExpiresAt = microPtr(v.ExpiresAt)
	return v
}

// bump moves the subject's version on; the caller holds the lock.
func (m *Memory) bump(tenantID, subjectID string) int64 {
	k := key{tenantID, subjectID}
	m.s.mem.subjects[k]++
	return m.s.mem.subjects[k]
}

// dropProjections removes a claim's full-text and vector rows.
func (m *Memory) dropProjections(row *claimRow) {
	row.doc = nil
	for k := range m.s.mem.vectors {
		if k.tenant == row.c.TenantID && k.memoryID == row.c.MemoryID {
			delete(m.s.mem.vectors, k)
		}
	}
}

// currentFor is the current claim holding (subject, namespace, key), if any.
func (m *Memory) currentFor(c memory.Claim) *claimRow {
	for _, row := range m.s.mem.claims {
		o := row.c
		if o.TenantID == c.TenantID && o.SubjectID == c.SubjectID && o.Namespace == c.Namespace &&
			o.Key == c.Key && o.Status == memory.StatusCurrent && o.MemoryID != c.MemoryID {
			return row
		}
	}
	return nil
}

// checkSupersede returns the row that c may supersede, or an error.
func (m *Memory) checkSupersede(c memory.Claim, supersede string) (*claimRow, error) {
	if supersede == "" {
		return nil, nil
	}
	old, ok := m.s.mem.claims[key{c.TenantID, supersede}]
	if !ok || old.c.Status != memory.StatusCurrent || old.c.SubjectID != c.SubjectID {
		return nil, fmt.Errorf("claim %s to supersede is not a current claim of the subject: %w", supersede, memory.ErrConflict)
	}
	return old, nil
}

// supersede ends old (when set) in favour of row.
func (m *Memory) supersede(old, row *claimRow, at time.Time, version int64) {
	if old == nil {
		return
	}
	old.c.Status = memory.StatusSuperseded
	old.c.SupersededBy = row.c.MemoryID
	t := micro(at)
	old.c.SupersededAt = &t
	old.c.Version = version
	m.dropProjections(old)
	row.c.Supersedes = old.c.MemoryID
}

// makeCurrent gives row (already current) its projections, superseding old
// (when set) first; the caller has checked every rule.
func (m *Memory) makeCurrent(row *claimRow, old *claimRow, supersededAt time.Time, vec *memory.Vector, version int64) {
	m.supersede(old, row, supersededAt, version)
	d := newBM25Doc(row.c.MemoryID, row.c.Text)
	row.doc = &d
	if vec != nil {
		v := cloneVector(*vec)
		v.MemoryID, v.Namespace, v.ExpiresAt, v.Version = row.c.MemoryID, row.c.Namespace, cloneTime(row.c.ExpiresAt), version
		m.s.mem.vectors[vecKey{row.c.TenantID, row.c.MemoryID, v.Model}] = vecRow{subject: row.c.SubjectID, v: v}
	}
}

// Insert implements memory.Store.
func (m *Memory) Insert(ctx context.Context, p memory.InsertParams) (memory.Claim, error) {
	c := cloneClaim(p.Claim)
	if c.TenantID == "" || c.SubjectID == "" || c.MemoryID == "" {
		return memory.Claim{}, fmt.Errorf("insert claim: tenant, subject and memory id are required: %w", memory.ErrInvalidInput)
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	if _, ok := m.s.mem.claims[key{c.TenantID, c.MemoryID}]; ok {
		return memory.Claim{}, fmt.Errorf("insert claim %s: the id is taken: %w", c.MemoryID, memory.ErrConflict)
	}
	_, tomb := m.s.mem.tombstones[tombKey{c.TenantID, c.SubjectID, c.Namespace, c.Key, c.ValueDigest}]
	_, legacy := m.s.mem.tombstones[tombKey{c.TenantID, c.SubjectID, c.Namespace, c.Key, p.LegacyDigest}]
	if tomb || (legacy && p.LegacyDigest != "") {
		return memory.Claim{}, fmt.Errorf("insert claim %s: %w", c.MemoryID, memory.ErrTombstoned)
	}
	if err := m.checkConsent(c); err != nil {
		return memory.Claim{}, fmt.Errorf("insert claim %s: %w", c.MemoryID, err)
	}
	old, err := m.checkSupersede(c, p.Supersede)
	if err != nil {
		return memory.Claim{}, fmt.Errorf("insert claim %s: %w", c.MemoryID, err)
	}
	if c.Status == memory.StatusCurrent {
		if cur := m.currentFor(c); cur != nil && cur != old {
			return memory.Claim{}, fmt.Errorf("insert claim %s: claim %s is current for the key: %w", c.MemoryID, cur.c.MemoryID, memory.ErrConflict)
		}
	}
	version := m.bump(c.TenantID, c.SubjectID)
	c.Version = version
	row := &claimRow{c: c}
	m.s.mem.claims[key{c.TenantID, c.MemoryID}] = row
	if c.Status == memory.StatusCurrent {
		m.makeCurrent(row, old, p.SupersededAt, p.Vector, version)
	} else {
		// The contract lets a claim that is not current end the one it names.
		m.supersede(old, row, p.SupersededAt, version)
	}
	return cloneClaim(row.c), nil
}

// Get implements memory.Store.
func (m *Memory) Get(ctx context.Context, tenantID, memoryID string) (memory.Claim, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	row, ok := m.s.mem.claims[key{tenantID, memoryID}]
	if !ok {
		return memory.Claim{}, fmt.Errorf("claim %s: %w", memoryID, memory.ErrNotFound)
	}
	return cloneClaim(row.c), nil
}

// GetMany implements memory.Store.
func (m *Memory) GetMany(ctx context.Context, tenantID string, memoryIDs []string) ([]memory.Claim, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	var out []memory.Claim
	seen := map[string]bool{}
	for _, id := range memoryIDs {
		if row, ok := m.s.mem.claims[key{tenantID, id}]; ok && !seen[id] {
			seen[id] = true
			out = append(out, cloneClaim(row.c))
		}
	}
	return out, nil
}

// listMatch applies a ListQuery's filters other than paging.
func listMatch(c memory.Claim, q memory.ListQuery) bool {
	if c.TenantID != q.TenantID || c.SubjectID != q.SubjectID ||
		(q.Namespace != "" && c.Namespace != q.Namespace) || (q.Key != "" && c.Key != q.Key) ||
		(len(q.Statuses) > 0 && !slices.Contains(q.Statuses, c.Status)) ||
		(q.MaxSchemaVersion > 0 && c.SchemaVersion > q.MaxSchemaVersion) {
		return false
	}
	if q.LiveAt != nil {
		if q.AsOf {
			return c.LiveAt(*q.LiveAt)
		}
		return c.Live(*q.LiveAt)
	}
	return true
}

// List implements memory.Store.
func (m *Memory) List(ctx context.Context, q memory.ListQuery) ([]memory.Claim, error) {
	if q.TenantID == "" || q.SubjectID == "" {
		return nil, fmt.Errorf("list claims: tenant and subject are required: %w", memory.ErrInvalidInput)
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	if q.LiveAt != nil {
		t := micro(*q.LiveAt)
		q.LiveAt = &t
	}
	afterCreated := micro(q.AfterCreated)
	paged := !q.AfterCreated.IsZero() || q.AfterID != ""
	var out []memory.Claim
	for _, row := range m.s.mem.claims {
		c := row.c
		if !listMatch(c, q) {
			continue
		}
		if paged && (c.CreatedAt.Before(afterCreated) || (c.CreatedAt.Equal(afterCreated) && c.MemoryID <= q.AfterID)) {
			continue
		}
		out = append(out, cloneClaim(c))
	}
	slices.SortFunc(out, func(a, b memory.Claim) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.MemoryID, b.MemoryID))
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// Transition implements memory.Store.
func (m *Memory) Transition(ctx context.Context, p memory.TransitionParams) (memory.Claim, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	row, ok := m.s.mem.claims[key{p.TenantID, p.MemoryID}]
	if !ok {
		return memory.Claim{}, fmt.Errorf("transition claim %s: %w", p.MemoryID, memory.ErrNotFound)
	}
	if !slices.Contains(p.From, row.c.Status) {
		return memory.Claim{}, fmt.Errorf("transition claim %s: it is %s, not one of %v: %w", p.MemoryID, row.c.Status, p.From, memory.ErrConflict)
	}
	wasCurrent := row.c.Status == memory.StatusCurrent
	becomes := p.To == memory.StatusCurrent && !wasCurrent
	var old *claimRow
	if becomes {
		if err := m.checkConsent(row.c); err != nil {
			return memory.Claim{}, fmt.Errorf("transition claim %s: %w", p.MemoryID, err)
		}
		var err error
		if old, err = m.checkSupersede(row.c, p.Supersede); err != nil {
			return memory.Claim{}, fmt.Errorf("transition claim %s: %w", p.MemoryID, err)
		}
		if cur := m.currentFor(row.c); cur != nil && cur != old {
			return memory.Claim{}, fmt.Errorf("transition claim %s: claim %s is current for the key: %w", p.MemoryID, cur.c.MemoryID, memory.ErrConflict)
		}
	}
	version := m.bump(row.c.TenantID, row.c.SubjectID)
	row.c.Status = p.To
	row.c.Version = version
	if p.To == memory.StatusInvalidated {
		at := micro(p.At)
		row.c.InvalidatedAt = &at
		row.c.InvalidationReason = p.Reason
	}
	switch {
	case becomes:
		m.makeCurrent(row, old, p.SupersededAt, p.Vector, version)
	case wasCurrent && p.To != memory.StatusCurrent:
		m.dropProjections(row)
	}
	return cloneClaim(row.c), nil
}

// Refresh implements memory.Store.
func (m *Memory) Refresh(ctx context.Context, tenantID, memoryID string, at time.Time) (memory.Claim, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	row, ok := m.s.mem.claims[key{tenantID, memoryID}]
	if !ok {
		return memory.Claim{}, fmt.Errorf("refresh claim %s: %w", memoryID, memory.ErrNotFound)
	}
	if row.c.Status != memory.StatusCurrent {
		return memory.Claim{}, fmt.Errorf("refresh claim %s: it is %s: %w", memoryID, row.c.Status, memory.ErrConflict)
	}
	row.c.ConfirmedAt = micro(at)
	row.c.Confirmations++
	row.c.Version = m.bump(tenantID, row.c.SubjectID)
	return cloneClaim(row.c), nil
}

// Forget implements memory.Store.
func (m *Memory) Forget(ctx context.Context, p memory.ForgetParams) (memory.ForgetRecord, error) {
	if p.TenantID == "" || p.SubjectID == "" {
		return memory.ForgetRecord{}, fmt.Errorf("forget: tenant and subject are required: %w", memory.ErrInvalidInput)
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	rec := p.Record
	rec.TenantID, rec.SubjectID, rec.Namespace = p.TenantID, p.SubjectID, p.Namespace
	if rec.ForgetID == "" {
		rec.ForgetID = uuid.NewString()
	}
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = m.s.now()
	}
	rec.CreatedAt = micro(rec.CreatedAt)
	rec.Claims, rec.Tombstones = 0, 0
	for k, row := range m.s.mem.claims {
		c := row.c
		if c.TenantID != p.TenantID || c.SubjectID != p.SubjectID || (p.Namespace != "" && c.Namespace != p.Namespace) {
			continue
		}
		m.dropProjections(row)
		delete(m.s.mem.claims, k)
		rec.Claims++
		tk := tombKey{c.TenantID, c.SubjectID, c.Namespace, c.Key, c.ValueDigest}
		if _, ok := m.s.mem.tombstones[tk]; !ok {
			m.s.mem.tombstones[tk] = memory.Tombstone{TenantID: c.TenantID, SubjectID: c.SubjectID, Namespace: c.Namespace,
				Key: c.Key, ValueDigest: c.ValueDigest, CreatedAt: rec.CreatedAt}
			rec.Tombstones++
		}
	}
	if rec.Claims > 0 {
		m.s.mem.forgotten[key{p.TenantID, p.SubjectID}] = m.bump(p.TenantID, p.SubjectID)
	}
	m.s.mem.forgets = append(m.s.mem.forgets, rec)
	return rec, nil
}

// Tombstones implements memory.Store.
func (m *Memory) Tombstones(ctx context.Context, tenantID, subjectID string) ([]memory.Tombstone, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	var out []memory.Tombstone
	for k, ts := range m.s.mem.tombstones {
		if k.tenant == tenantID && k.subject == subjectID {
			out = append(out, ts)
		}
	}
	slices.SortFunc(out, func(a, b memory.Tombstone) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Key, b.Key), cmp.Compare(a.ValueDigest, b.ValueDigest))
	})
	return out, nil
}

// SearchText implements memory.Store with BM25 over the subject's
// searchable claims (the collection statistics are theirs alone).
func (m *Memory) SearchText(ctx context.Context, q memory.TextQuery) ([]memory.Scored, error) {
	if q.TenantID == "" || q.SubjectID == "" {
		return nil, fmt.Errorf("search claims: tenant and subject are required: %w", memory.ErrInvalidInput)
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	now := q.Now
	if now.IsZero() {
		now = m.s.now()
	}
	now = micro(now)
	var docs []bm25Doc
	for _, row := range m.s.mem.claims {
		c := row.c
		if row.doc == nil || c.TenantID != q.TenantID || c.SubjectID != q.SubjectID ||
			(q.Namespace != "" && c.Namespace != q.Namespace) || !c.Live(now) {
			continue
		}
		docs = append(docs, *row.doc)
	}
	scores := bm25(docs, q.Terms)
	out := make([]memory.Scored, 0, len(scores))
	for id, s := range scores {
		out = append(out, memory.Scored{MemoryID: id, Score: s})
	}
	slices.SortFunc(out, func(a, b memory.Scored) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.MemoryID, b.MemoryID))
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// Vectors implements memory.Store.
func (m *Memory) Vectors(ctx context.Context, tenantID, subjectID, model string, afterVersion int64) ([]memory.Vector, int64, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	var out []memory.Vector
	for k, vr := range m.s.mem.vectors {
		if k.tenant == tenantID && vr.subject == subjectID && k.model == model && vr.v.Version > afterVersion {
			out = append(out, cloneVector(vr.v))
		}
	}
	slices.SortFunc(out, func(a, b memory.Vector) int {
		return cmp.Or(cmp.Compare(a.Version, b.Version), cmp.Compare(a.MemoryID, b.MemoryID))
	})
	return out, m.s.mem.subjects[key{tenantID, subjectID}], nil
}

// Changes implements memory.Store.
func (m *Memory) Changes(ctx context.Context, tenantID, subjectID, model string, afterVersion int64) (memory.Changes, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	k := key{tenantID, subjectID}
	out := memory.Changes{Version: m.s.mem.subjects[k], Forgotten: m.s.mem.forgotten[k]}
	for _, row := range m.s.mem.claims {
		c := row.c
		if c.TenantID != tenantID || c.SubjectID != subjectID || c.Version <= afterVersion || (afterVersion == 0 && c.Status != memory.StatusCurrent) {
			continue
		}
		ch := memory.ClaimChange{MemoryID: c.MemoryID, Namespace: c.Namespace, Status: c.Status, ExpiresAt: cloneTime(c.ExpiresAt), Version: c.Version}
		if c.Status == memory.StatusCurrent {
			ch.Text = c.Text
		}
		out.Claims = append(out.Claims, ch)
	}
	if model != "" {
		for vk, vr := range m.s.mem.vectors {
			if vk.tenant == tenantID && vr.subject == subjectID && vk.model == model && vr.v.Version > afterVersion {
				out.Vectors = append(out.Vectors, cloneVector(vr.v))
			}
		}
	}
	return out, nil
}

// MissingVectors implements memory.Store.
func (m *Memory) MissingVectors(ctx context.Context, tenantID, subjectID, model string, limit int) ([]memory.Claim, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	var out []memory.Claim
	for _, row := range m.s.mem.claims {
		c := row.c
		if c.TenantID != tenantID || c.SubjectID != subjectID || c.Status != memory.StatusCurrent {
			continue
		}
		if _, ok := m.s.mem.vectors[vecKey{tenantID, c.MemoryID, model}]; !ok {
			out = append(out, cloneClaim(c))
		}
	}
	slices.SortFunc(out, func(a, b memory.Claim) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.MemoryID, b.MemoryID))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// PutVectors implements memory.Store.
func (m *Memory) PutVectors(ctx context.Context, tenantID, subjectID string, vs []memory.Vector) error {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	var keep []*claimRow
	var kept []memory.Vector
	for _, v := range vs {
		row, ok := m.s.mem.claims[key{tenantID, v.MemoryID}]
		if ok && row.c.SubjectID == subjectID && row.c.Status == memory.StatusCurrent {
			keep = append(keep, row)
			kept = append(kept, v)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	version := m.bump(tenantID, subjectID)
	for i, row := range keep {
		v := cloneVector(kept[i])
		v.Namespace, v.ExpiresAt, v.Version = row.c.Namespace, cloneTime(row.c.ExpiresAt), version
		m.s.mem.vectors[vecKey{tenantID, v.MemoryID, v.Model}] = vecRow{subject: subjectID, v: v}
	}
	return nil
}

// SubjectVersion implements memory.Store.
func (m *Memory) SubjectVersion(ctx context.Context, tenantID, subjectID string) (int64, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	return m.s.mem.subjects[key{tenantID, subjectID}], nil
}

// PutNamespace implements memory.Store.
func (m *Memory) PutNamespace(ctx context.Context, ns memory.Namespace) error {
	if ns.TenantID == "" || ns.Name == "" {
		return fmt.Errorf("put namespace: tenant and name are required: %w", memory.ErrInvalidInput)
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	if ns.Personal {
		if n := m.unconsented(ns.TenantID, ns.Name); n > 0 {
			return fmt.Errorf("put namespace %s: it holds %d current claims without a consent basis: %w", ns.Name, n, memory.ErrNoConsent)
		}
	}
	ns.TTL = ns.TTL.Truncate(time.Microsecond)
	m.s.mem.namespaces[key{ns.TenantID, ns.Name}] = ns
	return nil
}

// checkConsent refuses a claim without a consent basis in a namespace
// declared personal (the service checked the policy before; a declaration
// may have come in between).
func (m *Memory) checkConsent(c memory.Claim) error {
	if strings.TrimSpace(c.ConsentBasis) == "" && m.s.mem.namespaces[key{c.TenantID, c.Namespace}].Personal {
		return fmt.Errorf("namespace %s: %w", c.Namespace, memory.ErrNoConsent)
	}
	return nil
}

// GetNamespace implements memory.Store.
func (m *Memory) GetNamespace(ctx context.Context, tenantID, name string) (memory.Namespace, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	if ns, ok := m.s.mem.namespaces[key{tenantID, name}]; ok {
		return ns, nil
	}
	return memory.Namespace{TenantID: tenantID, Name: name}, nil
}

// Unconsented implements memory.Store.
func (m *Memory) Unconsented(ctx context.Context, tenantID, namespace string) (int, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	return m.unconsented(tenantID, namespace), nil
}

func (m *Memory) unconsented(tenantID, namespace string) int {
	now, n := time.Now(), 0
	for _, row := range m.s.mem.claims {
		if c := row.c; c.TenantID == tenantID && c.Namespace == namespace && c.ConsentBasis == "" && c.Live(now) {
			n++
		}
	}
	return n
}

// ProjectionRows implements memory.Store.
func (m *Memory) ProjectionRows(ctx context.Context, tenantID, subjectID string) (int, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	n := 0
	for _, row := range m.s.mem.claims {
		if row.doc != nil && row.c.TenantID == tenantID && row.c.SubjectID == subjectID {
			n++
		}
	}
	for k, vr := range m.s.mem.vectors {
		if k.tenant == tenantID && vr.subject == subjectID {
			n++
		}
	}
	return n, nil
}
