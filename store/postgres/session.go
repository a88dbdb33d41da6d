package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mementohq/memento/store/internal/sweeper"

	"github.com/jackc/pgx/v5"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/session"
)

var (
	_ session.Store = (*SessionStore)(nil)
	_ pii.Store     = (*SessionStore)(nil)
)

// DefaultSweepInterval is how often expired sessions and vault values are
// deleted unless configured. Reads never depend on it: an expired row is
// invisible before it is swept.
const DefaultSweepInterval = time.Minute

// sweepBatch bounds one delete: a session brings at most its capped
// messages along, so a batch is bounded in rows and lock time.
// maxSweepBatches bounds one pass; what is left waits for the next.
const (
	sweepBatch      = 100
	maxSweepBatches = 50
)

// sweepLockKey is the first half of the advisory lock a sweep pass holds;
// the second is a hash of the schema, as for migrations. Only one instance
// sweeps at a time; the others find the lock taken and skip their pass.
const sweepLockKey int32 = 0x53574550 // "SWEP"

// SessionOptions configure a SessionStore.
type SessionOptions struct {
	// SweepInterval between reclaiming passes; 0 means DefaultSweepInterval,
	// a negative value disables the background sweeper (call Sweep yourself).
	SweepInterval time.Duration
	// OnSweepError is told about a failed background pass; nil ignores it
	// (the next pass retries).
	OnSweepError func(error)
}

// SessionStore keeps sessions, their messages and the personal-data vault in
// PostgreSQL, so every instance on one database sees the same sessions. It
// owns a sweeper goroutine that reclaims expired rows; Close stops it (the
// DB itself is closed by its owner).
type SessionStore struct {
	db      *DB
	sweeper *sweeper.Sweeper
}

// NewSessionStore returns the session store of db and starts its sweeper.
func NewSessionStore(db *DB, o SessionOptions) *SessionStore {
	s := &SessionStore{db: db}
	if o.SweepInterval == 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	s.sweeper = sweeper.Start(o.SweepInterval, func(ctx context.Context) error {
		_, _, err := s.Sweep(ctx)
		return err
	}, o.OnSweepError)
	return s
}

// Close stops the sweeper and waits for it. It does not close the DB.
func (s *SessionStore) Close() error {
	s.sweeper.Close()
	return nil
}

