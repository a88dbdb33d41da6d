package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/store/internal/memsql"
)

// Retrieval is the retrieval.Store of a DB: a view over the same pools. It
// is a type of its own because its method names meet the other stores'.
type Retrieval struct{ db *DB }

var _ retrieval.Store = Retrieval{}

// Retrieval returns the retrieval store kept in db.
func (db *DB) Retrieval() Retrieval { return Retrieval{db: db} }

// aclCheck is the ACL rule in SQL, for a document row d: the principal (the
// two ? are it) is named, or a group it belongs to now, or the tenant.
const aclCheck = `EXISTS (SELECT 1 FROM retrieval_acl a WHERE a.tenant_id = d.tenant_id AND a.document_id = d.document_id
	AND (a.entry = ? OR a.entry = 'tenant' OR a.entry IN (SELECT 'group:' || m.group_name FROM retrieval_members m
		WHERE m.tenant_id = d.tenant_id AND m.principal = ?)))`

func bumpIndex(ctx context.Context, tx *sql.Tx, tenantID string) (int64, error) {
	var v int64
	err := tx.QueryRowContext(ctx, `INSERT INTO retrieval_tenants (tenant_id, index_version) VALUES (?, 1)
		ON CONFLICT (tenant_id) DO UPDATE SET index_version = index_version + 1 RETURNING index_version`, tenantID).Scan(&v)
	return v, err
}

func recordInvalidation(ctx context.Context, tx *sql.Tx, ev retrieval.Invalidation) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO retrieval_invalidations (tenant_id, index_version, kind, document_id, old_version,
		new_version, group_name, principal, change, rows_removed, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ev.TenantID, ev.IndexVersion, string(ev.Kind), ev.DocumentID, ev.OldVersion, ev.NewVersion, ev.Group, ev.Principal,
		ev.Change, ev.RowsRemoved, ev.At.UnixMicro())
	if err != nil {
		return fmt.Errorf("record invalidation: %w", err)
	}
	return nil
}

// dropDocumentRows deletes every projection row of a document and returns
// how many there were.
func dropDocumentRows(ctx context.Context, tx *sql.Tx, tenantID, documentID string) (int, error) {
	n := 0
	// INDEXED BY: without statistics the planner takes the primary key's
	// tenant prefix, a scan of the tenant's every chunk per write (it made
	// ingestion quadratic: 3 of every 4 ms of a put at 4k chunks).
	res, err := tx.ExecContext(ctx, `DELETE FROM retrieval_fts WHERE rowid IN (SELECT fts_rowid FROM retrieval_chunks
		INDEXED BY retrieval_chunks_document WHERE tenant_id = ? AND document_id = ? AND fts_rowid IS NOT NULL)`, tenantID, documentID)
	if err != nil {
		return 0, fmt.Errorf("drop full text: %w", err)
	}
	k, _ := res.RowsAffected()
	n += int(k)
	for _, q := range []string{
		`DELETE FROM retrieval_chunks INDEXED BY retrieval_chunks_document WHERE tenant_id = ? AND document_id = ?`,
		`DELETE FROM retrieval_vectors INDEXED BY retrieval_vectors_document WHERE tenant_id = ? AND document_id = ?`,
		`DELETE FROM retrieval_acl WHERE tenant_id = ? AND document_id = ?`,
	} {
		res, err := tx.ExecContext(ctx, q, tenantID, documentID)
		if err != nil {
			return 0, fmt.Errorf("drop projection rows: %w", err)
		}
		k, _ := res.RowsAffected()
		n += int(k)
	}
	return n, nil
}

