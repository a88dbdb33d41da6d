package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow"
)

// A welcome workflow whose second step sends an email through the
// operation ledger. The mailer's first answer is lost after it sent the
// email (a timeout): the call is recorded as unknown, reconciled through
// the mailer's lookup by idempotency key, and the email is not sent again.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "memento-workflow")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	eng, err := memento.Open(ctx, memento.Config{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	// The outside world: a mailer that keeps what it sent by idempotency key.
	var mu sync.Mutex
	outbox := map[string]string{} // idempotency key -> message id
	answerLost := true
	mail := func(key, to string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		id, ok := outbox[key]
		if !ok {
			id = fmt.Sprintf("msg-%d", len(outbox)+1)
			outbox[key] = id
		}
		if answerLost {
			answerLost = false
			return "", errors.New("mailer: timeout") // sent, but the answer never came
		}
		return id, nil
	}

	wf := workflow.New(eng.Runs, eng.Ops, workflow.Options{Tenant: "acme"})
	// A tool is registered with its lookup: how to ask the outside world
	// whether a request with an idempotency key was applied.
	if err := wf.RegisterTool(toolop.Tool{Name: "mailer.send", ContractVersion: "1",
		Lookup: func(ctx context.Context, key string) (toolop.LookupResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if id, ok := outbox[key]; ok {
				return toolop.LookupResult{Answer: toolop.Applied, ExternalRef: id}, nil
			}
			return toolop.LookupResult{Answer: toolop.NotApplied}, nil
		}}); err != nil {
		log.Fatal(err)
	}
	err = wf.Register(workflow.Workflow{Name: "welcome", Version: "1", Steps: []workflow.Step{
		{Name: "compose", Run: func(ctx context.Context, sc *workflow.StepContext) error {
			var user string
			if _, err := sc.Get("user", &user); err != nil {
				return err
			}
			return sc.Set("subject", "Welcome, "+user+"!")
		}},
		{Name: "send", Run: func(ctx context.Context, sc *workflow.StepContext) error {
			var user, subject string
			if _, err := sc.Get("user", &user); err != nil {
				return err
			}
			if _, err := sc.Get("subject", &subject); err != nil {
				return err
			}
			// Key names the side effect: one welcome email per user.
			op, err := sc.Call(ctx, workflow.Call{Tool: "mailer.send", Key: "welcome:" + user,
				Request: map[string]string{"to": user, "subject": subject},
				Send: func(ctx context.Context, key string) (workflow.Reply, error) {
					id, err := mail(key, user)
					return workflow.Reply{ExternalRef: id}, err
				}})
			if err != nil {
				return err
			}
			return sc.Set("message_id", op.ExternalRef)
		}},
	}})
	if err != nil {
		log.Fatal(err)
	}

	// Execute creates the run and drives it here; a crashed process calls
	// it again with the same run id (or leaves the run to wf.Serve).
	r, err := wf.Execute(ctx, "welcome", "welcome-ann", map[string]string{"user": "ann"})
	if err != nil {
		log.Fatal(err)
	}
	var state struct {
		Subject   string `json:"subject"`
		MessageID string `json:"message_id"`
	}
	if err := json.Unmarshal(r.State, &state); err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Status, state.Subject, state.MessageID, "emails sent:", len(outbox))
	// Output:
	// completed Welcome, ann! msg-1 emails sent: 1
}