// Sweep deletes expired sessions with their messages and expired vault
// values, in at most maxSweepBatches batches of sweepBatch each, and
// returns how many of each it deleted.
// Each batch is its own transaction under a try-advisory lock: an instance
// that finds another sweeping stops its pass (skipped=true) instead of
// queueing behind it.
func (s *SessionStore) Sweep(ctx context.Context) (sessions, vault int, err error) {
	sweepOne := func(q string) (n int, skipped bool, err error) {
		err = pgx.BeginTxFunc(ctx, s.db.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			var got bool
			if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '')))`, sweepLockKey).Scan(&got); err != nil {
				return err
			}
			if !got {
				skipped = true
				return nil
			}
			return tx.QueryRow(ctx, q, sweepBatch).Scan(&n)
		})
		return n, skipped, err
	}
	for range maxSweepBatches {
		n, skipped, err := sweepOne(`WITH gone AS (
				DELETE FROM sessions WHERE (tenant_id, session_id) IN (
					SELECT tenant_id, session_id FROM sessions WHERE expires_at <= now()
					ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
				RETURNING tenant_id, session_id),
			msgs AS (
				DELETE FROM session_messages m USING gone
				WHERE m.tenant_id = gone.tenant_id AND m.session_id = gone.session_id)
			SELECT count(*) FROM gone`)
		if err != nil {
			return sessions, vault, fmt.Errorf("sweep expired sessions: %w", err)
		}
		sessions += n
		if skipped {
			return sessions, vault, nil
		}
		if n < sweepBatch {
			break
		}
	}
	for range maxSweepBatches {
		n, skipped, err := sweepOne(`WITH gone AS (
				DELETE FROM pii_vault WHERE (tenant_id, ref_id) IN (
					SELECT tenant_id, ref_id FROM pii_vault WHERE expires_at <= now()
					ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
				RETURNING 1)
			SELECT count(*) FROM gone`)
		if err != nil {
			return sessions, vault, fmt.Errorf("sweep expired vault values: %w", err)
		}
		vault += n
		if skipped || n < sweepBatch {
			break
		}
	}
	return sessions, vault, nil
}

const sessionColumns = `tenant_id, session_id, user_id, app, state, revision, summary, summary_at,
	message_count, last_seq, ttl_ms, created_at, last_activity_at, expires_at`

// liveWhere selects the live session ($1 tenant, $2 session) of user $3.
const liveWhere = `tenant_id = $1 AND session_id = $2 AND user_id = $3 AND expires_at > now()`

func scanSession(row pgx.Row) (session.Session, error) {
	var (
		s         session.Session
		state     string
		summary   *string
		summaryAt *time.Time
		ttlMS     int64
	)
	err := row.Scan(&s.TenantID, &s.SessionID, &s.UserID, &s.App, &state, &s.Revision, &summary, &summaryAt,
		&s.MessageCount, &s.LastSeq, &ttlMS, &s.CreatedAt, &s.LastActivityAt, &s.ExpiresAt)
	if err != nil {
		return session.Session{}, err
	}
	s.State = json.RawMessage(state)
	if summary != nil {
		var sum session.Summary
		if err := json.Unmarshal([]byte(*summary), &sum); err != nil {
			return session.Session{}, fmt.Errorf("decode summary: %w", err)
		}
		if summaryAt != nil {
			sum.UpdatedAt = summaryAt.UTC()
		}
		s.Summary = &sum
	}
	s.TTL = time.Duration(ttlMS) * time.Millisecond
	s.CreatedAt, s.LastActivityAt, s.ExpiresAt = s.CreatedAt.UTC(), s.LastActivityAt.UTC(), s.ExpiresAt.UTC()
	return s, nil
}

// notFound maps "no row" to session.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return session.ErrNotFound
	}
	return err
}

// errCreateRace is a creation that lost to a concurrent one: Put retries.
var errCreateRace = errors.New("session created concurrently")

// Put implements session.Store.
func (s *SessionStore) Put(ctx context.Context, p session.PutParams) (session.Session, bool, error) {
	for attempt := 0; ; attempt++ {
		out, created, err := s.put(ctx, p)
		if errors.Is(err, errCreateRace) && attempt < 3 {
			continue
		}
		if err != nil {
			return session.Session{}, false, fmt.Errorf("put session %s: %w", p.SessionID, err)
		}
		return out, created, nil
	}
}

func (s *SessionStore) put(ctx context.Context, p session.PutParams) (out session.Session, created bool, err error) {
	err = pgx.BeginTxFunc(ctx, s.db.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var (
			user string
			rev  int64
			live bool
		)
		err := tx.QueryRow(ctx, `SELECT user_id, revision, expires_at > now() FROM sessions
			WHERE tenant_id = $1 AND session_id = $2 FOR UPDATE`, p.TenantID, p.SessionID).Scan(&user, &rev, &live)
		exists := err == nil
		switch {
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return err
		case live && user != p.UserID:
			return session.ErrNotFound
		case live && p.ExpectedRevision > 0 && rev != p.ExpectedRevision:
			return fmt.Errorf("revision is %d: %w", rev, session.ErrPreconditionFailed)
		case !live && p.ExpectedRevision > 0:
			return session.ErrPreconditionFailed
		case live:
			out, err = scanSession(tx.QueryRow(ctx, `UPDATE sessions SET app = $3, state = $4, revision = revision + 1,
				ttl_ms = $5, last_activity_at = now(), expires_at = now() + $5::bigint * interval '1 millisecond'
				WHERE tenant_id = $1 AND session_id = $2 RETURNING `+sessionColumns,
				p.TenantID, p.SessionID, p.App, string(p.State), p.TTL.Milliseconds()))
			return err
		case exists: // expired, not yet swept: it is gone, start afresh
			created = true
			if _, err := tx.Exec(ctx, `DELETE FROM session_messages WHERE tenant_id = $1 AND session_id = $2`, p.TenantID, p.SessionID); err != nil {
				return err
			}
			out, err = scanSession(tx.QueryRow(ctx, `UPDATE sessions SET user_id = $3, app = $4, state = $5, revision = 1,
				summary = NULL, summary_at = NULL, message_count = 0, last_seq = 0, last_message_at = NULL, append_keys = NULL, ttl_ms = $6,
				created_at = now(), last_activity_at = now(), expires_at = now() + $6::bigint * interval '1 millisecond'
				WHERE tenant_id = $1 AND session_id = $2 RETURNING `+sessionColumns,
				p.TenantID, p.SessionID, p.UserID, p.App, string(p.State), p.TTL.Milliseconds()))
			return err
		default:
			created = true
			// Messages no session holds (left behind by a close that raced
			// an append before closes took the row lock) are not the new
			// session's.
			if _, err := tx.Exec(ctx, `DELETE FROM session_messages WHERE tenant_id = $1 AND session_id = $2`, p.TenantID, p.SessionID); err != nil {
				return err
			}
			out, err = scanSession(tx.QueryRow(ctx, `INSERT INTO sessions (tenant_id, session_id, user_id, app, state, revision,
				ttl_ms, created_at, last_activity_at, expires_at)
				VALUES ($1, $2, $3, $4, $5, 1, $6, now(), now(), now() + $6::bigint * interval '1 millisecond')
				ON CONFLICT (tenant_id, session_id) DO NOTHING RETURNING `+sessionColumns,
				p.TenantID, p.SessionID, p.UserID, p.App, string(p.State), p.TTL.Milliseconds()))
			if errors.Is(err, pgx.ErrNoRows) {
				return errCreateRace
			}
			return err
		}
	})
	return out, created, err
}

// Get implements session.Store.
func (s *SessionStore) Get(ctx context.Context, tenantID, sessionID, userID string) (session.Session, error) {
	out, err := scanSession(s.db.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE `+liveWhere,
		tenantID, sessionID, userID))
	if err != nil {
		return session.Session{}, fmt.Errorf("get session %s: %w", sessionID, notFound(err))
	}
	return out, nil
}

