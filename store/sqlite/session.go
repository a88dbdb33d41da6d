package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/mementohq/memento/store/internal/sweeper"

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

// sweepBatch bounds one delete, so the single writer is never held long.
const sweepBatch = 500

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
// the embedded database. It owns a sweeper goroutine that reclaims expired
// rows; Close stops it (the DB itself is closed by its owner).
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

// Sweep deletes every expired session with its messages and every expired
// vault value, in short batches, and returns how many of each it deleted.
func (s *SessionStore) Sweep(ctx context.Context) (sessions, vault int, err error) {
	for {
		var n int
		err := s.db.writeTx(ctx, func(tx *sql.Tx) error {
			now := s.db.nowMicros()
			keys, err := queryKeys(ctx, tx, `SELECT tenant_id, session_id FROM sessions WHERE expires_at <= ? LIMIT ?`, now, sweepBatch)
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := deleteSession(ctx, tx, k.tenant, k.id); err != nil {
					return err
				}
			}
			n = len(keys)
			return nil
		})
		if err != nil {
			return sessions, vault, fmt.Errorf("sweep expired sessions: %w", err)
		}
		sessions += n
		if n < sweepBatch {
			break
		}
	}
	for {
		var n int64
		err := s.db.writeTx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM pii_vault WHERE (tenant_id, ref_id) IN
				(SELECT tenant_id, ref_id FROM pii_vault WHERE expires_at <= ? LIMIT ?)`, s.db.nowMicros(), sweepBatch)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return sessions, vault, fmt.Errorf("sweep expired vault values: %w", err)
		}
		vault += int(n)
		if n < sweepBatch {
			break
		}
	}
	return sessions, vault, nil
}

func deleteSession(ctx context.Context, tx *sql.Tx, tenantID, sessionID string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM session_messages WHERE tenant_id = ? AND session_id = ?`, tenantID, sessionID); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE tenant_id = ? AND session_id = ?`, tenantID, sessionID)
	return err
}

const sessionColumns = `tenant_id, session_id, user_id, app, state, revision, summary,
	message_count, last_seq, ttl_ms, created_at, last_activity_at, expires_at`

func scanSession(sc rowScanner) (session.Session, error) {
	var (
		s                          session.Session
		state                      []byte
		summary                    sql.NullString
		ttlMS, created, act, expir int64
	)
	err := sc.Scan(&s.TenantID, &s.SessionID, &s.UserID, &s.App, &state, &s.Revision, &summary,
		&s.MessageCount, &s.LastSeq, &ttlMS, &created, &act, &expir)
	if err != nil {
		return session.Session{}, err
	}
	s.State = json.RawMessage(state)
	if summary.Valid {
		var sum session.Summary
		if err := json.Unmarshal([]byte(summary.String), &sum); err != nil {
			return session.Session{}, fmt.Errorf("decode summary: %w", err)
		}
		s.Summary = &sum
	}
	s.TTL = time.Duration(ttlMS) * time.Millisecond
	s.CreatedAt = fromMicros(created)
	s.LastActivityAt = fromMicros(act)
	s.ExpiresAt = fromMicros(expir)
	return s, nil
}

// liveSession reads the session if it is live and the user's.
func liveSession(ctx context.Context, q querier, tenantID, sessionID, userID string, now int64) (session.Session, error) {
	s, err := scanSession(q.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE tenant_id = ? AND session_id = ? AND user_id = ? AND expires_at > ?`, tenantID, sessionID, userID, now))
	if errors.Is(err, sql.ErrNoRows) {
		return session.Session{}, session.ErrNotFound
	}
	return s, err
}

