package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/store/internal/memsql"
)

// Retrieval is the retrieval.Store of a DB: a view over the same pool. It
// is a type of its own because its method names meet the other stores'.
type Retrieval struct{ db *DB }

var _ retrieval.Store = Retrieval{}

// Retrieval returns the retrieval store kept in db.
func (db *DB) Retrieval() Retrieval { return Retrieval{db: db} }

// entriesSQL is what the principal ($2) of tenant $1 may read by, resolved
// inside the query that uses it: itself, the tenant entry, and the groups
// it belongs to now.
const entriesSQL = `(ARRAY[$2::text, 'tenant'] || ARRAY(SELECT 'group:' || m.group_name FROM retrieval_members m
	WHERE m.tenant_id = $1 AND m.principal = $2))`

// retTx runs fn in a write transaction that first moves the tenant's index
// version (taking its row lock, so the tenant's retrieval writes are
// serialized) and hands fn the new version.
func (r Retrieval) retTx(ctx context.Context, tenantID string, fn func(tx pgx.Tx, version int64) error) error {
	err := pgx.BeginTxFunc(ctx, r.db.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var v int64
		if err := tx.QueryRow(ctx, `INSERT INTO retrieval_tenants AS t (tenant_id, index_version) VALUES ($1, 1)
			ON CONFLICT (tenant_id) DO UPDATE SET index_version = t.index_version + 1 RETURNING index_version`, tenantID).Scan(&v); err != nil {
			return fmt.Errorf("move index version: %w", err)
		}
		return fn(tx, v)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%s: %w", pgErr.ConstraintName, retrieval.ErrConflict)
	}
	return err
}

