package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/mementohq/memento/session"
)

// sessionRow is a session as stored. The summary is kept encoded, as the SQL
// backends keep it, so what comes back is what they would give back.
type sessionRow struct {
	s             session.Session // Summary unset; see summary
	summary       []byte
	ttlMS         int64
	expires       int64 // micros
	lastMessageAt int64 // micros
	messages      []session.Message
	appendKeys    session.AppendKeys
}

func (row *sessionRow) live(userID string, now int64) bool {
	return row.s.UserID == userID && row.expires > now
}

// view is the session as a caller sees it.
func (row *sessionRow) view() (session.Session, error) {
	out := row.s
	out.State = cloneJSON(row.s.State)
	out.TTL = time.Duration(row.ttlMS) * time.Millisecond
	out.ExpiresAt = fromMicros(row.expires)
	if row.summary != nil {
		var sum session.Summary
		if err := json.Unmarshal(row.summary, &sum); err != nil {
			return session.Session{}, fmt.Errorf("decode summary: %w", err)
		}
		out.Summary = &sum
	}
	return out, nil
}

func cloneMessage(m session.Message) session.Message {
	m.Metadata = cloneJSON(m.Metadata)
	return m
}

// liveRow returns the session row if it is live and the user's.
func (s *Store) liveRow(tenantID, sessionID, userID string, now int64) (*sessionRow, error) {
	row, ok := s.sessions[key{tenantID, sessionID}]
	if !ok || !row.live(userID, now) {
		return nil, session.ErrNotFound
	}
	return row, nil
}

// touch makes a write activity: the expiry moves to now + TTL.
func (row *sessionRow) touch(now int64) {
	row.s.LastActivityAt = fromMicros(now)
	row.expires = now + row.ttlMS*1000
}

