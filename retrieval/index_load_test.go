package retrieval

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// slowRows is a store whose IndexRows takes delay and honours its context;
// only IndexRows is called by the index cache.
type slowRows struct {
	Store
	delay time.Duration
	calls atomic.Int32
}

func (s *slowRows) IndexRows(ctx context.Context, tenantID, model string, after int64) ([]IndexRow, []Invalidation, int64, error) {
	s.calls.Add(1)
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, nil, 0, ctx.Err()
	}
	rows := []IndexRow{{ChunkID: ChunkID("d1", 1, 0), DocumentID: "d1", Version: 1, ACL: []string{"tenant"}, Terms: EncodeTerms("payments runbook")}}
	return rows, nil, 7, nil
}

// TestIndexLoadOutlivesTheRequest: a first load slower than the request's
// deadline fails that request, goes on by itself, and serves the next
// requests, which neither start it over nor wait for a second one.
func TestIndexLoadOutlivesTheRequest(t *testing.T) {
	st := &slowRows{delay: 2 * time.Second}
	c := newIndexCache(st, nil, 4)
	short := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, _, err := c.search(ctx, "t", 7, []string{"tenant"}, []string{"payment"}, nil, 3)
		return err
	}
	if err := short(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first search: %v, want the deadline", err)
	}
	if err := short(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second search while loading: %v, want the deadline", err)
	}
	// A patient request waits for the same load, not for a new one.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	text, _, err := c.search(ctx, "t", 7, []string{"tenant"}, []string{"payment"}, nil, 3)
	if err != nil || len(text) != 1 {
		t.Fatalf("search after the load: %v, %v", text, err)
	}
	if n := st.calls.Load(); n != 1 {
		t.Fatalf("the store was read %d times, want one load shared by every request", n)
	}
}