// SetState implements session.Store: one conditional UPDATE; only when it
// matches nothing does a read tell a missing session from a stale revision.
func (s *SessionStore) SetState(ctx context.Context, tenantID, sessionID, userID string, expectedRevision int64, state json.RawMessage) (session.Session, error) {
	out, err := scanSession(s.db.pool.QueryRow(ctx, `UPDATE sessions SET state = $5, revision = revision + 1,
		last_activity_at = now(), expires_at = now() + ttl_ms * interval '1 millisecond'
		WHERE `+liveWhere+` AND revision = $4 RETURNING `+sessionColumns,
		tenantID, sessionID, userID, expectedRevision, string(state)))
	if errors.Is(err, pgx.ErrNoRows) {
		var rev int64
		err = s.db.pool.QueryRow(ctx, `SELECT revision FROM sessions WHERE `+liveWhere, tenantID, sessionID, userID).Scan(&rev)
		if err == nil {
			err = fmt.Errorf("revision is %d: %w", rev, session.ErrPreconditionFailed)
		}
		err = notFound(err)
	}
	if err != nil {
		return session.Session{}, fmt.Errorf("set state of session %s: %w", sessionID, err)
	}
	return out, nil
}

// Append implements session.Store: the row lock serializes appends to one
// session; the insert, the trim of the oldest beyond the cap and the
// record update commit together.
func (s *SessionStore) Append(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int) (session.AppendResult, error) {
	res, _, err := s.appendKeyed(ctx, tenantID, sessionID, userID, msgs, maxMessages, nil)
	return res, err
}

// AppendKeyed implements session.Store: the key list is read and written
// under the same row lock as the append.
func (s *SessionStore) AppendKeyed(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int, k session.AppendKey) (session.AppendResult, *session.AppendReplay, error) {
	return s.appendKeyed(ctx, tenantID, sessionID, userID, msgs, maxMessages, &k)
}