// Put implements session.Store.
func (s *Store) Put(ctx context.Context, p session.PutParams) (session.Session, bool, error) {
	if err := ctx.Err(); err != nil {
		return session.Session{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowMicros()
	k := key{p.TenantID, p.SessionID}
	row, exists := s.sessions[k]
	live := exists && row.expires > now
	created := false
	switch {
	case live && row.s.UserID != p.UserID:
		return session.Session{}, false, session.ErrNotFound
	case live && p.ExpectedRevision > 0 && row.s.Revision != p.ExpectedRevision:
		return session.Session{}, false, fmt.Errorf("revision is %d: %w", row.s.Revision, session.ErrPreconditionFailed)
	case !live && p.ExpectedRevision > 0:
		return session.Session{}, false, session.ErrPreconditionFailed
	case live:
		row.s.App = p.App
		row.s.State = cloneJSON(p.State)
		row.s.Revision++
		row.ttlMS = p.TTL.Milliseconds()
		row.s.LastActivityAt = fromMicros(now)
		row.expires = now + p.TTL.Microseconds()
	default:
		// Absent, or expired and not yet reclaimed: it is gone, start afresh.
		created = true
		row = &sessionRow{
			s: session.Session{
				TenantID: p.TenantID, SessionID: p.SessionID, UserID: p.UserID, App: p.App,
				State: cloneJSON(p.State), Revision: 1,
				CreatedAt: fromMicros(now), LastActivityAt: fromMicros(now),
			},
			ttlMS:   p.TTL.Milliseconds(),
			expires: now + p.TTL.Microseconds(),
		}
		s.sessions[k] = row
	}
	if !row.live(p.UserID, now) {
		return session.Session{}, false, session.ErrNotFound
	}
	out, err := row.view()
	return out, created, err
}

// Get implements session.Store.
func (s *Store) Get(ctx context.Context, tenantID, sessionID, userID string) (session.Session, error) {
	if err := ctx.Err(); err != nil {
		return session.Session{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	row, err := s.liveRow(tenantID, sessionID, userID, s.nowMicros())
	if err != nil {
		return session.Session{}, err
	}
	return row.view()
}

// SetState implements session.Store.
func (s *Store) SetState(ctx context.Context, tenantID, sessionID, userID string, expectedRevision int64, state json.RawMessage) (session.Session, error) {
	if err := ctx.Err(); err != nil {
		return session.Session{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowMicros()
	row, err := s.liveRow(tenantID, sessionID, userID, now)
	if err != nil {
		return session.Session{}, err
	}
	if row.s.Revision != expectedRevision {
		return session.Session{}, fmt.Errorf("revision is %d: %w", row.s.Revision, session.ErrPreconditionFailed)
	}
	row.s.State = cloneJSON(state)
	row.s.Revision++
	row.touch(now)
	if !row.live(userID, now) {
		return session.Session{}, session.ErrNotFound
	}
	return row.view()
}

// Append implements session.Store.
func (s *Store) Append(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int) (session.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return session.AppendResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowMicros()
	row, err := s.liveRow(tenantID, sessionID, userID, now)
	if err != nil {
		return session.AppendResult{}, err
	}
	return row.append(msgs, maxMessages, now), nil
}

// AppendKeyed implements session.Store.
func (s *Store) AppendKeyed(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int, k session.AppendKey) (session.AppendResult, *session.AppendReplay, error) {
	if err := ctx.Err(); err != nil {
		return session.AppendResult{}, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowMicros()
	row, err := s.liveRow(tenantID, sessionID, userID, now)
	if err != nil {
		return session.AppendResult{}, nil, err
	}
	keys, rp, err := row.appendKeys.Use(k, row.s.LastSeq+1, len(msgs))
	if rp != nil || err != nil {
		return session.AppendResult{}, rp, err
	}
	row.appendKeys = keys
	return row.append(msgs, maxMessages, now), nil, nil
}

func (row *sessionRow) append(msgs []session.MessageInput, maxMessages int, now int64) session.AppendResult {
	// Times strictly increase within a session even if the clock steps
	// back, so "since" never skips or repeats a message.
	t0 := max(now, row.lastMessageAt+1)
	var res session.AppendResult
	res.Messages = make([]session.Message, len(msgs))
	for i, m := range msgs {
		msg := session.Message{
			Seq: row.s.LastSeq + int64(i) + 1, Role: m.Role, Content: m.Content,
			CreatedAt: fromMicros(t0 + int64(i)),
		}
		if len(m.Metadata) > 0 {
			msg.Metadata = cloneJSON(m.Metadata)
		}
		row.messages = append(row.messages, msg)
		res.Messages[i] = cloneMessage(msg)
	}
	lastSeq := row.s.LastSeq + int64(len(msgs))
	count := row.s.MessageCount + len(msgs)
	if count > maxMessages {
		res.Trimmed = count - maxMessages
		count = maxMessages
		keepAfter := lastSeq - int64(maxMessages)
		i := 0
		for i < len(row.messages) && row.messages[i].Seq <= keepAfter {
			i++
		}
		row.messages = slices.Clone(row.messages[i:])
	}
	row.s.MessageCount, row.s.LastSeq = count, lastSeq
	row.lastMessageAt = t0 + int64(len(msgs)) - 1
	row.s.LastActivityAt = fromMicros(now)
	row.expires = now + row.ttlMS*1000
	res.MessageCount = count
	res.ExpiresAt = fromMicros(row.expires)
	return res
}

// Messages implements session.Store: the latest q.Limit matching messages,
// oldest first.
func (s *Store) Messages(ctx context.Context, tenantID, sessionID, userID string, q session.MessageQuery) ([]session.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	row, err := s.liveRow(tenantID, sessionID, userID, s.nowMicros())
	if err != nil {
		return nil, err
	}
	var since int64
	if !q.Since.IsZero() {
		since = q.Since.UnixMicro()
	}
	var match []session.Message
	for _, m := range row.messages {
		if m.Seq > q.AfterSeq && (q.BeforeSeq <= 0 || m.Seq < q.BeforeSeq) && m.CreatedAt.UnixMicro() > since {
			match = append(match, m)
		}
	}
	if q.Limit >= 0 && len(match) > q.Limit { // a negative limit is no limit, as in SQLite
		match = match[len(match)-q.Limit:]
	}
	var out []session.Message
	for _, m := range match {
		out = append(out, cloneMessage(m))
	}
	return out, nil
}

// SetSummary implements session.Store.
func (s *Store) SetSummary(ctx context.Context, tenantID, sessionID, userID string, sum session.Summary) (session.Session, error) {
	if err := ctx.Err(); err != nil {
		return session.Session{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowMicros()
	row, err := s.liveRow(tenantID, sessionID, userID, now)
	if err != nil {
		return session.Session{}, err
	}
	sum.UpdatedAt = fromMicros(now)
	b, err := json.Marshal(sum)
	if err != nil {
		return session.Session{}, err
	}
	row.touch(now)
	row.summary = b
	if !row.live(userID, now) {
		return session.Session{}, session.ErrNotFound
	}
	return row.view()
}

// Delete implements session.Store.
func (s *Store) Delete(ctx context.Context, tenantID, sessionID, userID string) (session.Session, error) {
	if err := ctx.Err(); err != nil {
		return session.Session{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	row, err := s.liveRow(tenantID, sessionID, userID, s.nowMicros())
	if err != nil {
		return session.Session{}, err
	}
	out, err := row.view()
	if err != nil {
		return session.Session{}, err
	}
	delete(s.sessions, key{tenantID, sessionID})
	return out, nil
}

// ListByUser implements session.Store: a page of live sessions, most
// recently active first, without state or summary.
func (s *Store) ListByUser(ctx context.Context, tenantID, userID string, q session.ListQuery) ([]session.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowMicros()
	var rows []*sessionRow
	for k, row := range s.sessions {
		if k.tenant != tenantID || !row.live(userID, now) {
			continue
		}
		if q.AfterSessionID != "" {
			at, after := row.s.LastActivityAt.UnixMicro(), q.AfterActivity.UnixMicro()
			if at > after || (at == after && row.s.SessionID <= q.AfterSessionID) {
				continue
			}
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b *sessionRow) int {
		return cmp.Or(b.s.LastActivityAt.Compare(a.s.LastActivityAt), cmp.Compare(a.s.SessionID, b.s.SessionID))
	})
	if q.Limit >= 0 && len(rows) > q.Limit {
		rows = rows[:q.Limit]
	}
	var out []session.Session
	for _, row := range rows {
		// A list item is the record only: no state, no summary.
		v := row.s
		v.State = nil
		v.TTL = time.Duration(row.ttlMS) * time.Millisecond
		v.ExpiresAt = fromMicros(row.expires)
		out = append(out, v)
	}
	return out, nil
}

// Sweep drops expired sessions and vault records, which every read already
// treats as absent; it only bounds memory in a long test.
func (s *Store) Sweep(ctx context.Context) (sessions, vault int, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowMicros()
	for k, row := range s.sessions {
		if row.expires <= now {
			delete(s.sessions, k)
			sessions++
		}
	}
	for k, r := range s.vault {
		if r.ExpiresAt.UnixMicro() <= now {
			delete(s.vault, k)
			vault++
		}
	}
	return sessions, vault, nil
}