// Put implements session.Store.
func (s *SessionStore) Put(ctx context.Context, p session.PutParams) (session.Session, bool, error) {
	var (
		out     session.Session
		created bool
	)
	err := s.db.writeTx(ctx, func(tx *sql.Tx) error {
		now := s.db.nowMicros()
		expires := now + p.TTL.Microseconds()
		var (
			user     string
			rev, exp int64
		)
		err := tx.QueryRowContext(ctx, `SELECT user_id, revision, expires_at FROM sessions WHERE tenant_id = ? AND session_id = ?`,
			p.TenantID, p.SessionID).Scan(&user, &rev, &exp)
		live := err == nil && exp > now
		switch {
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		case live && user != p.UserID:
			return session.ErrNotFound
		case live && p.ExpectedRevision > 0 && rev != p.ExpectedRevision:
			return fmt.Errorf("revision is %d: %w", rev, session.ErrPreconditionFailed)
		case !live && p.ExpectedRevision > 0:
			return session.ErrPreconditionFailed
		case live:
			_, err = tx.ExecContext(ctx, `UPDATE sessions SET app = ?, state = ?, revision = revision + 1, ttl_ms = ?,
				last_activity_at = ?, expires_at = ? WHERE tenant_id = ? AND session_id = ?`,
				p.App, string(p.State), p.TTL.Milliseconds(), now, expires, p.TenantID, p.SessionID)
		default:
			if err == nil { // expired, not yet swept: it is gone, start afresh
				if err := deleteSession(ctx, tx, p.TenantID, p.SessionID); err != nil {
					return err
				}
			}
			created = true
			_, err = tx.ExecContext(ctx, `INSERT INTO sessions (tenant_id, session_id, user_id, app, state, revision,
				ttl_ms, created_at, last_activity_at, expires_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?)`,
				p.TenantID, p.SessionID, p.UserID, p.App, string(p.State), p.TTL.Milliseconds(), now, now, expires)
		}
		if err != nil {
			return err
		}
		out, err = liveSession(ctx, tx, p.TenantID, p.SessionID, p.UserID, now)
		return err
	})
	if err != nil {
		return session.Session{}, false, fmt.Errorf("put session %s: %w", p.SessionID, err)
	}
	return out, created, nil
}

// Get implements session.Store.
func (s *SessionStore) Get(ctx context.Context, tenantID, sessionID, userID string) (session.Session, error) {
	out, err := liveSession(ctx, s.db.r, tenantID, sessionID, userID, s.db.nowMicros())
	if err != nil {
		return session.Session{}, fmt.Errorf("get session %s: %w", sessionID, err)
	}
	return out, nil
}

// touch moves the expiry of a live session of the user, within a write
// transaction, and returns the session as it was before.
func (s *SessionStore) touch(ctx context.Context, tx *sql.Tx, tenantID, sessionID, userID string, now int64) (session.Session, error) {
	cur, err := liveSession(ctx, tx, tenantID, sessionID, userID, now)
	if err != nil {
		return session.Session{}, err
	}
	_, err = tx.ExecContext(ctx, `UPDATE sessions SET last_activity_at = ?, expires_at = ? + ttl_ms * 1000
		WHERE tenant_id = ? AND session_id = ?`, now, now, tenantID, sessionID)
	return cur, err
}

