package memento_test

import (
	"context"
	"sync"
	"testing"

	"github.com/mementohq/memento"
)

// TestCloseConcurrently: closing an engine from two goroutines at once is
// safe (go test -race) and both return.
func TestCloseConcurrently(t *testing.T) {
	eng, err := memento.Open(context.Background(), memento.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _ = eng.Close() })
	}
	wg.Wait()
	if err := eng.Close(); err != nil {
		t.Fatalf("a third close: %v", err)
	}
}
