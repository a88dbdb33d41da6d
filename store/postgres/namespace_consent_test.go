package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mementohq/memento/memory"
)

// Through the service, concurrently, as two instances do: adds without
// consent race a declaration as personal; once it succeeded, no claim
// without consent may be current in the namespace (before the store
// checked, the writes in flight when it was declared stayed current
// without consent). The conformance case PersonalRefusesUnconsented
// orders each interleaving on every backend.
func TestNamespacePersonalDeclarationRacesAdds(t *testing.T) {
	db := openTestDB(t)
	ctx := ctxT(t)
	writer, declarer := memory.NewService(db, memory.Options{}), memory.NewService(db, memory.Options{})
	tenant := "t-" + uuid.NewString()
	for trial := range 40 {
		ns := fmt.Sprintf("ns%d", trial)
		var stop atomic.Bool
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					_, _ = writer.Add(ctx, tenant, memory.AddInput{SubjectID: fmt.Sprintf("u%d-%d", w, i), Namespace: ns, Key: "k",
						Value: json.RawMessage(`1`), Provenance: memory.Provenance{SourceType: "message", SourceID: "m", ValidatedBy: "user_stated"}})
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
		// Declare while the first writes are in flight: the service counts
		// none yet, the writers read the namespace as not personal.
		time.Sleep(time.Duration(trial%4) * time.Millisecond)
		_, err := declarer.DeclareNamespace(ctx, memory.Namespace{TenantID: tenant, Name: ns, Personal: true})
		if err != nil && !errors.Is(err, memory.ErrNoConsent) {
			t.Fatal(err)
		}
		declared := err == nil
		time.Sleep(20 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		if !declared {
			continue
		}
		n, err := db.Unconsented(ctx, tenant, ns)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Fatalf("trial %d: namespace %s declared personal, yet holds %d current claims without consent", trial, ns, n)
		}
	}
}
