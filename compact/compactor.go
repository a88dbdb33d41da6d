package compact

import (
	"context"

	"github.com/mementohq/memento/tokens"
)

// Compactor condenses the items of one range into a Draft. It must cite,
// for every fact, question, decision and carried item, seqs inside
// in.Range; the Service validates that and refuses the whole draft
// otherwise. An error means no summary: never return half of one.
type Compactor interface {
	Identity() Identity
	Compact(ctx context.Context, in Input) (Draft, error)
}

// Input is one compaction job.
type Input struct {
	Owner Owner
	Range Range
	// Items are exactly the items of Range, in seq order.
	Items []Item
	// Previous is the summary of the range before, if any (context for a
	// model; its facts are not copied: each summary covers its own range).
	Previous *Summary
	// Counter counts tokens for the target model; Budget is the most
	// tokens the draft's Text should take (0: the compactor's default).
	Counter tokens.Counter
	Budget  int
}