func recordInvalidation(ctx context.Context, tx pgx.Tx, ev retrieval.Invalidation) error {
	_, err := tx.Exec(ctx, `INSERT INTO retrieval_invalidations (tenant_id, index_version, kind, document_id, old_version,
		new_version, group_name, principal, change, rows_removed, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		ev.TenantID, ev.IndexVersion, string(ev.Kind), ev.DocumentID, ev.OldVersion, ev.NewVersion, ev.Group, ev.Principal,
		ev.Change, ev.RowsRemoved, ev.At)
	if err != nil {
		return fmt.Errorf("record invalidation: %w", err)
	}
	return nil
}

func dropDocumentRows(ctx context.Context, tx pgx.Tx, tenantID, documentID string) (int, error) {
	n := 0
	for _, q := range []string{
		`DELETE FROM retrieval_chunks WHERE tenant_id = $1 AND document_id = $2`,
		`DELETE FROM retrieval_vectors WHERE tenant_id = $1 AND document_id = $2`,
	} {
		tag, err := tx.Exec(ctx, q, tenantID, documentID)
		if err != nil {
			return 0, fmt.Errorf("drop projection rows: %w", err)
		}
		n += int(tag.RowsAffected())
	}
	return n, nil
}

func storedVersion(ctx context.Context, tx pgx.Tx, tenantID, documentID string) (int64, error) {
	var v int64
	err := tx.QueryRow(ctx, `SELECT version FROM retrieval_documents WHERE tenant_id = $1 AND document_id = $2`, tenantID, documentID).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// PutDocument implements retrieval.Store.
func (r Retrieval) PutDocument(ctx context.Context, p retrieval.PutParams) (int64, int, error) {
	d := p.Document
	if d.TenantID == "" || d.DocumentID == "" {
		return 0, 0, fmt.Errorf("put document: tenant and document id are required: %w", retrieval.ErrInvalidInput)
	}
	var version int64
	var removed int
	err := r.retTx(ctx, d.TenantID, func(tx pgx.Tx, v int64) error {
		version = v
		cur, err := storedVersion(ctx, tx, d.TenantID, d.DocumentID)
		if err != nil {
			return err
		}
		if cur != p.ExpectedVersion {
			return fmt.Errorf("stored version %d, expected %d: %w", cur, p.ExpectedVersion, retrieval.ErrConflict)
		}
		if removed, err = dropDocumentRows(ctx, tx, d.TenantID, d.DocumentID); err != nil {
			return err
		}
		var meta *string
		if len(d.Metadata) > 0 {
			m := string(d.Metadata)
			meta = &m
		}
		if _, err := tx.Exec(ctx, `INSERT INTO retrieval_documents (tenant_id, document_id, source_uri, source_version,
			content, metadata, acl, version, chunks, updated_at, indexed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
			ON CONFLICT (tenant_id, document_id) DO UPDATE SET source_uri = excluded.source_uri,
				source_version = excluded.source_version, content = excluded.content, metadata = excluded.metadata,
				acl = excluded.acl, version = excluded.version, chunks = excluded.chunks,
				updated_at = excluded.updated_at, indexed_at = excluded.indexed_at`,
			d.TenantID, d.DocumentID, d.SourceURI, d.SourceVersion, d.Content, meta, d.ACL, d.Version, len(p.Chunks),
			d.UpdatedAt, d.IndexedAt); err != nil {
			return fmt.Errorf("write document: %w", err)
		}
		if len(p.Chunks) > 0 {
			rows := make([][]any, len(p.Chunks))
			for i, c := range p.Chunks {
				rows[i] = []any{d.TenantID, c.ChunkID, d.DocumentID, d.Version, c.N, c.Text, c.Digest, d.ACL, v, c.Terms}
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"retrieval_chunks"},
				[]string{"tenant_id", "chunk_id", "document_id", "version", "n", "text", "digest", "acl", "index_version", "terms"},
				pgx.CopyFromRows(rows)); err != nil {
				return fmt.Errorf("write chunks: %w", err)
			}
		}
		if len(p.Vectors) > 0 {
			rows := make([][]any, len(p.Vectors))
			for i, vec := range p.Vectors {
				rows[i] = []any{d.TenantID, vec.ChunkID, vec.Model, d.DocumentID, memsql.EncodeVector(vec.Values), len(vec.Values), d.ACL, v}
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"retrieval_vectors"},
				[]string{"tenant_id", "chunk_id", "model", "document_id", "vec", "dim", "acl", "index_version"}, pgx.CopyFromRows(rows)); err != nil {
				return fmt.Errorf("write vectors: %w", err)
			}
		}
		if p.Event != nil {
			ev := *p.Event
			ev.TenantID, ev.IndexVersion, ev.RowsRemoved = d.TenantID, v, removed
			return recordInvalidation(ctx, tx, ev)
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("put document %s: %w", d.DocumentID, err)
	}
	return version, removed, nil
}

// TouchDocument implements retrieval.Store. It does not move the index
// version: no projection row changes.
func (r Retrieval) TouchDocument(ctx context.Context, tenantID, documentID string, version int64, at time.Time) error {
	tag, err := r.db.pool.Exec(ctx, `UPDATE retrieval_documents SET indexed_at = $4 WHERE tenant_id = $1 AND document_id = $2 AND version = $3`,
		tenantID, documentID, version, at)
	if err != nil {
		return fmt.Errorf("touch document %s: %w", documentID, err)
	}
	if tag.RowsAffected() == 0 {
		if _, err := r.GetDocument(ctx, tenantID, documentID); err != nil {
			return fmt.Errorf("touch document %s: %w", documentID, err)
		}
		return fmt.Errorf("touch document %s: %w", documentID, retrieval.ErrConflict)
	}
	return nil
}

// GetDocument implements retrieval.Store.
func (r Retrieval) GetDocument(ctx context.Context, tenantID, documentID string) (retrieval.Document, error) {
	var (
		d    retrieval.Document
		meta *string
	)
	err := r.db.pool.QueryRow(ctx, `SELECT tenant_id, document_id, source_uri, source_version, content, metadata, acl,
		version, chunks, updated_at, indexed_at FROM retrieval_documents WHERE tenant_id = $1 AND document_id = $2`,
		tenantID, documentID).Scan(&d.TenantID, &d.DocumentID, &d.SourceURI, &d.SourceVersion, &d.Content, &meta, &d.ACL,
		&d.Version, &d.Chunks, &d.UpdatedAt, &d.IndexedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return retrieval.Document{}, fmt.Errorf("document %s: %w", documentID, retrieval.ErrNotFound)
	}
	if err != nil {
		return retrieval.Document{}, fmt.Errorf("read document %s: %w", documentID, err)
	}
	if meta != nil {
		d.Metadata = []byte(*meta)
	}
	d.UpdatedAt, d.IndexedAt = d.UpdatedAt.UTC(), d.IndexedAt.UTC()
	return d, nil
}

// DeletedVersion implements retrieval.Store.
func (r Retrieval) DeletedVersion(ctx context.Context, tenantID, documentID string) (int64, error) {
	var v int64
	err := r.db.pool.QueryRow(ctx, `SELECT coalesce(max(old_version), 0) FROM retrieval_invalidations
		WHERE tenant_id = $1 AND document_id = $2 AND kind = 'document_deleted'`, tenantID, documentID).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("deleted version of document %s: %w", documentID, err)
	}
	return v, nil
}

// DeleteDocument implements retrieval.Store.
func (r Retrieval) DeleteDocument(ctx context.Context, tenantID, documentID string, ev retrieval.Invalidation) (retrieval.Invalidation, error) {
	err := r.retTx(ctx, tenantID, func(tx pgx.Tx, v int64) error {
		var cur int64
		err := tx.QueryRow(ctx, `DELETE FROM retrieval_documents WHERE tenant_id = $1 AND document_id = $2 RETURNING version`,
			tenantID, documentID).Scan(&cur)
		if errors.Is(err, pgx.ErrNoRows) {
			return retrieval.ErrNotFound
		}
		if err != nil {
			return err
		}
		n, err := dropDocumentRows(ctx, tx, tenantID, documentID)
		if err != nil {
			return err
		}
		ev.TenantID, ev.IndexVersion, ev.RowsRemoved, ev.OldVersion = tenantID, v, n, cur
		return recordInvalidation(ctx, tx, ev)
	})
	if err != nil {
		return retrieval.Invalidation{}, fmt.Errorf("delete document %s: %w", documentID, err)
	}
	ev.At = ev.At.UTC().Truncate(time.Microsecond)
	return ev, nil
}

// errUnchanged rolls back a membership write that changed nothing, so the
// index version does not move.
var errUnchanged = errors.New("membership unchanged")

// SetMember implements retrieval.Store.
func (r Retrieval) SetMember(ctx context.Context, tenantID, group, principal string, member bool, ev retrieval.Invalidation) (bool, error) {
	err := r.retTx(ctx, tenantID, func(tx pgx.Tx, v int64) error {
		var tag pgconn.CommandTag
		var err error
		if member {
			tag, err = tx.Exec(ctx, `INSERT INTO retrieval_members (tenant_id, principal, group_name) VALUES ($1, $2, $3)
				ON CONFLICT DO NOTHING`, tenantID, principal, group)
		} else {
			tag, err = tx.Exec(ctx, `DELETE FROM retrieval_members WHERE tenant_id = $1 AND principal = $2 AND group_name = $3`,
				tenantID, principal, group)
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errUnchanged
		}
		ev.TenantID, ev.IndexVersion = tenantID, v
		return recordInvalidation(ctx, tx, ev)
	})
	if errors.Is(err, errUnchanged) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("set membership: %w", err)
	}
	return true, nil
}

// Groups implements retrieval.Store.
func (r Retrieval) Groups(ctx context.Context, tenantID, principal string) ([]string, error) {
	rows, err := r.db.pool.Query(ctx, `SELECT group_name FROM retrieval_members WHERE tenant_id = $1 AND principal = $2 ORDER BY group_name`,
		tenantID, principal)
	if err != nil {
		return nil, fmt.Errorf("read groups: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read groups: %w", err)
	}
	return out, nil
}

// SearchText implements retrieval.Store: the english tsvector of each
// chunk matched against the OR of plainto_tsquery of each word, and its ACL
// overlapping the principal's entries (groups resolved in the same query),
// ranked by ts_rank_cd normalised by length.
func (r Retrieval) SearchText(ctx context.Context, q retrieval.TextQuery) ([]retrieval.Scored, error) {
	words := memsql.Words(q.Terms)
	if len(words) == 0 {
		return nil, nil
	}
	a := args{q.TenantID, q.Principal, q.NotBefore}
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = `plainto_tsquery('english', ` + a.add(w) + `)`
	}
	limit := ""
	if q.Limit > 0 {
		limit = ` LIMIT ` + a.add(q.Limit)
	}
	rows, err := r.db.pool.Query(ctx, `SELECT c.chunk_id, ts_rank_cd(c.tsv, q.q, 1)::float8 AS score
		FROM retrieval_chunks c
		JOIN retrieval_documents d ON d.tenant_id = c.tenant_id AND d.document_id = c.document_id AND d.version = c.version,
		(SELECT `+strings.Join(parts, " || ")+` AS q) q
		WHERE c.tenant_id = $1 AND c.acl && `+entriesSQL+` AND d.indexed_at >= $3 AND c.tsv @@ q.q
		ORDER BY score DESC, c.chunk_id`+limit, a...)
	if err != nil {
		return nil, fmt.Errorf("search chunks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (retrieval.Scored, error) {
		var s retrieval.Scored
		err := row.Scan(&s.ChunkID, &s.Score)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("search chunks: %w", err)
	}
	return out, nil
}

// ReadableChunks implements retrieval.Store.
func (r Retrieval) ReadableChunks(ctx context.Context, tenantID, principal string, ids []string, notBefore time.Time) ([]retrieval.Chunk, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	// The chunks by primary key, then each one's document by primary key:
	// OFFSET 0 keeps the lateral subquery from being flattened into a join
	// the planner, on a freshly loaded tenant (no statistics yet), ran as
	// a scan of every document of the tenant (270 ms at 10k documents,
	// against 1 ms).
	rows, err := r.db.pool.Query(ctx, `SELECT c.chunk_id, c.document_id, c.version, c.n, c.text, c.digest, d.source_uri, d.source_version
		FROM retrieval_chunks c CROSS JOIN LATERAL (
			SELECT source_uri, source_version FROM retrieval_documents d
			WHERE d.tenant_id = c.tenant_id AND d.document_id = c.document_id AND d.version = c.version
				AND d.indexed_at >= $4 AND d.acl && `+entriesSQL+` OFFSET 0) d
		WHERE c.tenant_id = $1 AND c.chunk_id = ANY($3)`,
		tenantID, principal, ids, notBefore)
	if err != nil {
		return nil, fmt.Errorf("read chunks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (retrieval.Chunk, error) {
		var c retrieval.Chunk
		err := row.Scan(&c.ChunkID, &c.DocumentID, &c.Version, &c.N, &c.Text, &c.Digest, &c.SourceURI, &c.SourceVersion)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read chunks: %w", err)
	}
	return out, nil
}

func indexVersion(ctx context.Context, q queryer, tenantID string) (int64, error) {
	var v int64
	err := q.QueryRow(ctx, `SELECT index_version FROM retrieval_tenants WHERE tenant_id = $1`, tenantID).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// IndexVersion implements retrieval.Store.
func (r Retrieval) IndexVersion(ctx context.Context, tenantID string) (int64, error) {
	v, err := indexVersion(ctx, r.db.pool, tenantID)
	if err != nil {
		return 0, fmt.Errorf("read index version: %w", err)
	}
	return v, nil
}

func invalidations(ctx context.Context, q queryer, tenantID string, after int64, limit int) ([]retrieval.Invalidation, error) {
	sqlLimit := ""
	if limit > 0 {
		sqlLimit = fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := q.Query(ctx, `SELECT index_version, kind, document_id, old_version, new_version, group_name, principal,
		change, rows_removed, at FROM retrieval_invalidations WHERE tenant_id = $1 AND index_version > $2 ORDER BY index_version`+sqlLimit,
		tenantID, after)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (retrieval.Invalidation, error) {
		ev := retrieval.Invalidation{TenantID: tenantID}
		var kind string
		err := row.Scan(&ev.IndexVersion, &kind, &ev.DocumentID, &ev.OldVersion, &ev.NewVersion, &ev.Group, &ev.Principal,
			&ev.Change, &ev.RowsRemoved, &ev.At)
		ev.Kind, ev.At = retrieval.InvalidationKind(kind), ev.At.UTC()
		return ev, err
	})
}

// Invalidations implements retrieval.Store.
func (r Retrieval) Invalidations(ctx context.Context, tenantID string, after int64, limit int) ([]retrieval.Invalidation, error) {
	out, err := invalidations(ctx, r.db.pool, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list invalidations: %w", err)
	}
	return out, nil
}

// IndexRows implements retrieval.Store in one repeatable-read snapshot.
func (r Retrieval) IndexRows(ctx context.Context, tenantID, model string, after int64) ([]retrieval.IndexRow, []retrieval.Invalidation, int64, error) {
	var (
		out  []retrieval.IndexRow
		invs []retrieval.Invalidation
		v    int64
	)
	err := pgx.BeginTxFunc(ctx, r.db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if v, err = indexVersion(ctx, tx, tenantID); err != nil {
			return err
		}
		if invs, err = invalidations(ctx, tx, tenantID, after, 0); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT c.chunk_id, c.document_id, c.version, c.acl, coalesce(c.terms, ''),
				CASE WHEN c.terms IS NULL THEN c.text ELSE '' END, c.index_version
			FROM retrieval_chunks c
			WHERE c.tenant_id = $1 AND c.index_version > $2 ORDER BY c.index_version, c.chunk_id`, tenantID, after)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (retrieval.IndexRow, error) {
			var r retrieval.IndexRow
			err := row.Scan(&r.ChunkID, &r.DocumentID, &r.Version, &r.ACL, &r.Terms, &r.Text, &r.IndexVersion)
			return r, err
		})
		if err != nil || len(out) == 0 {
			return err
		}
		// The chunks' vectors in a second statement, by their keys: joined
		// in SQL, on the row counts of tables not analysed since a bulk
		// load (a few rows), the plan looked each chunk's vector up through
		// the model's index, walking every vector of the tenant per chunk.
		ids := make([]string, len(out))
		at := make(map[string]int, len(out))
		for i, r := range out {
			ids[i], at[r.ChunkID] = r.ChunkID, i
		}
		vrows, err := tx.Query(ctx, `SELECT chunk_id, dim, vec FROM retrieval_vectors
			WHERE tenant_id = $1 AND model = $2 AND chunk_id = ANY($3)`, tenantID, model, ids)
		if err != nil {
			return err
		}
		defer vrows.Close()
		for vrows.Next() {
			var (
				id   string
				dim  int
				blob []byte
			)
			if err := vrows.Scan(&id, &dim, &blob); err != nil {
				return err
			}
			i, ok := at[id]
			if !ok {
				continue
			}
			if out[i].Vector, err = memsql.DecodeVector(blob, dim); err != nil {
				return fmt.Errorf("vector of %s: %w", id, err)
			}
		}
		return vrows.Err()
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read index rows: %w", err)
	}
	return out, invs, v, nil
}

