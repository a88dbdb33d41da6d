package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/memstore"
)

// countingVault is a pii.Store that counts the records it holds.
type countingVault struct {
	pii.Store
	mu   sync.Mutex
	live map[string]bool
}

func (c *countingVault) PutRecords(ctx context.Context, recs []pii.Record) error {
	if err := c.Store.PutRecords(ctx, recs); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		c.live[r.ID] = true
	}
	return nil
}

func (c *countingVault) DeleteRecord(ctx context.Context, tenantID, id string) error {
	if err := c.Store.DeleteRecord(ctx, tenantID, id); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.live, id)
	return nil
}

func (c *countingVault) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.live)
}

// countedService is a session service over memstore whose vault counts its records.
func countedService(t *testing.T, o session.Options) (*session.Service, *countingVault) {
	t.Helper()
	st := memstore.New()
	cv := &countingVault{Store: st, live: map[string]bool{}}
	v, err := pii.NewVault(cv, pii.VaultOptions{Key: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	o.Redactor = v
	return session.NewService(st, o), cv
}

// TestRefusedWritesLeaveNoPersonalData: a session write that fails after
// its personal data was protected (another user's session, a stale
// revision, a state too large, a missing session) leaves no vault record.
func TestRefusedWritesLeaveNoPersonalData(t *testing.T) {
	ctx := context.Background()
	svc, cv := countedService(t, session.Options{MaxStateBytes: 4096})
	if _, _, err := svc.Put(ctx, "t1", "own", session.PutRequest{UserID: "u1", State: json.RawMessage(`{"mail":"ann@example.com"}`)}); err != nil {
		t.Fatal(err)
	}
	if cv.count() != 1 {
		t.Fatalf("%d vault records after one e-mail, want 1", cv.count())
	}
	many := make([]string, 300)
	for i := range many {
		many[i] = "w" + strings.Repeat("x", i%7) + "@example.com"
	}
	big, _ := json.Marshal(map[string]any{"mails": strings.Join(many, " ")})
	for name, do := range map[string]func() error{
		"another user's session": func() error {
			_, _, err := svc.Put(ctx, "t1", "own", session.PutRequest{UserID: "u2", State: json.RawMessage(`{"m":"w1@x.co w2@x.co"}`)})
			return err
		},
		"a stale patch": func() error {
			_, err := svc.Patch(ctx, "t1", "own", "u1", 7, json.RawMessage(`{"m":"w1@x.co"}`))
			return err
		},
		"a state too large": func() error {
			_, _, err := svc.Put(ctx, "t1", "own", session.PutRequest{UserID: "u1", State: big})
			return err
		},
		"a missing session's messages": func() error {
			_, err := svc.Append(ctx, "t1", "nosuch", "u1", []session.MessageInput{{Role: "user", Content: "w1@x.co"}})
			return err
		},
		"a missing session's summary": func() error {
			_, err := svc.SetSummary(ctx, "t1", "nosuch", "u1", session.Summary{Text: "mail w1@x.co", ThroughSeq: 1})
			return err
		},
	} {
		if err := do(); err == nil {
			t.Fatalf("%s: succeeded", name)
		}
		if n := cv.count(); n != 1 {
			t.Fatalf("%s: %d vault records, want the 1 of the stored session", name, n)
		}
	}
	if _, err := svc.Get(ctx, "t1", "own", "u1"); err != nil && !errors.Is(err, session.ErrNotFound) {
		t.Fatal(err)
	}
}

// TestKeyedAppendRetryLeavesNoPersonalData: a retried keyed append (a
// replay) and one refused for its key keep the vault records of the first
// append only.
func TestKeyedAppendRetryLeavesNoPersonalData(t *testing.T) {
	ctx := context.Background()
	svc, cv := countedService(t, session.Options{})
	if _, _, err := svc.Put(ctx, "t1", "s", session.PutRequest{UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	msgs := []session.MessageInput{{Role: "user", Content: "mail ann@example.com"}}
	first, err := svc.AppendKeyed(ctx, "t1", "s", "u1", msgs, "k")
	if err != nil || cv.count() != 1 {
		t.Fatalf("first append: %v, %d vault records, want 1", err, cv.count())
	}
	again, err := svc.AppendKeyed(ctx, "t1", "s", "u1", msgs, "k")
	if err != nil || !again.Replayed || again.Messages[0].Content != first.Messages[0].Content {
		t.Fatalf("retry: %+v %v, want the first append's message", again, err)
	}
	if _, err := svc.AppendKeyed(ctx, "t1", "s", "u1", []session.MessageInput{{Role: "user", Content: "mail bob@example.com"}}, "k"); !errors.Is(err, session.ErrIdempotencyMismatch) {
		t.Fatalf("the key with other messages: %v", err)
	}
	if cv.count() != 1 {
		t.Fatalf("%d vault records after a retry and a mismatch, want the first append's 1", cv.count())
	}
}