// PutDocument implements retrieval.Store.
func (r Retrieval) PutDocument(ctx context.Context, p retrieval.PutParams) (int64, int, error) {
	d := p.Document
	if d.TenantID == "" || d.DocumentID == "" {
		return 0, 0, fmt.Errorf("put document: tenant and document id are required: %w", retrieval.ErrInvalidInput)
	}
	acl, err := json.Marshal(d.ACL)
	if err != nil {
		return 0, 0, fmt.Errorf("put document %s: %w", d.DocumentID, err)
	}
	var version int64
	var removed int
	err = r.db.writeTx(ctx, func(tx *sql.Tx) error {
		var cur int64
		err := tx.QueryRowContext(ctx, `SELECT version FROM retrieval_documents WHERE tenant_id = ? AND document_id = ?`,
			d.TenantID, d.DocumentID).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if cur != p.ExpectedVersion {
			return fmt.Errorf("stored version %d, expected %d: %w", cur, p.ExpectedVersion, retrieval.ErrConflict)
		}
		if removed, err = dropDocumentRows(ctx, tx, d.TenantID, d.DocumentID); err != nil {
			return err
		}
		if version, err = bumpIndex(ctx, tx, d.TenantID); err != nil {
			return err
		}
		var meta any
		if len(d.Metadata) > 0 {
			meta = string(d.Metadata)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO retrieval_documents (tenant_id, document_id, source_uri, source_version,
			content, metadata, acl, version, chunks, updated_at, indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant_id, document_id) DO UPDATE SET source_uri = excluded.source_uri,
				source_version = excluded.source_version, content = excluded.content, metadata = excluded.metadata,
				acl = excluded.acl, version = excluded.version, chunks = excluded.chunks,
				updated_at = excluded.updated_at, indexed_at = excluded.indexed_at`,
			d.TenantID, d.DocumentID, d.SourceURI, d.SourceVersion, d.Content, meta, string(acl), d.Version, len(p.Chunks),
			d.UpdatedAt.UnixMicro(), d.IndexedAt.UnixMicro()); err != nil {
			return fmt.Errorf("write document: %w", err)
		}
		tokens := make([]string, len(d.ACL))
		for i, e := range d.ACL {
			if _, err := tx.ExecContext(ctx, `INSERT INTO retrieval_acl (tenant_id, document_id, entry) VALUES (?, ?, ?)`,
				d.TenantID, d.DocumentID, e); err != nil {
				return fmt.Errorf("write acl: %w", err)
			}
			tokens[i] = memsql.ACLScope(d.TenantID, e)
		}
		aclTokens := strings.Join(tokens, " ")
		for _, c := range p.Chunks {
			res, err := tx.ExecContext(ctx, `INSERT INTO retrieval_fts (acl, body, tenant_id, chunk_id) VALUES (?, ?, ?, ?)`,
				aclTokens, c.Text, d.TenantID, c.ChunkID)
			if err != nil {
				return fmt.Errorf("index chunk text: %w", err)
			}
			rowid, err := res.LastInsertId()
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO retrieval_chunks (tenant_id, chunk_id, document_id, version, n, text, digest, fts_rowid,
				index_version, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, d.TenantID, c.ChunkID, d.DocumentID, d.Version, c.N, c.Text, c.Digest, rowid,
				version, c.Terms); err != nil {
				return fmt.Errorf("write chunk: %w", err)
			}
		}
		for _, v := range p.Vectors {
			if _, err := tx.ExecContext(ctx, `INSERT INTO retrieval_vectors (tenant_id, chunk_id, model, document_id, dim, vec, acl, index_version)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, d.TenantID, v.ChunkID, v.Model, d.DocumentID, len(v.Values),
				memsql.EncodeVector(v.Values), string(acl), version); err != nil {
				return fmt.Errorf("write vector: %w", err)
			}
		}
		if p.Event != nil {
			ev := *p.Event
			ev.TenantID, ev.IndexVersion, ev.RowsRemoved = d.TenantID, version, removed
			return recordInvalidation(ctx, tx, ev)
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("put document %s: %w", d.DocumentID, err)
	}
	return version, removed, nil
}

// TouchDocument implements retrieval.Store.
func (r Retrieval) TouchDocument(ctx context.Context, tenantID, documentID string, version int64, at time.Time) error {
	return r.db.writeTx(ctx, func(tx *sql.Tx) error {
		var cur int64
		err := tx.QueryRowContext(ctx, `SELECT version FROM retrieval_documents WHERE tenant_id = ? AND document_id = ?`,
			tenantID, documentID).Scan(&cur)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("touch document %s: %w", documentID, retrieval.ErrNotFound)
		case err != nil:
			return fmt.Errorf("touch document %s: %w", documentID, err)
		case cur != version:
			return fmt.Errorf("touch document %s: %w", documentID, retrieval.ErrConflict)
		}
		_, err = tx.ExecContext(ctx, `UPDATE retrieval_documents SET indexed_at = ? WHERE tenant_id = ? AND document_id = ?`,
			at.UnixMicro(), tenantID, documentID)
		return err
	})
}

