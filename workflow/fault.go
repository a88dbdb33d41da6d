package workflow

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// Fault points a test can stop a worker at, named by the environment
// variable MEMENTO_FAULT_POINT (optionally restricted to one run by
// MEMENTO_FAULT_RUN). When reached, the worker prints a line to stderr and
// blocks until its context ends, so the test can SIGKILL it right there.
const (
	FaultBeforeCall      = "before_call"      // operation marked started, request not sent
	FaultAfterSend       = "after_send"       // request written to the wire, no response read
	FaultAfterResponse   = "after_response"   // response received, not yet recorded in the ledger
	FaultAfterCheckpoint = "after_checkpoint" // the step that made the call is committed
)

var faultPoint, faultRun = os.Getenv("MEMENTO_FAULT_POINT"), os.Getenv("MEMENTO_FAULT_RUN")

// Fault pauses at the named point if the environment asks for it; otherwise
// it returns at once. Tools call it too (FaultAfterSend lives in a client).
func Fault(ctx context.Context, point, runID string) {
	if faultPoint == "" || !strings.EqualFold(faultPoint, point) {
		return
	}
	if faultRun != "" && faultRun != runID {
		return
	}
	fmt.Fprintf(os.Stderr, "memento: fault point %s reached (run %s); pausing\n", point, runID)
	<-ctx.Done()
}