// SetState implements session.Store.
func (s *SessionStore) SetState(ctx context.Context, tenantID, sessionID, userID string, expectedRevision int64, state json.RawMessage) (session.Session, error) {
	var out session.Session
	err := s.db.writeTx(ctx, func(tx *sql.Tx) error {
		now := s.db.nowMicros()
		cur, err := liveSession(ctx, tx, tenantID, sessionID, userID, now)
		if err != nil {
			return err
		}
		if cur.Revision != expectedRevision {
			return fmt.Errorf("revision is %d: %w", cur.Revision, session.ErrPreconditionFailed)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET state = ?, revision = revision + 1, last_activity_at = ?,
			expires_at = ? + ttl_ms * 1000 WHERE tenant_id = ? AND session_id = ? AND revision = ?`,
			string(state), now, now, tenantID, sessionID, expectedRevision); err != nil {
			return err
		}
		out, err = liveSession(ctx, tx, tenantID, sessionID, userID, now)
		return err
	})
	if err != nil {
		return session.Session{}, fmt.Errorf("set state of session %s: %w", sessionID, err)
	}
	return out, nil
}

// Append implements session.Store.
func (s *SessionStore) Append(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int) (session.AppendResult, error) {
	res, _, err := s.appendKeyed(ctx, tenantID, sessionID, userID, msgs, maxMessages, nil)
	return res, err
}

// AppendKeyed implements session.Store: the key list is read and written
// in the append's write transaction.
func (s *SessionStore) AppendKeyed(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int, k session.AppendKey) (session.AppendResult, *session.AppendReplay, error) {
	return s.appendKeyed(ctx, tenantID, sessionID, userID, msgs, maxMessages, &k)
}

func (s *SessionStore) appendKeyed(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int, k *session.AppendKey) (session.AppendResult, *session.AppendReplay, error) {
	var (
		res    session.AppendResult
		replay *session.AppendReplay
	)
	err := s.db.writeTx(ctx, func(tx *sql.Tx) error {
		now := s.db.nowMicros()
		cur, err := liveSession(ctx, tx, tenantID, sessionID, userID, now)
		if err != nil {
			return err
		}
		var (
			lastAt  int64
			keysRaw sql.NullString
		)
		if err := tx.QueryRowContext(ctx, `SELECT last_message_at, append_keys FROM sessions WHERE tenant_id = ? AND session_id = ?`,
			tenantID, sessionID).Scan(&lastAt, &keysRaw); err != nil {
			return err
		}
		if k != nil {
			ks, err := session.DecodeAppendKeys([]byte(keysRaw.String))
			if err != nil {
				return err
			}
			if ks, replay, err = ks.Use(*k, cur.LastSeq+1, len(msgs)); replay != nil || err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET append_keys = ? WHERE tenant_id = ? AND session_id = ?`,
				string(ks.Encode()), tenantID, sessionID); err != nil {
				return err
			}
		}
		// Times strictly increase within a session even if the clock steps
		// back, so "since" never skips or repeats a message.
		t0 := max(now, lastAt+1)
		res.Messages = make([]session.Message, len(msgs))
		for i, m := range msgs {
			msg := session.Message{
				Seq: cur.LastSeq + int64(i) + 1, Role: m.Role, Content: m.Content,
				Metadata: m.Metadata, CreatedAt: fromMicros(t0 + int64(i)),
			}
			var meta sql.NullString
			if len(m.Metadata) > 0 {
				meta = sql.NullString{String: string(m.Metadata), Valid: true}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO session_messages (tenant_id, session_id, seq, role, content, metadata, created_at)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, tenantID, sessionID, msg.Seq, msg.Role, msg.Content, meta, t0+int64(i)); err != nil {
				return err
			}
			res.Messages[i] = msg
		}
		lastSeq := cur.LastSeq + int64(len(msgs))
		count := cur.MessageCount + len(msgs)
		if count > maxMessages {
			res.Trimmed = count - maxMessages
			count = maxMessages
			if _, err := tx.ExecContext(ctx, `DELETE FROM session_messages WHERE tenant_id = ? AND session_id = ? AND seq <= ?`,
				tenantID, sessionID, lastSeq-int64(maxMessages)); err != nil {
				return err
			}
		}
		expires := now + cur.TTL.Microseconds()
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET message_count = ?, last_seq = ?, last_message_at = ?,
			last_activity_at = ?, expires_at = ? WHERE tenant_id = ? AND session_id = ?`,
			count, lastSeq, t0+int64(len(msgs))-1, now, expires, tenantID, sessionID); err != nil {
			return err
		}
		res.MessageCount = count
		res.ExpiresAt = fromMicros(expires)
		return nil
	})
	if err != nil {
		return session.AppendResult{}, nil, fmt.Errorf("append to session %s: %w", sessionID, err)
	}
	return res, replay, nil
}

// Messages implements session.Store. The session check and the message read
// share one read transaction, so they see one snapshot.
func (s *SessionStore) Messages(ctx context.Context, tenantID, sessionID, userID string, q session.MessageQuery) ([]session.Message, error) {
	tx, err := s.db.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list messages of session %s: begin: %w", sessionID, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	if _, err := liveSession(ctx, tx, tenantID, sessionID, userID, s.db.nowMicros()); err != nil {
		return nil, fmt.Errorf("list messages of session %s: %w", sessionID, err)
	}
	var since int64
	if !q.Since.IsZero() {
		since = q.Since.UnixMicro()
	}
	before := int64(math.MaxInt64)
	if q.BeforeSeq > 0 {
		before = q.BeforeSeq
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, role, content, metadata, created_at FROM session_messages
		WHERE tenant_id = ? AND session_id = ? AND seq > ? AND seq < ? AND created_at > ?
		ORDER BY seq DESC LIMIT ?`, tenantID, sessionID, q.AfterSeq, before, since, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list messages of session %s: %w", sessionID, err)
	}
	defer rows.Close()
	var out []session.Message
	for rows.Next() {
		var (
			m    session.Message
			meta sql.NullString
			at   int64
		)
		if err := rows.Scan(&m.Seq, &m.Role, &m.Content, &meta, &at); err != nil {
			return nil, fmt.Errorf("list messages of session %s: %w", sessionID, err)
		}
		if meta.Valid {
			m.Metadata = json.RawMessage(meta.String)
		}
		m.CreatedAt = fromMicros(at)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list messages of session %s: %w", sessionID, err)
	}
	// Newest first from the index; callers get them oldest first.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// SetSummary implements session.Store.
func (s *SessionStore) SetSummary(ctx context.Context, tenantID, sessionID, userID string, sum session.Summary) (session.Session, error) {
	var out session.Session
	err := s.db.writeTx(ctx, func(tx *sql.Tx) error {
		now := s.db.nowMicros()
		if _, err := s.touch(ctx, tx, tenantID, sessionID, userID, now); err != nil {
			return err
		}
		sum.UpdatedAt = fromMicros(now)
		b, err := json.Marshal(sum)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET summary = ? WHERE tenant_id = ? AND session_id = ?`,
			string(b), tenantID, sessionID); err != nil {
			return err
		}
		out, err = liveSession(ctx, tx, tenantID, sessionID, userID, now)
		return err
	})
	if err != nil {
		return session.Session{}, fmt.Errorf("set summary of session %s: %w", sessionID, err)
	}
	return out, nil
}

// Delete implements session.Store.
func (s *SessionStore) Delete(ctx context.Context, tenantID, sessionID, userID string) (session.Session, error) {
	var out session.Session
	err := s.db.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		if out, err = liveSession(ctx, tx, tenantID, sessionID, userID, s.db.nowMicros()); err != nil {
			return err
		}
		return deleteSession(ctx, tx, tenantID, sessionID)
	})
	if err != nil {
		return session.Session{}, fmt.Errorf("close session %s: %w", sessionID, err)
	}
	return out, nil
}

// listColumns are what a list item needs: the record, not the state or summary.
const listColumns = `session_id, user_id, app, revision, message_count, last_seq, ttl_ms,
	created_at, last_activity_at, expires_at`

// ListByUser implements session.Store.
func (s *SessionStore) ListByUser(ctx context.Context, tenantID, userID string, q session.ListQuery) ([]session.Session, error) {
	after := ""
	args := []any{tenantID, userID, s.db.nowMicros()}
	if q.AfterSessionID != "" {
		after = ` AND (last_activity_at < ? OR (last_activity_at = ? AND session_id > ?))`
		a := q.AfterActivity.UnixMicro()
		args = append(args, a, a, q.AfterSessionID)
	}
	args = append(args, q.Limit)
	rows, err := s.db.r.QueryContext(ctx, `SELECT `+listColumns+` FROM sessions
		WHERE tenant_id = ? AND user_id = ? AND expires_at > ?`+after+`
		ORDER BY last_activity_at DESC, session_id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions of user: %w", err)
	}
	defer rows.Close()
	var out []session.Session
	for rows.Next() {
		ss := session.Session{TenantID: tenantID}
		var ttlMS, created, act, expir int64
		if err := rows.Scan(&ss.SessionID, &ss.UserID, &ss.App, &ss.Revision, &ss.MessageCount, &ss.LastSeq,
			&ttlMS, &created, &act, &expir); err != nil {
			return nil, fmt.Errorf("list sessions of user: %w", err)
		}
		ss.TTL = time.Duration(ttlMS) * time.Millisecond
		ss.CreatedAt, ss.LastActivityAt, ss.ExpiresAt = fromMicros(created), fromMicros(act), fromMicros(expir)
		out = append(out, ss)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions of user: %w", err)
	}
	return out, nil
}

// PutRecords implements pii.Store.
func (s *SessionStore) PutRecords(ctx context.Context, recs []pii.Record) error {
	return s.db.writeTx(ctx, func(tx *sql.Tx) error {
		for _, r := range recs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO pii_vault (tenant_id, ref_id, kind, sealed, created_at, expires_at)
				VALUES (?, ?, ?, ?, ?, ?)`, r.TenantID, r.ID, string(r.Kind), r.Sealed, r.CreatedAt.UnixMicro(), r.ExpiresAt.UnixMicro()); err != nil {
				return fmt.Errorf("put vault record: %w", err)
			}
		}
		return nil
	})
}

// GetRecord implements pii.Store.
func (s *SessionStore) GetRecord(ctx context.Context, tenantID, id string) (pii.Record, error) {
	r := pii.Record{TenantID: tenantID, ID: id}
	var (
		kind             string
		created, expires int64
	)
	err := s.db.r.QueryRowContext(ctx, `SELECT kind, sealed, created_at, expires_at FROM pii_vault
		WHERE tenant_id = ? AND ref_id = ? AND expires_at > ?`, tenantID, id, s.db.nowMicros()).Scan(&kind, &r.Sealed, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return pii.Record{}, pii.ErrNotFound
	}
	if err != nil {
		return pii.Record{}, fmt.Errorf("get vault record: %w", err)
	}
	r.Kind = pii.Kind(kind)
	r.CreatedAt, r.ExpiresAt = fromMicros(created), fromMicros(expires)
	return r, nil
}

// DeleteRecord implements pii.Store.
func (s *SessionStore) DeleteRecord(ctx context.Context, tenantID, id string) error {
	return s.db.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM pii_vault WHERE tenant_id = ? AND ref_id = ?`, tenantID, id)
		return err
	})
}