// GetDocument implements retrieval.Store.
func (r Retrieval) GetDocument(ctx context.Context, tenantID, documentID string) (retrieval.Document, error) {
	var (
		d                retrieval.Document
		meta             sql.NullString
		acl              string
		updated, indexed int64
	)
	err := r.db.r.QueryRowContext(ctx, `SELECT tenant_id, document_id, source_uri, source_version, content, metadata, acl,
		version, chunks, updated_at, indexed_at FROM retrieval_documents WHERE tenant_id = ? AND document_id = ?`,
		tenantID, documentID).Scan(&d.TenantID, &d.DocumentID, &d.SourceURI, &d.SourceVersion, &d.Content, &meta, &acl,
		&d.Version, &d.Chunks, &updated, &indexed)
	if errors.Is(err, sql.ErrNoRows) {
		return retrieval.Document{}, fmt.Errorf("document %s: %w", documentID, retrieval.ErrNotFound)
	}
	if err != nil {
		return retrieval.Document{}, fmt.Errorf("read document %s: %w", documentID, err)
	}
	if err := json.Unmarshal([]byte(acl), &d.ACL); err != nil {
		return retrieval.Document{}, fmt.Errorf("decode acl of %s: %w", documentID, err)
	}
	if meta.Valid {
		d.Metadata = json.RawMessage(meta.String)
	}
	d.UpdatedAt, d.IndexedAt = fromMicros(updated), fromMicros(indexed)
	return d, nil
}

// DeletedVersion implements retrieval.Store.
func (r Retrieval) DeletedVersion(ctx context.Context, tenantID, documentID string) (int64, error) {
	var v int64
	err := r.db.r.QueryRowContext(ctx, `SELECT coalesce(max(old_version), 0) FROM retrieval_invalidations
		WHERE tenant_id = ? AND document_id = ? AND kind = 'document_deleted'`, tenantID, documentID).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("deleted version of document %s: %w", documentID, err)
	}
	return v, nil
}