// PutSnapshot implements retrieval.Store in one statement (one round
// trip, its own transaction): the snapshot, its texts by digest and its
// hits, by data-modifying CTEs over arrays.
func (r Retrieval) PutSnapshot(ctx context.Context, s retrieval.Snapshot) error {
	n := len(s.Hits)
	digests, texts, docs, uris := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	svs, chunks, versions := make([]string, n), make([]string, n), make([]int64, n)
	scores, ats := make([]float64, n), make([]time.Time, n)
	for i, h := range s.Hits {
		digests[i], texts[i], docs[i], uris[i] = h.ContentDigest, h.Text, h.DocumentID, h.SourceURI
		svs[i], chunks[i], versions[i], scores[i], ats[i] = h.SourceVersion, h.ChunkID, h.Version, h.Score, h.RetrievedAt
	}
	_, err := r.db.pool.Exec(ctx, `WITH s AS (
			INSERT INTO retrieval_snapshots (tenant_id, snapshot_id, query_digest, index_version, principal, k, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
		), t AS (
			INSERT INTO retrieval_texts (tenant_id, digest, text)
			SELECT DISTINCT ON (d) $1, d, x FROM unnest($8::text[], $9::text[]) AS u(d, x)
			ON CONFLICT DO NOTHING
		)
		INSERT INTO retrieval_snapshot_hits (tenant_id, snapshot_id, rank, document_id, source_uri, source_version, version,
			chunk_id, content_digest, score, retrieved_at)
		SELECT $1, $2, u.ord - 1, u.doc, u.uri, u.sv, u.ver, u.chunk, u.dig, u.score, u.at
		FROM unnest($10::text[], $11::text[], $12::text[], $13::bigint[], $14::text[], $8::text[], $15::float8[], $16::timestamptz[])
			WITH ORDINALITY AS u(doc, uri, sv, ver, chunk, dig, score, at, ord)`,
		s.TenantID, s.SnapshotID, s.QueryDigest, s.IndexVersion, s.Principal, s.K, s.CreatedAt,
		digests, texts, docs, uris, svs, versions, chunks, scores, ats)
	if err != nil {
		return fmt.Errorf("store snapshot: %w", err)
	}
	return nil
}