func (s *SessionStore) appendKeyed(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int, k *session.AppendKey) (session.AppendResult, *session.AppendReplay, error) {
	var (
		res    session.AppendResult
		replay *session.AppendReplay
	)
	err := pgx.BeginTxFunc(ctx, s.db.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var (
			lastSeq int64
			count   int
			lastAt  *time.Time
			now     time.Time
			keysRaw *string
		)
		keysCol := "NULL::text"
		if k != nil {
			keysCol = "append_keys"
		}
		err := tx.QueryRow(ctx, `SELECT last_seq, message_count, last_message_at, now(), `+keysCol+` FROM sessions
			WHERE `+liveWhere+` FOR UPDATE`, tenantID, sessionID, userID).Scan(&lastSeq, &count, &lastAt, &now, &keysRaw)
		if err != nil {
			return notFound(err)
		}
		var keys any // the new key list, NULL to leave it as it is
		if k != nil {
			var raw []byte
			if keysRaw != nil {
				raw = []byte(*keysRaw)
			}
			ks, err := session.DecodeAppendKeys(raw)
			if err != nil {
				return err
			}
			if ks, replay, err = ks.Use(*k, lastSeq+1, len(msgs)); replay != nil || err != nil {
				return err
			}
			keys = string(ks.Encode())
		}
		// Times strictly increase within a session even if the clock steps
		// back, so "since" never skips or repeats a message.
		t0 := now
		if lastAt != nil && !t0.After(*lastAt) {
			t0 = lastAt.Add(time.Microsecond)
		}
		n := len(msgs)
		seqs, roles, contents := make([]int64, n), make([]string, n), make([]string, n)
		metas, times := make([]*string, n), make([]time.Time, n)
		res.Messages = make([]session.Message, n)
		for i, m := range msgs {
			at := t0.Add(time.Duration(i) * time.Microsecond).UTC()
			seqs[i], roles[i], contents[i], times[i] = lastSeq+int64(i)+1, m.Role, m.Content, at
			if len(m.Metadata) > 0 {
				meta := string(m.Metadata)
				metas[i] = &meta
			}
			res.Messages[i] = session.Message{Seq: seqs[i], Role: m.Role, Content: m.Content, Metadata: m.Metadata, CreatedAt: at}
		}
		lastSeq += int64(n)
		count += n
		if count > maxMessages {
			res.Trimmed, count = count-maxMessages, maxMessages
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO session_messages (tenant_id, session_id, seq, role, content, metadata, created_at)
			SELECT $1, $2, * FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::timestamptz[])`,
			tenantID, sessionID, seqs, roles, contents, metas, times)
		if res.Trimmed > 0 {
			b.Queue(`DELETE FROM session_messages WHERE tenant_id = $1 AND session_id = $2 AND seq <= $3`,
				tenantID, sessionID, lastSeq-int64(maxMessages))
		}
		b.Queue(`UPDATE sessions SET message_count = $3, last_seq = $4, last_message_at = $5,
			last_activity_at = now(), expires_at = now() + ttl_ms * interval '1 millisecond',
			append_keys = coalesce($6::text, append_keys)
			WHERE tenant_id = $1 AND session_id = $2 RETURNING expires_at`,
			tenantID, sessionID, count, lastSeq, times[n-1], keys)
		br := tx.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
		if res.Trimmed > 0 {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
		}
		if err := br.QueryRow().Scan(&res.ExpiresAt); err != nil {
			br.Close()
			return err
		}
		res.ExpiresAt = res.ExpiresAt.UTC()
		res.MessageCount = count
		return br.Close()
	})
	if err != nil {
		return session.AppendResult{}, nil, fmt.Errorf("append to session %s: %w", sessionID, err)
	}
	return res, replay, nil
}

// Messages implements session.Store: one statement (one snapshot) checks
// the session and reads its messages; a live session without matching
// messages yields one row of NULLs.
func (s *SessionStore) Messages(ctx context.Context, tenantID, sessionID, userID string, q session.MessageQuery) ([]session.Message, error) {
	since := time.Unix(0, 0)
	if !q.Since.IsZero() {
		since = q.Since
	}
	before := int64(1<<63 - 1)
	if q.BeforeSeq > 0 {
		before = q.BeforeSeq
	}
	rows, err := s.db.pool.Query(ctx, `SELECT m.seq, m.role, m.content, m.metadata, m.created_at
		FROM sessions s LEFT JOIN LATERAL (
			SELECT seq, role, content, metadata, created_at FROM session_messages
			WHERE tenant_id = s.tenant_id AND session_id = s.session_id
			  AND seq > $4 AND seq < $5 AND created_at > $6
			ORDER BY seq DESC LIMIT $7) m ON true
		WHERE s.tenant_id = $1 AND s.session_id = $2 AND s.user_id = $3 AND s.expires_at > now()`,
		tenantID, sessionID, userID, q.AfterSeq, before, since, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list messages of session %s: %w", sessionID, err)
	}
	defer rows.Close()
	var (
		out  []session.Message
		live bool
	)
	for rows.Next() {
		live = true
		var (
			seq     *int64
			role    *string
			content *string
			meta    *string
			at      *time.Time
		)
		if err := rows.Scan(&seq, &role, &content, &meta, &at); err != nil {
			return nil, fmt.Errorf("list messages of session %s: %w", sessionID, err)
		}
		if seq == nil {
			continue
		}
		m := session.Message{Seq: *seq, Role: *role, Content: *content, CreatedAt: at.UTC()}
		if meta != nil {
			m.Metadata = json.RawMessage(*meta)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list messages of session %s: %w", sessionID, err)
	}
	if !live {
		return nil, fmt.Errorf("list messages of session %s: %w", sessionID, session.ErrNotFound)
	}
	// Newest first from the query; callers get them oldest first.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// SetSummary implements session.Store.
func (s *SessionStore) SetSummary(ctx context.Context, tenantID, sessionID, userID string, sum session.Summary) (session.Session, error) {
	b, err := json.Marshal(struct {
		Text       string          `json:"text"`
		Data       json.RawMessage `json:"data,omitempty"`
		ThroughSeq int64           `json:"through_seq"`
	}{sum.Text, sum.Data, sum.ThroughSeq})
	if err != nil {
		return session.Session{}, fmt.Errorf("set summary of session %s: encode: %w", sessionID, err)
	}
	out, err := scanSession(s.db.pool.QueryRow(ctx, `UPDATE sessions SET summary = $4, summary_at = now(),
		last_activity_at = now(), expires_at = now() + ttl_ms * interval '1 millisecond'
		WHERE `+liveWhere+` RETURNING `+sessionColumns, tenantID, sessionID, userID, string(b)))
	if err != nil {
		return session.Session{}, fmt.Errorf("set summary of session %s: %w", sessionID, notFound(err))
	}
	return out, nil
}

// Delete implements session.Store: the session's row lock first, so that
// an append in flight commits before (its messages are then seen and
// deleted) or finds no session after; then the messages and the session,
// in one transaction. One statement would delete the messages of its own
// snapshot only, and leave an append's that committed while it waited for
// the lock to a session created again under the id.
func (s *SessionStore) Delete(ctx context.Context, tenantID, sessionID, userID string) (session.Session, error) {
	var out session.Session
	err := pgx.BeginTxFunc(ctx, s.db.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM sessions WHERE `+liveWhere+` FOR UPDATE`, tenantID, sessionID, userID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM session_messages WHERE tenant_id = $1 AND session_id = $2
			AND EXISTS (SELECT 1 FROM sessions WHERE `+liveWhere+`)`, tenantID, sessionID, userID); err != nil {
			return err
		}
		var err error
		out, err = scanSession(tx.QueryRow(ctx, `DELETE FROM sessions WHERE `+liveWhere+` RETURNING `+sessionColumns,
			tenantID, sessionID, userID))
		return err
	})
	if err != nil {
		return session.Session{}, fmt.Errorf("close session %s: %w", sessionID, notFound(err))
	}
	return out, nil
}

// ListByUser implements session.Store, served by the sessions_user index.
func (s *SessionStore) ListByUser(ctx context.Context, tenantID, userID string, q session.ListQuery) ([]session.Session, error) {
	after := ""
	args := []any{tenantID, userID, q.Limit}
	if q.AfterSessionID != "" {
		after = ` AND (last_activity_at < $4 OR (last_activity_at = $4 AND session_id > $5))`
		args = append(args, q.AfterActivity, q.AfterSessionID)
	}
	rows, err := s.db.pool.Query(ctx, `SELECT session_id, app, revision, message_count, last_seq, ttl_ms,
			created_at, last_activity_at, expires_at
		FROM sessions WHERE tenant_id = $1 AND user_id = $2 AND expires_at > now()`+after+`
		ORDER BY last_activity_at DESC, session_id LIMIT $3`, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions of user: %w", err)
	}
	defer rows.Close()
	var out []session.Session
	for rows.Next() {
		ss := session.Session{TenantID: tenantID, UserID: userID}
		var ttlMS int64
		if err := rows.Scan(&ss.SessionID, &ss.App, &ss.Revision, &ss.MessageCount, &ss.LastSeq, &ttlMS,
			&ss.CreatedAt, &ss.LastActivityAt, &ss.ExpiresAt); err != nil {
			return nil, fmt.Errorf("list sessions of user: %w", err)
		}
		ss.TTL = time.Duration(ttlMS) * time.Millisecond
		ss.CreatedAt, ss.LastActivityAt, ss.ExpiresAt = ss.CreatedAt.UTC(), ss.LastActivityAt.UTC(), ss.ExpiresAt.UTC()
		out = append(out, ss)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions of user: %w", err)
	}
	return out, nil
}

// PutRecords implements pii.Store: one multi-row insert.
func (s *SessionStore) PutRecords(ctx context.Context, recs []pii.Record) error {
	if len(recs) == 0 {
		return nil
	}
	tenants, ids, kinds := make([]string, len(recs)), make([]string, len(recs)), make([]string, len(recs))
	sealed, created, expires := make([][]byte, len(recs)), make([]time.Time, len(recs)), make([]time.Time, len(recs))
	for i, r := range recs {
		tenants[i], ids[i], kinds[i], sealed[i], created[i], expires[i] = r.TenantID, r.ID, string(r.Kind), r.Sealed, r.CreatedAt, r.ExpiresAt
	}
	if _, err := s.db.pool.Exec(ctx, `INSERT INTO pii_vault (tenant_id, ref_id, kind, sealed, created_at, expires_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::timestamptz[], $6::timestamptz[])`,
		tenants, ids, kinds, sealed, created, expires); err != nil {
		return fmt.Errorf("put vault records: %w", err)
	}
	return nil
}

// GetRecord implements pii.Store.
func (s *SessionStore) GetRecord(ctx context.Context, tenantID, id string) (pii.Record, error) {
	r := pii.Record{TenantID: tenantID, ID: id}
	var kind string
	err := s.db.pool.QueryRow(ctx, `SELECT kind, sealed, created_at, expires_at FROM pii_vault
		WHERE tenant_id = $1 AND ref_id = $2 AND expires_at > now()`, tenantID, id).Scan(&kind, &r.Sealed, &r.CreatedAt, &r.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return pii.Record{}, pii.ErrNotFound
	}
	if err != nil {
		return pii.Record{}, fmt.Errorf("get vault record: %w", err)
	}
	r.Kind = pii.Kind(kind)
	r.CreatedAt, r.ExpiresAt = r.CreatedAt.UTC(), r.ExpiresAt.UTC()
	return r, nil
}

// DeleteRecord implements pii.Store.
func (s *SessionStore) DeleteRecord(ctx context.Context, tenantID, id string) error {
	if _, err := s.db.pool.Exec(ctx, `DELETE FROM pii_vault WHERE tenant_id = $1 AND ref_id = $2`, tenantID, id); err != nil {
		return fmt.Errorf("delete vault record: %w", err)
	}
	return nil
}