// DeleteDocument implements retrieval.Store.
func (r Retrieval) DeleteDocument(ctx context.Context, tenantID, documentID string, ev retrieval.Invalidation) (retrieval.Invalidation, error) {
	err := r.db.writeTx(ctx, func(tx *sql.Tx) error {
		var cur int64
		err := tx.QueryRowContext(ctx, `SELECT version FROM retrieval_documents WHERE tenant_id = ? AND document_id = ?`,
			tenantID, documentID).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return retrieval.ErrNotFound
		}
		if err != nil {
			return err
		}
		n, err := dropDocumentRows(ctx, tx, tenantID, documentID)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM retrieval_documents WHERE tenant_id = ? AND document_id = ?`, tenantID, documentID); err != nil {
			return err
		}
		v, err := bumpIndex(ctx, tx, tenantID)
		if err != nil {
			return err
		}
		ev.TenantID, ev.IndexVersion, ev.RowsRemoved, ev.OldVersion = tenantID, v, n, cur
		return recordInvalidation(ctx, tx, ev)
	})
	if err != nil {
		return retrieval.Invalidation{}, fmt.Errorf("delete document %s: %w", documentID, err)
	}
	ev.At = fromMicros(ev.At.UnixMicro())
	return ev, nil
}

// SetMember implements retrieval.Store.
func (r Retrieval) SetMember(ctx context.Context, tenantID, group, principal string, member bool, ev retrieval.Invalidation) (bool, error) {
	changed := false
	err := r.db.writeTx(ctx, func(tx *sql.Tx) error {
		var res sql.Result
		var err error
		if member {
			res, err = tx.ExecContext(ctx, `INSERT INTO retrieval_members (tenant_id, principal, group_name) VALUES (?, ?, ?)
				ON CONFLICT DO NOTHING`, tenantID, principal, group)
		} else {
			res, err = tx.ExecContext(ctx, `DELETE FROM retrieval_members WHERE tenant_id = ? AND principal = ? AND group_name = ?`,
				tenantID, principal, group)
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		changed = true
		v, err := bumpIndex(ctx, tx, tenantID)
		if err != nil {
			return err
		}
		ev.TenantID, ev.IndexVersion = tenantID, v
		return recordInvalidation(ctx, tx, ev)
	})
	if err != nil {
		return false, fmt.Errorf("set membership: %w", err)
	}
	return changed, nil
}

func groupsOf(ctx context.Context, q querier, tenantID, principal string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT group_name FROM retrieval_members WHERE tenant_id = ? AND principal = ? ORDER BY group_name`,
		tenantID, principal)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// Groups implements retrieval.Store.
func (r Retrieval) Groups(ctx context.Context, tenantID, principal string) ([]string, error) {
	gs, err := groupsOf(ctx, r.db.r, tenantID, principal)
	if err != nil {
		return nil, fmt.Errorf("read groups: %w", err)
	}
	return gs, nil
}

func notBeforeMicros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// searchOverfetch is how many more rows the full-text ranking reads than it
// returns, so the re-check and the TTL rarely leave it short.
const searchOverfetch = 4

// SearchText implements retrieval.Store with FTS5: the ACL tokens of the
// principal's entries (its groups read in the same read transaction) ORed,
// ANDed with the ORed words, ranked by bm25() with the acl column weighed
// 0; the SQL ACL check on the document row backs the tokens up.
func (r Retrieval) SearchText(ctx context.Context, q retrieval.TextQuery) ([]retrieval.Scored, error) {
	words := memsql.Words(q.Terms)
	if len(words) == 0 {
		return nil, nil
	}
	for i, w := range words {
		words[i] = `"` + w + `"`
	}
	tx, err := r.db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("search chunks: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	groups, err := groupsOf(ctx, tx, q.TenantID, q.Principal)
	if err != nil {
		return nil, fmt.Errorf("search chunks: resolve groups: %w", err)
	}
	entries := retrieval.Entries(q.Principal, groups)
	tokens := make([]string, len(entries))
	for i, e := range entries {
		tokens[i] = `"` + memsql.ACLScope(q.TenantID, e) + `"`
	}
	match := `acl:(` + strings.Join(tokens, " OR ") + `) AND body:(` + strings.Join(words, " OR ") + `)`
	limit, inner := -1, -1
	if q.Limit > 0 {
		limit, inner = q.Limit, searchOverfetch*q.Limit
	}
	// The inner query ranks in FTS5 alone, where the ACL tokens already
	// keep only readable chunks: joining every match before the limit cost
	// a lookup per matching row (hundreds of ms for a common word over
	// 20k chunks). The outer query re-checks the ACL in SQL and applies the
	// TTL to the best inner rows; a TTL that hides most of them can leave
	// fewer than the limit (the overfetch makes that rare).
	rows, err := tx.QueryContext(ctx, `SELECT f.chunk_id, f.r FROM (
			SELECT tenant_id, chunk_id, bm25(retrieval_fts, 0.0, 1.0) AS r FROM retrieval_fts
			WHERE retrieval_fts MATCH ? AND tenant_id = ? ORDER BY r LIMIT ?) f
		JOIN retrieval_chunks c ON c.tenant_id = f.tenant_id AND c.chunk_id = f.chunk_id
		JOIN retrieval_documents d ON d.tenant_id = c.tenant_id AND d.document_id = c.document_id AND d.version = c.version
		WHERE d.indexed_at >= ? AND `+aclCheck+`
		ORDER BY f.r, f.chunk_id LIMIT ?`, match, q.TenantID, inner, notBeforeMicros(q.NotBefore), q.Principal, q.Principal, limit)
	if err != nil {
		return nil, fmt.Errorf("search chunks: %w", err)
	}
	defer rows.Close()
	var out []retrieval.Scored
	for rows.Next() {
		var s retrieval.Scored
		if err := rows.Scan(&s.ChunkID, &s.Score); err != nil {
			return nil, fmt.Errorf("search chunks: %w", err)
		}
		s.Score = -s.Score // bm25() is lower-is-better
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search chunks: %w", err)
	}
	return out, nil
}

// ReadableChunks implements retrieval.Store.
func (r Retrieval) ReadableChunks(ctx context.Context, tenantID, principal string, ids []string, notBefore time.Time) ([]retrieval.Chunk, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := []any{tenantID, notBeforeMicros(notBefore), principal, principal}
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := r.db.r.QueryContext(ctx, `SELECT c.chunk_id, c.document_id, c.version, c.n, c.text, c.digest, d.source_uri, d.source_version
		FROM retrieval_chunks c
		JOIN retrieval_documents d ON d.tenant_id = c.tenant_id AND d.document_id = c.document_id AND d.version = c.version
		WHERE c.tenant_id = ? AND d.indexed_at >= ? AND `+aclCheck+` AND c.chunk_id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("read chunks: %w", err)
	}
	defer rows.Close()
	var out []retrieval.Chunk
	for rows.Next() {
		var c retrieval.Chunk
		if err := rows.Scan(&c.ChunkID, &c.DocumentID, &c.Version, &c.N, &c.Text, &c.Digest, &c.SourceURI, &c.SourceVersion); err != nil {
			return nil, fmt.Errorf("read chunks: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func indexVersion(ctx context.Context, q querier, tenantID string) (int64, error) {
	var v int64
	err := q.QueryRowContext(ctx, `SELECT index_version FROM retrieval_tenants WHERE tenant_id = ?`, tenantID).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// IndexVersion implements retrieval.Store.
func (r Retrieval) IndexVersion(ctx context.Context, tenantID string) (int64, error) {
	v, err := indexVersion(ctx, r.db.r, tenantID)
	if err != nil {
		return 0, fmt.Errorf("read index version: %w", err)
	}
	return v, nil
}

func invalidations(ctx context.Context, q querier, tenantID string, after int64, limit int) ([]retrieval.Invalidation, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := q.QueryContext(ctx, `SELECT index_version, kind, document_id, old_version, new_version, group_name, principal,
		change, rows_removed, at FROM retrieval_invalidations WHERE tenant_id = ? AND index_version > ? ORDER BY index_version LIMIT ?`,
		tenantID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []retrieval.Invalidation
	for rows.Next() {
		ev := retrieval.Invalidation{TenantID: tenantID}
		var kind string
		var at int64
		if err := rows.Scan(&ev.IndexVersion, &kind, &ev.DocumentID, &ev.OldVersion, &ev.NewVersion, &ev.Group, &ev.Principal,
			&ev.Change, &ev.RowsRemoved, &at); err != nil {
			return nil, err
		}
		ev.Kind, ev.At = retrieval.InvalidationKind(kind), fromMicros(at)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// Invalidations implements retrieval.Store.
func (r Retrieval) Invalidations(ctx context.Context, tenantID string, after int64, limit int) ([]retrieval.Invalidation, error) {
	out, err := invalidations(ctx, r.db.r, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list invalidations: %w", err)
	}
	return out, nil
}

// IndexRows implements retrieval.Store, in one read transaction.
func (r Retrieval) IndexRows(ctx context.Context, tenantID, model string, after int64) ([]retrieval.IndexRow, []retrieval.Invalidation, int64, error) {
	tx, err := r.db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read index rows: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	v, err := indexVersion(ctx, tx, tenantID)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read index rows: %w", err)
	}
	invs, err := invalidations(ctx, tx, tenantID, after, 0)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read index rows: %w", err)
	}
	// The ACL and version of each document with rows to read, first and
	// apart: a document's row holds its content before them, so reading
	// them in a join walks the content's overflow pages once per chunk
	// (seconds for a few large documents) instead of once per document.
	docs := `SELECT document_id, version, acl FROM retrieval_documents WHERE tenant_id = ?`
	args := []any{tenantID}
	if after > 0 {
		docs += ` AND document_id IN (SELECT document_id FROM retrieval_chunks INDEXED BY retrieval_chunks_version
			WHERE tenant_id = ? AND index_version > ?)`
		args = append(args, tenantID, after)
	}
	type docKey struct {
		id      string
		version int64
	}
	acls := map[docKey][]string{}
	drows, err := tx.QueryContext(ctx, docs, args...)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read index rows: %w", err)
	}
	for drows.Next() {
		var (
			k   docKey
			acl string
			a   []string
		)
		if err := drows.Scan(&k.id, &k.version, &acl); err != nil {
			drows.Close()
			return nil, nil, 0, fmt.Errorf("read index rows: %w", err)
		}
		if err := json.Unmarshal([]byte(acl), &a); err != nil {
			drows.Close()
			return nil, nil, 0, fmt.Errorf("read acl of %s: %w", k.id, err)
		}
		acls[k] = a
	}
	if err := drows.Close(); err != nil {
		return nil, nil, 0, fmt.Errorf("read index rows: %w", err)
	}
	// A first load reads the tenant's chunks in key order (a document's
	// chunks together, the vectors' key in step); a later one only the
	// rows since, through the version index. Chunks of a version that is
	// not the document's own any more are skipped.
	from := `retrieval_chunks c`
	if after > 0 {
		from = `retrieval_chunks c INDEXED BY retrieval_chunks_version`
	}
	rows, err := tx.QueryContext(ctx, `SELECT c.chunk_id, c.document_id, c.version, c.terms,
			CASE WHEN c.terms IS NULL THEN c.text END, v.dim, v.vec, c.index_version
		FROM `+from+`
		LEFT JOIN retrieval_vectors v ON v.tenant_id = c.tenant_id AND v.chunk_id = c.chunk_id AND v.model = ?
		WHERE c.tenant_id = ? AND c.index_version > ? ORDER BY c.chunk_id`, model, tenantID, after)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read index rows: %w", err)
	}
	defer rows.Close()
	var out []retrieval.IndexRow
	for rows.Next() {
		var (
			row        retrieval.IndexRow
			terms, txt sql.NullString
			dim        sql.NullInt64
			blob       []byte
		)
		if err := rows.Scan(&row.ChunkID, &row.DocumentID, &row.Version, &terms, &txt, &dim, &blob, &row.IndexVersion); err != nil {
			return nil, nil, 0, fmt.Errorf("read index rows: %w", err)
		}
		acl, ok := acls[docKey{row.DocumentID, row.Version}]
		if !ok {
			continue
		}
		row.ACL = acl
		row.Terms, row.Text = terms.String, txt.String
		if dim.Valid {
			if row.Vector, err = memsql.DecodeVector(blob, int(dim.Int64)); err != nil {
				return nil, nil, 0, fmt.Errorf("read vector of %s: %w", row.ChunkID, err)
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, 0, fmt.Errorf("read index rows: %w", err)
	}
	return out, invs, v, nil
}

// PutSnapshot implements retrieval.Store: three statements (the snapshot,
// its texts by digest, its hits), not two per hit.
func (r Retrieval) PutSnapshot(ctx context.Context, s retrieval.Snapshot) error {
	return r.db.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO retrieval_snapshots (tenant_id, snapshot_id, query_digest, index_version, principal, k, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, s.TenantID, s.SnapshotID, s.QueryDigest, s.IndexVersion, s.Principal, s.K, s.CreatedAt.UnixMicro()); err != nil {
			return fmt.Errorf("write snapshot: %w", err)
		}
		if len(s.Hits) == 0 {
			return nil
		}
		texts := make([]any, 0, 3*len(s.Hits))
		hits := make([]any, 0, 11*len(s.Hits))
		for i, h := range s.Hits {
			texts = append(texts, s.TenantID, h.ContentDigest, h.Text)
			hits = append(hits, s.TenantID, s.SnapshotID, i, h.DocumentID, h.SourceURI, h.SourceVersion, h.Version, h.ChunkID,
				h.ContentDigest, h.Score, h.RetrievedAt.UnixMicro())
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO retrieval_texts (tenant_id, digest, text) VALUES (?, ?, ?)`+
			strings.Repeat(", (?, ?, ?)", len(s.Hits)-1)+` ON CONFLICT DO NOTHING`, texts...); err != nil {
			return fmt.Errorf("keep snapshot texts: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO retrieval_snapshot_hits (tenant_id, snapshot_id, rank, document_id, source_uri,
			source_version, version, chunk_id, content_digest, score, retrieved_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`+
			strings.Repeat(", (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", len(s.Hits)-1), hits...); err != nil {
			return fmt.Errorf("write snapshot hits: %w", err)
		}
		return nil
	})
}

// GetSnapshot implements retrieval.Store.
func (r Retrieval) GetSnapshot(ctx context.Context, tenantID, snapshotID string) (retrieval.Snapshot, error) {
	tx, err := r.db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return retrieval.Snapshot{}, fmt.Errorf("read snapshot: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	s := retrieval.Snapshot{TenantID: tenantID, SnapshotID: snapshotID, Hits: []retrieval.Hit{}}
	var created int64
	err = tx.QueryRowContext(ctx, `SELECT query_digest, index_version, principal, k, created_at FROM retrieval_snapshots
		WHERE tenant_id = ? AND snapshot_id = ?`, tenantID, snapshotID).Scan(&s.QueryDigest, &s.IndexVersion, &s.Principal, &s.K, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return retrieval.Snapshot{}, fmt.Errorf("snapshot %s: %w", snapshotID, retrieval.ErrNotFound)
	}
	if err != nil {
		return retrieval.Snapshot{}, fmt.Errorf("read snapshot: %w", err)
	}
	s.CreatedAt = fromMicros(created)
	rows, err := tx.QueryContext(ctx, `SELECT h.document_id, h.source_uri, h.source_version, h.version, h.chunk_id, h.content_digest,
		h.score, h.retrieved_at, t.text FROM retrieval_snapshot_hits h
		JOIN retrieval_texts t ON t.tenant_id = h.tenant_id AND t.digest = h.content_digest
		WHERE h.tenant_id = ? AND h.snapshot_id = ? ORDER BY h.rank`, tenantID, snapshotID)
	if err != nil {
		return retrieval.Snapshot{}, fmt.Errorf("read snapshot hits: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h retrieval.Hit
		var at int64
		if err := rows.Scan(&h.DocumentID, &h.SourceURI, &h.SourceVersion, &h.Version, &h.ChunkID, &h.ContentDigest, &h.Score, &at, &h.Text); err != nil {
			return retrieval.Snapshot{}, fmt.Errorf("read snapshot hits: %w", err)
		}
		h.RetrievedAt = fromMicros(at)
		s.Hits = append(s.Hits, h)
	}
	return s, rows.Err()
}

// PurgeSnapshots implements retrieval.Store, retrieval.PurgeBatch
// snapshots per transaction: the write lock is never held long.
func (r Retrieval) PurgeSnapshots(ctx context.Context, tenantID string, before time.Time) (int, error) {
	n, err := retrieval.InBatches(func() (int, error) { return r.purgeSnapshotBatch(ctx, tenantID, before) })
	if err != nil {
		return n, fmt.Errorf("purge snapshots: %w", err)
	}
	return n, nil
}

// purgeSnapshotBatch deletes up to retrieval.PurgeBatch of the oldest snapshots past
// before ("" tenant: every tenant's), their hits, and the texts of those
// hits no other snapshot names.
func (r Retrieval) purgeSnapshotBatch(ctx context.Context, tenantID string, before time.Time) (int, error) {
	n := 0
	err := r.db.writeTx(ctx, func(tx *sql.Tx) error {
		pick := `SELECT tenant_id, snapshot_id FROM retrieval_snapshots WHERE created_at < ?1 ORDER BY created_at LIMIT ?2`
		if tenantID != "" {
			pick = `SELECT tenant_id, snapshot_id FROM retrieval_snapshots WHERE tenant_id = ?3 AND created_at < ?1 ORDER BY created_at LIMIT ?2`
		}
		rows, err := tx.QueryContext(ctx, pick, before.UnixMicro(), retrieval.PurgeBatch, tenantID)
		if err != nil {
			return err
		}
		type key struct{ tenant, id string }
		var picked []key
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.tenant, &k.id); err != nil {
				rows.Close()
				return err
			}
			picked = append(picked, k)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		n = len(picked)
		digests := map[key]bool{} // (tenant, digest) of the deleted hits
		for _, k := range picked {
			hits, err := tx.QueryContext(ctx, `DELETE FROM retrieval_snapshot_hits WHERE tenant_id = ? AND snapshot_id = ? RETURNING content_digest`, k.tenant, k.id)
			if err != nil {
				return err
			}
			for hits.Next() {
				var d string
				if err := hits.Scan(&d); err != nil {
					hits.Close()
					return err
				}
				digests[key{k.tenant, d}] = true
			}
			if err := hits.Close(); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM retrieval_snapshots WHERE tenant_id = ? AND snapshot_id = ?`, k.tenant, k.id); err != nil {
				return err
			}
		}
		for d := range digests {
			if _, err := tx.ExecContext(ctx, `DELETE FROM retrieval_texts WHERE tenant_id = ?1 AND digest = ?2 AND NOT EXISTS
				(SELECT 1 FROM retrieval_snapshot_hits h WHERE h.tenant_id = ?1 AND h.content_digest = ?2)`, d.tenant, d.id); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// ProjectionRows implements retrieval.Store.
func (r Retrieval) ProjectionRows(ctx context.Context, tenantID, documentID string) (int, error) {
	var n int
	err := r.db.r.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM retrieval_chunks WHERE tenant_id = ? AND document_id = ?) +
		(SELECT count(*) FROM retrieval_vectors WHERE tenant_id = ? AND document_id = ?) +
		(SELECT count(*) FROM retrieval_acl WHERE tenant_id = ? AND document_id = ?) +
		(SELECT count(*) FROM retrieval_fts WHERE tenant_id = ? AND chunk_id LIKE ? ESCAPE '\')`,
		tenantID, documentID, tenantID, documentID, tenantID, documentID, tenantID, likePrefix(documentID+":p")).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count projection rows: %w", err)
	}
	return n, nil
}

func likePrefix(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s) + "%"
}