// GetSnapshot implements retrieval.Store.
func (r Retrieval) GetSnapshot(ctx context.Context, tenantID, snapshotID string) (retrieval.Snapshot, error) {
	s := retrieval.Snapshot{TenantID: tenantID, SnapshotID: snapshotID, Hits: []retrieval.Hit{}}
	err := pgx.BeginTxFunc(ctx, r.db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT query_digest, index_version, principal, k, created_at FROM retrieval_snapshots
			WHERE tenant_id = $1 AND snapshot_id = $2`, tenantID, snapshotID).Scan(&s.QueryDigest, &s.IndexVersion, &s.Principal, &s.K, &s.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return retrieval.ErrNotFound
		}
		if err != nil {
			return err
		}
		s.CreatedAt = s.CreatedAt.UTC()
		rows, err := tx.Query(ctx, `SELECT h.document_id, h.source_uri, h.source_version, h.version, h.chunk_id, h.content_digest,
			h.score, h.retrieved_at, t.text FROM retrieval_snapshot_hits h
			JOIN retrieval_texts t ON t.tenant_id = h.tenant_id AND t.digest = h.content_digest
			WHERE h.tenant_id = $1 AND h.snapshot_id = $2 ORDER BY h.rank`, tenantID, snapshotID)
		if err != nil {
			return err
		}
		hits, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (retrieval.Hit, error) {
			var h retrieval.Hit
			err := row.Scan(&h.DocumentID, &h.SourceURI, &h.SourceVersion, &h.Version, &h.ChunkID, &h.ContentDigest, &h.Score, &h.RetrievedAt, &h.Text)
			h.RetrievedAt = h.RetrievedAt.UTC()
			return h, err
		})
		s.Hits = append(s.Hits, hits...)
		return err
	})
	if err != nil {
		return retrieval.Snapshot{}, fmt.Errorf("read snapshot %s: %w", snapshotID, err)
	}
	return s, nil
}

// PurgeSnapshots implements retrieval.Store, retrieval.PurgeBatch
// snapshots per transaction: a backlog goes in steps each well within
// statement_timeout.
func (r Retrieval) PurgeSnapshots(ctx context.Context, tenantID string, before time.Time) (int, error) {
	n, err := retrieval.InBatches(func() (int, error) { return r.purgeSnapshotBatch(ctx, tenantID, before) })
	if err != nil {
		return n, fmt.Errorf("purge snapshots: %w", err)
	}
	return n, nil
}

// purgeSnapshotBatch deletes up to retrieval.PurgeBatch of the oldest snapshots past
// before ("" tenant: every tenant's), their hits, and the texts of those
// hits no other snapshot names. Rows another instance's pass holds are
// skipped, not waited for.
func (r Retrieval) purgeSnapshotBatch(ctx context.Context, tenantID string, before time.Time) (int, error) {
	pick := `SELECT tenant_id, snapshot_id FROM retrieval_snapshots WHERE created_at < $1
		ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED`
	args := []any{before, retrieval.PurgeBatch}
	if tenantID != "" {
		pick = `SELECT tenant_id, snapshot_id FROM retrieval_snapshots WHERE tenant_id = $3 AND created_at < $1
			ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED`
		args = append(args, tenantID)
	}
	n := 0
	err := pgx.BeginTxFunc(ctx, r.db.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		// Each step's rows come back as two arrays, (tenant, id) by position.
		var tenants, ids, dTenants, digests []string
		if err := tx.QueryRow(ctx, `SELECT array_agg(tenant_id), array_agg(snapshot_id) FROM (`+pick+`) p`, args...).Scan(&tenants, &ids); err != nil {
			return err
		}
		if n = len(ids); n == 0 {
			return nil
		}
		if err := tx.QueryRow(ctx, `WITH d AS (DELETE FROM retrieval_snapshot_hits h USING unnest($1::text[], $2::text[]) AS g(t, id)
				WHERE h.tenant_id = g.t AND h.snapshot_id = g.id RETURNING h.tenant_id, h.content_digest)
			SELECT array_agg(tenant_id), array_agg(content_digest) FROM d`, tenants, ids).Scan(&dTenants, &digests); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM retrieval_snapshots s USING unnest($1::text[], $2::text[]) AS g(t, id)
			WHERE s.tenant_id = g.t AND s.snapshot_id = g.id`, tenants, ids); err != nil {
			return err
		}
		if len(digests) == 0 {
			return nil
		}
		// A snapshot being written now may reuse a text (its insert does
		// nothing on conflict, so it locks no row) with a hit this statement
		// cannot see yet: wait for writers to finish, and hold new ones back
		// for this one statement, so that no text a snapshot names goes.
		if _, err := tx.Exec(ctx, `LOCK TABLE retrieval_texts IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM retrieval_texts t USING (SELECT DISTINCT * FROM unnest($1::text[], $2::text[])) AS g(t, d)
			WHERE t.tenant_id = g.t AND t.digest = g.d
			  AND NOT EXISTS (SELECT 1 FROM retrieval_snapshot_hits h WHERE h.tenant_id = t.tenant_id AND h.content_digest = t.digest)`,
			dTenants, digests)
		return err
	})
	return n, err
}

// ProjectionRows implements retrieval.Store.
func (r Retrieval) ProjectionRows(ctx context.Context, tenantID, documentID string) (int, error) {
	var n int
	err := r.db.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM retrieval_chunks WHERE tenant_id = $1 AND document_id = $2) +
		(SELECT count(*) FROM retrieval_vectors WHERE tenant_id = $1 AND document_id = $2)`, tenantID, documentID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count projection rows: %w", err)
	}
	return n, nil
}
